import { webhookProtocol, type PendingDelivery } from './protocol.ts';
import type { WebhookConfig } from '../../config.ts';
import type { Logger } from '../../log.ts';
import { actorClient, type ActorContext } from '../../runtime/actor.ts';
import type { Transport } from '../../runtime/types.ts';
import { platformScope } from '../../store/collection.ts';
import type { DeliveryAttempts, LoadedWebhook } from '../../webhooks/delivery-attempts.ts';
import { orgScope, type DeliveryDoc, type WebhookCollections } from '../../webhooks/webhook-store.ts';

/** The actor's state: the webhook as its attempts use it (null once deleted). */
export interface WebhookState {
  hook: LoadedWebhook | null;
}

type Ctx = ActorContext<WebhookState>;

/** Deliveries a webhook holds in memory; beyond this they wait in the store, where the sweep finds them. */
const laneQueueMax = 10_000;
/** A loaded webhook is trusted this long; a change made through the API also replaces it at once (`changed`). */
const webhookCacheMs = 1_000;
/** How long a settled delivery is remembered, so a store read that began before it settled does not start it again. */
const settledMemoryMs = 30_000;

interface Lane {
  webhookId: string;
  tenantId: string;
  queue: DeliveryDoc[];
  /** Queued or in flight here: a sweep or a redelivered message does not start them twice. */
  known: Set<string>;
  /** Deliveries whose attempt finished lately, with when. */
  settled: Map<string, number>;
  /**
   * Deliveries being attempted in this process. Like `settled`, shared with
   * the lane that replaces this one when the key comes back to this process,
   * so an attempt still under way here is not started a second time.
   */
  attempting: Set<string>;
  running: number;
  hook: { loaded: LoadedWebhook | null; at: number } | undefined;
  sweepScheduled: boolean;
  /** The actor's `ctx.owned` when the lane was made: once aborted, the lane starts nothing more. */
  owned: AbortSignal;
}

/**
 * The state of the webhook actors (`webhook:<id>`) this process hosts. An
 * actor's messages are handled one at a time, but its deliveries are not
 * attempted inside the handler: the handler queues them in the webhook's
 * lane, which runs up to `concurrency` attempts at once, so a slow endpoint
 * holds only its own lane, never the actor's shard, another webhook or the
 * send path. What a lane holds is also in the store (`pending` with
 * `nextAttemptAt`): a sweep, kept scheduled while deliveries are pending,
 * restarts whatever a dead worker was holding. A lane lives while this
 * process owns the webhook's key (`ctx.owned`): when the shard goes to
 * another worker, what waited in the lane is dropped and left to the new
 * owner, and only the attempts already under way finish here.
 */
export class WebhookLanes {
  private readonly lanes = new Map<string, Lane>();
  /** The lanes made under each ownership signal: one listener per signal, not one per lane. */
  private readonly byOwnership = new Map<AbortSignal, Set<Lane>>();
  private readonly inFlight = new Set<Promise<void>>();
  private stopping = false;

  private readonly client;

  constructor(
    private readonly deps: {
      attempts: DeliveryAttempts;
      db: WebhookCollections;
      runtime: Transport;
      config: WebhookConfig;
      log: Logger;
    },
  ) {
    this.client = actorClient(deps.runtime, webhookProtocol);
  }

  /** The actor's activation: the webhook as stored now, or null once deleted. */
  async load(webhookId: string): Promise<LoadedWebhook | null> {
    const entry = await this.deps.db.index.findOne(platformScope, { id: webhookId });
    return entry ? this.deps.attempts.loadWebhook(entry.orgId, webhookId) : null;
  }

  /** Deliveries held here, waiting or in flight (the pending gauge). */
  get size(): number {
    let n = 0;
    for (const lane of this.lanes.values()) n += lane.queue.length + lane.running;
    return n;
  }

