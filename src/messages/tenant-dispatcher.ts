import type { Config } from '../config.ts';
import { domainEvent, messageEventData, type EventStream } from '../events/event-stream.ts';
import { nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { RelayCollections, RelayDoc } from '../relays/relay-store.ts';
import type { RelayLink } from '../relays/relay-link.ts';
import type { ActorContext } from '../runtime/types.ts';
import type { Scope } from '../store/collection.ts';
import type { MessageDoc, MessagingCollections } from './message-store.ts';
import { SendQueue, type QueuedMessage } from './send-queue.ts';

export const tenantActorType = 'tenant';

interface OnlineRelay {
  id: string;
  node: string;
  session: number;
  capacity: number;
  phoneNumbers: string[];
  inFlight: Set<string>;
}

interface TenantState {
  queue: SendQueue;
  relays: Map<string, OnlineRelay>;
  /** The one live chain of sweep timers; a timer of another chain is dropped. */
  sweepChain: string | undefined;
}

export type RelayReport = { relayId: string; session: number };
export type StatusReport = RelayReport & { messageId: string; status: 'sent' | 'delivered' | 'read' | 'failed'; at: string; error?: string; guid?: string };

type Deps = {
  config: Pick<Config, 'messageRetryBaseMs' | 'messageMaxAttempts' | 'messageSendTimeoutMs' | 'tenantSweepMs' | 'relayHeartbeatTimeoutMs'>;
  db: MessagingCollections & RelayCollections;
  events: EventStream;
  link: RelayLink;
  log: Logger;
};

/**
 * The tenant actor's work: the organization's send queue and its relays'
 * credits. The store is the truth; this state is rebuilt from it on first use
 * and on every sweep, so a crash, a takeover or a lost timer heals. Every
 * status change is one compare-and-set on the message, so a replayed actor
 * message never moves a message backwards.
 */
export class TenantDispatcher {
  private readonly tenants = new Map<string, TenantState>();

  constructor(private readonly deps: Deps) {}

  private scope(orgId: string): Scope {
    return { tenantId: orgId };
  }

  /**
   * The tenant's live state, rebuilt from the store on first use. Only a
   * fully rebuilt state is kept, and it always has a sweep chain: a sweep
   * timer that arrives for a tenant with none is adopted as its chain.
   */
  private async state(ctx: ActorContext, orgId: string, adoptChain?: string): Promise<TenantState> {
    let state = this.tenants.get(orgId);
    if (!state) {
      const fresh: TenantState = { queue: new SendQueue(), relays: new Map(), sweepChain: undefined };
      await this.rebuild(orgId, fresh);
      this.tenants.set(orgId, fresh);
      state = fresh;
    }
    if (state.sweepChain === undefined) {
      if (adoptChain !== undefined) {
        state.sweepChain = adoptChain;
      } else {
        await ctx.send(tenantActorType, orgId, { kind: 'sweep', chain: ctx.msgId }, { delayMs: this.deps.config.tenantSweepMs });
        state.sweepChain = ctx.msgId;
      }
    }
    return state;
  }

  /** Reads the queue and the relays' in-flight sends back from the store. */
  private async rebuild(orgId: string, state: TenantState): Promise<void> {
    const { messages, relays } = this.deps.db;
    const scope = this.scope(orgId);
    const [queued, processing, online] = await Promise.all([
      messages.find(scope, dueQueued(), { sort: { priority: -1, createdAt: 1 } }),
      messages.find(scope, { status: 'processing' }),
      relays.find(scope, { status: 'online' }),
    ]);
    state.queue.clear();
    for (const m of queued) state.queue.push(queueItem(m));
    state.relays.clear();
    for (const r of online) state.relays.set(r.id, onlineRelay(r));
    for (const m of processing) {
      const relay = m.relayId ? state.relays.get(m.relayId) : undefined;
      if (relay) relay.inFlight.add(m.id);
      else await this.handBack(orgId, state, m.id, m.relayId);
    }
  }

  async enqueue(ctx: ActorContext, orgId: string, items: QueuedMessage[]): Promise<void> {
    const state = await this.state(ctx, orgId);
    for (const item of items) state.queue.push(item);
    await this.pump(ctx, orgId, state);
  }

  /**
   * The periodic check of a tenant: relays and orphaned sends are reconciled
   * with the store every time; queued messages a lost actor message left
   * behind are looked for only when a relay could take them and nothing is
   * waiting in memory, so a long backlog costs nothing here.
   */
  async sweep(ctx: ActorContext, orgId: string, chain: string): Promise<void> {
    const cold = !this.tenants.has(orgId);
    const state = await this.state(ctx, orgId, chain);
    if (state.sweepChain !== chain) return;
    if (!cold) await this.reconcile(orgId, state);
    await this.pump(ctx, orgId, state);
    // No TTL indexes on every MongoDB wire server: expired Idempotency-Keys are removed here.
    await this.deps.db.idempotency.deleteMany(this.scope(orgId), { expiresAt: { $lte: nowIso() } });
    const busy = state.queue.size > 0 || state.relays.size > 0 || (await this.deps.db.messages.findOne(this.scope(orgId), { status: { $in: ['queued', 'processing'] } })) !== null;
    if (!busy) {
      this.tenants.delete(orgId);
      return;
    }
    await ctx.send(tenantActorType, orgId, { kind: 'sweep', chain }, { delayMs: this.deps.config.tenantSweepMs });
  }

  private async reconcile(orgId: string, state: TenantState): Promise<void> {
    const { messages, relays } = this.deps.db;
    const scope = this.scope(orgId);
    const online = await relays.find(scope, { status: 'online' });
    const onlineIds = online.map((r) => r.id);
    for (const id of [...state.relays.keys()]) if (!onlineIds.includes(id)) state.relays.delete(id);
    for (const doc of online) {
      const known = state.relays.get(doc.id);
      if (known && known.session === doc.session) {
        known.capacity = doc.capacity;
        continue;
      }
      state.relays.set(doc.id, await this.withInFlight(orgId, doc));
    }
    for (const m of await messages.find(scope, { status: 'processing', relayId: { $nin: onlineIds } }, { limit: 500 })) {
      await this.handBack(orgId, state, m.id, m.relayId);
    }
    const canSend = [...state.relays.values()].some((r) => r.inFlight.size < r.capacity);
    if (canSend && state.queue.size === 0) {
      for (const m of await messages.find(scope, dueQueued(), { sort: { priority: -1, createdAt: 1 }, limit: 500 })) state.queue.push(queueItem(m));
    }
  }

  async relayOnline(ctx: ActorContext, orgId: string, relayId: string, session: number): Promise<void> {
    const state = await this.state(ctx, orgId);
    const doc = await this.deps.db.relays.findOne(this.scope(orgId), { id: relayId, session, status: 'online' });
    if (!doc) return; // an older connection's news
    // A reconnecting agent still holds what it was given before (it re-reports those statuses): they keep their credit.
    state.relays.set(relayId, await this.withInFlight(orgId, doc));
    await this.deps.events.append([domainEvent('relay.online', { tenantId: orgId, teamId: doc.teamId }, relayEventData(doc))]);
    await ctx.send(tenantActorType, orgId, { kind: 'relay-check', relayId, session }, { delayMs: this.deps.config.relayHeartbeatTimeoutMs });
    await this.pump(ctx, orgId, state);
  }

  async relayReady(ctx: ActorContext, orgId: string, report: RelayReport & { capacity: number }): Promise<void> {
    const state = await this.state(ctx, orgId);
    const relay = state.relays.get(report.relayId);
    if (!relay || relay.session !== report.session) return;
    relay.capacity = report.capacity;
    await this.pump(ctx, orgId, state);
  }

  /** A heartbeat timer: a relay whose last heartbeat is older than the timeout goes offline. */
  async relayCheck(ctx: ActorContext, orgId: string, report: RelayReport): Promise<void> {
    const doc = await this.deps.db.relays.findOne(this.scope(orgId), { id: report.relayId, session: report.session, status: 'online' });
    if (!doc) return;
    const silentMs = Date.now() - Date.parse(doc.lastHeartbeat ?? doc.updatedAt);
    const timeout = this.deps.config.relayHeartbeatTimeoutMs;
    if (silentMs >= timeout) return this.relayOffline(ctx, orgId, report, 'heartbeat timeout');
    await ctx.send(tenantActorType, orgId, { kind: 'relay-check', ...report }, { delayMs: Math.max(50, timeout - silentMs) });
  }

  async relayOffline(ctx: ActorContext, orgId: string, report: RelayReport, reason: string): Promise<void> {
    const state = await this.state(ctx, orgId);
    const now = nowIso();
    const doc = await this.deps.db.relays.updateOne(this.scope(orgId), { id: report.relayId, session: report.session, status: 'online' }, { $set: { status: 'offline', node: null, updatedAt: now } });
    const relay = state.relays.get(report.relayId);
    if (relay && relay.session === report.session) state.relays.delete(report.relayId);
    if (!doc) return;
    this.deps.log.info({ tenantId: orgId, relayId: report.relayId, reason }, 'relay offline');
    const inFlight = await this.deps.db.messages.find(this.scope(orgId), { status: 'processing', relayId: report.relayId });
    for (const m of inFlight) await this.handBack(orgId, state, m.id, report.relayId);
    await this.deps.events.append([domainEvent('relay.offline', { tenantId: orgId, teamId: doc.teamId }, relayEventData(doc))]);
    await this.pump(ctx, orgId, state);
  }

  /** An online relay with the sends the store says it holds, each taking a credit. */
  private async withInFlight(orgId: string, doc: RelayDoc): Promise<OnlineRelay> {
    const relay = onlineRelay(doc);
    for (const m of await this.deps.db.messages.find(this.scope(orgId), { status: 'processing', relayId: doc.id }, { limit: 10_000 })) relay.inFlight.add(m.id);
    return relay;
  }

  /** A message in flight on a relay that went away is queued again; the attempt it was on does not count. */
  private async handBack(orgId: string, state: TenantState, messageId: string, relayId: string | null): Promise<void> {
    const doc = await this.deps.db.messages.updateOne(
      this.scope(orgId),
      { id: messageId, status: 'processing', relayId },
      { $set: { status: 'queued', relayId: null, updatedAt: nowIso() }, $inc: { attempts: -1 } },
    );
    if (doc) state.queue.pushFront(queueItem(doc));
  }

  async status(ctx: ActorContext, orgId: string, report: StatusReport): Promise<void> {
    const state = await this.state(ctx, orgId);
    const { messages } = this.deps.db;
    const scope = this.scope(orgId);
    const at = report.at;
    const guid = report.guid ? { guid: report.guid } : {};
    // Sent, delivered or failed: the relay is done with the send, so its credit is free again.
    const released = report.status !== 'read' && (state.relays.get(report.relayId)?.inFlight.delete(report.messageId) ?? false);
    if (report.status === 'sent') {
      const doc = await messages.updateOne(scope, { id: report.messageId, relayId: report.relayId, status: 'processing' }, { $set: { status: 'sent', sentAt: at, lastError: null, updatedAt: nowIso(), ...guid } });
      if (doc) await this.deps.events.append([domainEvent('message.sent', doc, messageEventData(doc))]);
    } else if (report.status === 'delivered') {
      const doc = await messages.updateOne(scope, { id: report.messageId, relayId: report.relayId, status: { $in: ['processing', 'sent'] } }, { $set: { status: 'delivered', deliveredAt: at, updatedAt: nowIso(), ...guid } });
      if (doc && doc.sentAt === null) {
        // Delivered with no sent report before it: it was sent, so say so once.
        const sent = await messages.updateOne(scope, { id: doc.id, sentAt: null }, { $set: { sentAt: at } });
        if (sent) await this.deps.events.append([domainEvent('message.sent', sent, messageEventData(sent))]);
      }
    } else if (report.status === 'read') {
      await messages.updateOne(scope, { id: report.messageId, relayId: report.relayId, status: { $in: ['sent', 'delivered'] }, readAt: null }, { $set: { readAt: at, updatedAt: nowIso() } });
    } else {
      await this.failAttempt(ctx, orgId, report.messageId, report.relayId, report.error ?? 'the relay could not send it');
    }
    if (released || report.status === 'failed') await this.pump(ctx, orgId, state);
  }

  async sendTimeout(ctx: ActorContext, orgId: string, messageId: string, relayId: string, attempt: number): Promise<void> {
    const state = await this.state(ctx, orgId);
    const doc = await this.deps.db.messages.findOne(this.scope(orgId), { id: messageId, status: 'processing', relayId, attempts: attempt });
    if (!doc) return;
    state.relays.get(relayId)?.inFlight.delete(messageId);
    await this.failAttempt(ctx, orgId, messageId, relayId, `the relay did not report on the send within ${this.deps.config.messageSendTimeoutMs} ms`);
    await this.pump(ctx, orgId, state);
  }

  /** Retries with backoff (base, then 4x, with jitter) until the attempts run out; then failed, dead-lettered, message.failed. */
  private async failAttempt(ctx: ActorContext, orgId: string, messageId: string, relayId: string, error: string): Promise<void> {
    const { messages } = this.deps.db;
    const scope = this.scope(orgId);
    const current = await messages.findOne(scope, { id: messageId, status: 'processing', relayId });
    if (!current) return;
    const now = nowIso();
    if (current.attempts < this.deps.config.messageMaxAttempts) {
      const delayMs = backoffMs(this.deps.config.messageRetryBaseMs, current.attempts);
      const retry = await messages.updateOne(scope, { id: messageId, status: 'processing', relayId, attempts: current.attempts }, {
        $set: { status: 'queued', relayId: null, lastError: error, nextAttemptAt: new Date(Date.now() + delayMs).toISOString(), updatedAt: now },
      });
      if (retry) await ctx.send(tenantActorType, orgId, { kind: 'retry', messageId }, { delayMs });
      return;
    }
    const failed = await messages.updateOne(scope, { id: messageId, status: 'processing', relayId, attempts: current.attempts }, {
      $set: { status: 'failed', lastError: error, failedAt: now, deadLettered: true, updatedAt: now },
    });
    if (failed) {
      this.deps.log.warn({ tenantId: orgId, msgId: messageId, attempts: failed.attempts, error }, 'message failed after every attempt');
      await this.deps.events.append([domainEvent('message.failed', failed, { ...messageEventData(failed), error })]);
    }
  }

  async retry(ctx: ActorContext, orgId: string, messageId: string): Promise<void> {
    const state = await this.state(ctx, orgId);
    const doc = await this.deps.db.messages.updateOne(this.scope(orgId), { id: messageId, status: 'queued' }, { $set: { nextAttemptAt: null } });
    if (doc) state.queue.push(queueItem(doc));
    await this.pump(ctx, orgId, state);
  }

  /** Hands queued messages to relays with free credit, highest priority first. */
  private async pump(ctx: ActorContext, orgId: string, state: TenantState): Promise<void> {
    const free = () => [...state.relays.values()].filter((r) => r.inFlight.size < r.capacity);
    let open = free();
    if (open.length === 0 || state.queue.size === 0) return;
    const planned = new Map<string, OnlineRelay>();
    const taken = state.queue.take((item) => {
      if (open.length === 0) return 'stop';
      const relay = pickRelay(open, item.fromNumber, [...state.relays.values()]);
      if (!relay) return false;
      planned.set(item.id, relay);
      relay.inFlight.add(item.id);
      if (relay.inFlight.size >= relay.capacity) open = open.filter((r) => r !== relay);
      return true;
    });
    // The claims go to the store side by side (one round trip of latency for the whole handful); the sends then go out in queue order.
    const now = nowIso();
    const claimed = await Promise.all(taken.map((item) => this.deps.db.messages.updateOne(this.scope(orgId), { id: item.id, status: 'queued' }, {
      $set: { status: 'processing', relayId: planned.get(item.id)!.id, processingAt: now, nextAttemptAt: null, updatedAt: now },
      $inc: { attempts: 1 },
    })));
    for (const [i, item] of taken.entries()) {
      const relay = planned.get(item.id)!;
      const doc = claimed[i];
      if (!doc) {
        relay.inFlight.delete(item.id); // cancelled, or handled already
        continue;
      }
      await ctx.send(tenantActorType, orgId, { kind: 'send-timeout', messageId: doc.id, relayId: relay.id, attempt: doc.attempts }, { delayMs: this.deps.config.messageSendTimeoutMs });
      await this.deps.link.deliver(relay, {
        type: 'send',
        messageId: doc.id,
        to: doc.to,
        ...(doc.body ? { body: doc.body } : {}),
        ...(doc.attachments.length > 0 ? { attachments: doc.attachments } : {}),
        ...(doc.fromNumber ? { fromNumber: doc.fromNumber } : {}),
      });
    }
  }

  /** Test and metrics view of a tenant's live state. */
  snapshot(orgId: string): { queued: number; relays: Array<{ id: string; inFlight: number; capacity: number }> } | undefined {
    const state = this.tenants.get(orgId);
    if (!state) return undefined;
    return { queued: state.queue.size, relays: [...state.relays.values()].map((r) => ({ id: r.id, inFlight: r.inFlight.size, capacity: r.capacity })) };
  }
}

/** The relay that owns `fromNumber` when one online relay does; otherwise the least busy with credit. */
function pickRelay(open: OnlineRelay[], fromNumber: string | null, online: OnlineRelay[]): OnlineRelay | undefined {
  if (fromNumber) {
    const owners = online.filter((r) => r.phoneNumbers.includes(fromNumber));
    if (owners.length > 0) return open.filter((r) => owners.includes(r)).sort(byLoad)[0];
  }
  return [...open].sort(byLoad)[0];
}

const byLoad = (a: OnlineRelay, b: OnlineRelay) => a.inFlight.size / Math.max(1, a.capacity) - b.inFlight.size / Math.max(1, b.capacity);

export function backoffMs(baseMs: number, attemptsMade: number): number {
  const nominal = baseMs * 4 ** Math.max(0, attemptsMade - 1);
  return Math.round(nominal * (0.8 + Math.random() * 0.4));
}

/** Queued messages that are not waiting for a retry's backoff. */
function dueQueued() {
  return { status: 'queued', fanout: { $ne: true }, $or: [{ nextAttemptAt: null }, { nextAttemptAt: { $exists: false } }, { nextAttemptAt: { $lte: nowIso() } }] };
}

function queueItem(m: MessageDoc): QueuedMessage {
  return { id: m.id, priority: m.priority, fromNumber: m.fromNumber };
}

function onlineRelay(doc: RelayDoc): OnlineRelay {
  return { id: doc.id, node: doc.node ?? '', session: doc.session, capacity: doc.capacity, phoneNumbers: doc.phoneNumbers, inFlight: new Set() };
}

export function relayEventData(doc: RelayDoc) {
  return { id: doc.id, name: doc.name, status: doc.status };
}