  async accept(ctx: Ctx, tenantId: string, deliveries: PendingDelivery[]): Promise<void> {
    const lane = this.lane(ctx, tenantId);
    let fresh: DeliveryDoc[] = deliveries;
    if (ctx.delivery > 1) {
      // Handled before by a worker that died before acknowledging: attempt only what is still pending.
      const readAt = Date.now();
      const pending = await this.deps.db.deliveries.find(orgScope(tenantId), {
        id: { $in: deliveries.map((d) => d.id) },
        status: 'pending',
      });
      fresh = pending.filter((d) => !this.settledSince(lane, d.id, readAt));
    }
    for (const d of fresh) this.enqueue(lane, d);
    this.pump(ctx.key, lane);
    await this.keepSwept(ctx, lane);
  }

  async retry(ctx: Ctx, tenantId: string, deliveryId: string): Promise<void> {
    const lane = this.lane(ctx, tenantId);
    if (lane.known.has(deliveryId) || lane.attempting.has(deliveryId)) return;
    const readAt = Date.now();
    const doc = await this.deps.db.deliveries.findOne(orgScope(tenantId), {
      id: deliveryId,
      webhookId: ctx.key,
      status: 'pending',
    });
    if (doc && !this.settledSince(lane, doc.id, readAt)) this.enqueue(lane, doc);
    this.pump(ctx.key, lane);
  }

  /** Picks up pending deliveries that are due and not held here; stays scheduled while any delivery is pending. */
  async sweep(ctx: Ctx, tenantId: string): Promise<void> {
    const lane = this.lane(ctx, tenantId);
    lane.sweepScheduled = false;
    const room = laneQueueMax - lane.queue.length;
    if (room > 0) {
      const readAt = Date.now();
      const due = await this.deps.db.deliveries.find(
        orgScope(tenantId),
        { webhookId: ctx.key, status: 'pending', nextAttemptAt: { $lte: new Date().toISOString() } },
        { sort: { nextAttemptAt: 1 }, limit: room },
      );
      for (const d of due) if (!this.settledSince(lane, d.id, readAt)) this.enqueue(lane, d);
      this.pump(ctx.key, lane);
    }
    await this.keepSwept(ctx, lane);
  }

  /** The webhook was changed or deleted through the API: from the answer on, every attempt uses it as it is now. */
  async changed(ctx: Ctx, tenantId: string): Promise<void> {
    const loaded = await this.deps.attempts.loadWebhook(tenantId, ctx.key);
    ctx.state.hook = loaded;
    this.lane(ctx, tenantId).hook = { loaded, at: Date.now() };
  }

  /** Starts nothing more and waits for the attempts in flight (each ends within the attempt timeout); what waited stays pending in the store. */
  async stop(): Promise<void> {
    this.stopping = true;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }

  /** The webhook's lane; the actor's state, when it was just loaded, is what its attempts use. */
  private lane(ctx: Ctx, tenantId: string): Lane {
    let lane = this.lanes.get(ctx.key);
    if (!lane || lane.owned !== ctx.owned) {
      const before = lane;
      lane = {
        webhookId: ctx.key,
        tenantId,
        queue: [],
        known: new Set(),
        settled: before?.settled ?? new Map(),
        attempting: before?.attempting ?? new Set(),
        running: 0,
        hook: undefined,
        sweepScheduled: false,
        owned: ctx.owned,
      };
      // A handler still finishing after its key left this process gets a lane that never starts anything.
      if (!ctx.owned.aborted) {
        this.lanes.set(ctx.key, lane);
        this.watchOwnership(lane);
      }
    }
    if (!lane.hook) lane.hook = { loaded: ctx.state.hook, at: Date.now() };
    return lane;
  }

  private watchOwnership(lane: Lane): void {
    const signal = lane.owned;
    let lanes = this.byOwnership.get(signal);
    if (!lanes) {
      lanes = new Set();
      this.byOwnership.set(signal, lanes);
      signal.addEventListener(
        'abort',
        () => {
          this.byOwnership.delete(signal);
          for (const l of lanes!) this.disown(l);
        },
        { once: true },
      );
    }
    lanes.add(lane);
  }

  /**
   * The webhook's key left this process: deliveries waiting here are not
   * started (the new owner's sweep finds them pending). The lane stays in
   * the map until a successor replaces it, for what it is still attempting.
   */
  private disown(lane: Lane): void {
    for (const d of lane.queue) lane.known.delete(d.id);
    lane.queue.length = 0;
  }

  private settledSince(lane: Lane, id: string, since: number): boolean {
    return (lane.settled.get(id) ?? 0) >= since;
  }

  private enqueue(lane: Lane, d: DeliveryDoc): void {
    if (lane.known.has(d.id) || lane.attempting.has(d.id) || lane.queue.length >= laneQueueMax) return;
    lane.known.add(d.id);
    lane.queue.push(d);
  }

  private async keepSwept(ctx: Ctx, lane: Lane): Promise<void> {
    if (lane.sweepScheduled) return;
    const pending =
      lane.known.size > 0 ||
      (await this.deps.db.deliveries.findOne(orgScope(lane.tenantId), { webhookId: ctx.key, status: 'pending' })) !==
        null;
    if (!pending) return;
    lane.sweepScheduled = true;
    await ctx.send(
      webhookProtocol,
      ctx.key,
      { kind: 'sweep', tenantId: lane.tenantId },
      { delayMs: this.deps.config.sweepMs },
    );
  }

  private pump(webhookId: string, lane: Lane): void {
    while (
      !this.stopping &&
      !lane.owned.aborted &&
      lane.running < this.deps.config.concurrency &&
      lane.queue.length > 0
    ) {
      const d = lane.queue.shift()!;
      lane.running++;
      lane.attempting.add(d.id);
      // The endpoint's slot is free once it answered; the delivery stays known here until its outcome is stored.
      let slotHeld = true;
      const freeSlot = () => {
        if (!slotHeld) return;
        slotHeld = false;
        lane.running--;
        if (!this.stopping) this.pump(webhookId, lane);
      };
      const running: Promise<void> = this.run(webhookId, lane, d, freeSlot).finally(() => {
        this.inFlight.delete(running);
        freeSlot();
        lane.known.delete(d.id);
        lane.attempting.delete(d.id);
        const now = Date.now();
        lane.settled.set(d.id, now);
        // Oldest first (insertion order): drop what no read in progress can still be older than.
        for (const [id, at] of lane.settled) {
          if (now - at < settledMemoryMs) break;
          lane.settled.delete(id);
        }
      });
      this.inFlight.add(running);
    }
  }

  private async run(webhookId: string, lane: Lane, d: DeliveryDoc, onSent: () => void): Promise<void> {
    try {
      const hook = await this.webhook(webhookId, lane);
      // Deleted: its deliveries went with it. Or the key left this process while the webhook was read: the new owner makes the attempt.
      if (!hook || lane.owned.aborted) return;
      if (!hook.doc.enabled) {
        await this.deps.attempts.abandon(d, 'webhook disabled');
        return;
      }
      const { doc, step } = await this.deps.attempts.attempt(hook, d, { onSent });
      if (step.kind === 'gone') lane.hook = undefined;
      if (doc && step.kind === 'retry') {
        await this.client.send(
          webhookId,
          { kind: 'retry', tenantId: lane.tenantId, deliveryId: d.id },
          { delayMs: step.delayMs },
        );
      }
    } catch (err) {
      // The delivery stays pending in the store; the sweep tries it again.
      this.deps.log.warn({ err, webhookId, deliveryId: d.id }, 'webhook attempt could not run');
    }
  }

  private async webhook(webhookId: string, lane: Lane): Promise<LoadedWebhook | null> {
    const cached = lane.hook;
    if (cached && Date.now() - cached.at < webhookCacheMs) return cached.loaded;
    const loaded = await this.deps.attempts.loadWebhook(lane.tenantId, webhookId);
    lane.hook = { loaded, at: Date.now() };
    return loaded;
  }
}
