import type { Config } from '../config.ts';
import { changeEventId, domainEvent, messageEventData } from '../events/event-stream.ts';
import { outboxGraceMs, type Outbox } from '../events/outbox.ts';
import { nowIso } from '../ids.ts';
import type { RelayCollections, RelayDoc } from '../relays/relay-store.ts';
import type { RelayLink } from '../relays/relay-link.ts';
import { tenantProtocol } from '../actors/tenant.actor.ts';
import type { ActorContext } from '../runtime/types.ts';
import { backoffMs } from './backoff.ts';
import { pickRelay, type RelayCredit } from './relay-choice.ts';
import type { Scope } from '../store/collection.ts';
import type { MessageDoc, MessagingCollections } from './message-store.ts';
import { SendQueue, type QueuedMessage } from './send-queue.ts';

interface OnlineRelay extends RelayCredit {
  node: string;
  session: number;
}

export interface TenantState {
  queue: SendQueue;
  relays: Map<string, OnlineRelay>;
  /** The one live chain of sweep timers; a timer of another chain is dropped. */
  sweepChain: string | undefined;
  /** When the messages' outboxes were last swept. */
  outboxSweptAt?: number;
  /** Activated by the message being handled: nothing in it predates this message. */
  fresh: boolean;
  /** Sources (cancelled bulk jobs) none of whose messages may be handed out any more, though some are still stored as queued. */
  closedSources: Set<string>;
}

type TenantContext = ActorContext<TenantState>;

export type RelayReport = { relayId: string; session: number };
export type StatusReport = RelayReport & { messageId: string; attempt: number; status: 'sent' | 'delivered' | 'read' | 'failed'; at: string; error?: string; guid?: string };

type Deps = {
  config: Pick<Config, 'messageRetryBaseMs' | 'messageMaxAttempts' | 'messageSendTimeoutMs' | 'tenantSweepMs'>;
  db: MessagingCollections & RelayCollections;
  /** Writes status changes with their events, and sweeps the events of messages and relays stored and not published (events/outbox.ts). */
  outbox: Outbox;
  link: RelayLink;
  /** The tenant's closed sources as the store has them (cancelled bulk jobs not yet finished). */
  closedSources?: (orgId: string) => Promise<string[]>;
};

/**
 * The tenant actor's work: the organization's send queue and its relays'
 * credits. The store is the truth; this state is rebuilt from it on first use
 * and on every sweep, so a crash, a takeover or a lost timer heals. Every
 * status change is one compare-and-set on the message, so a replayed actor
 * message never moves a message backwards.
 */
export class TenantDispatcher {
  constructor(private readonly deps: Deps) {}

  private scope(orgId: string): Scope {
    return { tenantId: orgId };
  }

  /** The tenant's state, built from the store when the runtime activates the key. */
  async activate(ctx: ActorContext<undefined>): Promise<TenantState> {
    const state: TenantState = { queue: new SendQueue(), relays: new Map(), sweepChain: undefined, fresh: true, closedSources: new Set() };
    await this.rebuild(ctx.key, state);
    await this.armSendTimeouts(ctx, state);
    return state;
  }

  /**
   * A worker that died between claiming a message and setting its send
   * timeout (or sending its frame) leaves it `processing` with nothing to
   * move it on: every activation sets the timeout of each send in flight
   * again, due when its attempt's would have been. A timer for an attempt
   * already settled finds nothing to do.
   */
  private async armSendTimeouts(ctx: ActorContext<undefined>, state: TenantState): Promise<void> {
    const timeoutMs = this.deps.config.messageSendTimeoutMs;
    const inFlight = await this.deps.db.messages.find(this.scope(ctx.key), { status: 'processing' }, { limit: 10_000 });
    for (const m of inFlight) {
      if (!m.relayId || !state.relays.get(m.relayId)?.inFlight.has(m.id)) continue;
      const since = Date.parse(String(m.processingAt ?? m.updatedAt)) || Date.now();
      await ctx.send(tenantProtocol, ctx.key, { kind: 'send-timeout', messageId: m.id, relayId: m.relayId, attempt: m.attempts }, { delayMs: Math.max(0, since + timeoutMs - Date.now()) });
    }
  }

  /**
   * Every activated state has one sweep chain: a sweep timer that arrives for
   * a state with none is adopted as its chain; any other first message starts one.
   */
  private async state(ctx: TenantContext, adoptChain?: string): Promise<TenantState> {
    const state = ctx.state;
    if (state.sweepChain === undefined) {
      if (adoptChain !== undefined) {
        state.sweepChain = adoptChain;
      } else {
        await ctx.send(tenantProtocol, ctx.key, { kind: 'sweep', chain: ctx.id }, { delayMs: this.deps.config.tenantSweepMs });
        state.sweepChain = ctx.id;
      }
    }
    return state;
  }

  /** Reads the queue and the relays' in-flight sends back from the store. */
  private async rebuild(orgId: string, state: TenantState): Promise<void> {
    const { messages, relays } = this.deps.db;
    const scope = this.scope(orgId);
    // A bulk job can leave thousands queued: read by keyset pages, the event loop free between them.
    const readAll = async (filter: Parameters<typeof messages.scan>[1], sort: Record<string, 1 | -1>) => {
      const all: MessageDoc[] = [];
      for await (const page of messages.scan(scope, filter, { sort })) all.push(...page);
      return all;
    };
    const [queued, processing, online, closed] = await Promise.all([
      readAll(dueQueued(), { priority: -1, createdAt: 1 }),
      readAll({ status: 'processing' }, { priority: -1, createdAt: 1 }),
      relays.find(scope, { status: 'online' }),
      this.deps.closedSources?.(orgId) ?? [],
    ]);
    state.closedSources = new Set(closed);
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

  /**
   * A cancelled bulk job: none of its messages is handed out from now on
   * (they leave the queue at its next pass), whatever puts them back in it
   * before the job actor has stopped them in the store.
   */
  async closeSource(ctx: TenantContext, source: string): Promise<void> {
    const state = await this.state(ctx);
    state.closedSources.add(source);
  }

  async enqueue(ctx: TenantContext, items: QueuedMessage[]): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    for (const item of items) state.queue.push(item);
    await this.pump(ctx, orgId, state);
  }

  /**
   * The periodic check of a tenant: relays and orphaned sends are reconciled
   * with the store every time; queued messages a lost actor message left
   * behind are looked for only when a relay could take them and nothing is
   * waiting in memory, so a long backlog costs nothing here.
   */
  async sweep(ctx: TenantContext, chain: string): Promise<void> {
    const orgId = ctx.key;
    const cold = ctx.state.fresh;
    const state = await this.state(ctx, chain);
    if (state.sweepChain !== chain) return;
    if (!cold) await this.reconcile(orgId, state);
    await this.pump(ctx, orgId, state);
    // No TTL indexes on every MongoDB wire server: expired Idempotency-Keys are removed here.
    await this.deps.db.idempotency.deleteMany(this.scope(orgId), { expiresAt: { $lte: nowIso() } });
    // Events a writer stored and could not publish (it died, or the stream failed) go out now; no more often than they can be due.
    if (Date.now() - (state.outboxSweptAt ?? 0) >= outboxGraceMs) {
      state.outboxSweptAt = Date.now();
      await this.deps.outbox.sweep(this.deps.db.messages, this.scope(orgId));
      await this.deps.outbox.sweep(this.deps.db.relays, this.scope(orgId));
    }
    const busy = state.queue.size > 0 || state.relays.size > 0
      || (await this.deps.db.messages.findOne(this.scope(orgId), { status: { $in: ['queued', 'processing'] } })) !== null
      || (await this.deps.db.messages.findOne(this.scope(orgId), { outboxAt: { $exists: true } })) !== null
      || (await this.deps.db.relays.findOne(this.scope(orgId), { outboxAt: { $exists: true } })) !== null;
    if (!busy) {
      // The chain ends here; the next message activates the tenant again and starts a new one.
      ctx.deactivate();
      return;
    }
    await ctx.send(tenantProtocol, orgId, { kind: 'sweep', chain }, { delayMs: this.deps.config.tenantSweepMs });
  }

  private async reconcile(orgId: string, state: TenantState): Promise<void> {
    const { messages, relays } = this.deps.db;
    const scope = this.scope(orgId);
    const online = await relays.find(scope, { status: 'online' });
    // The store records a close before the actor hears of it, so its list is complete; a finished job drops out.
    if (this.deps.closedSources) state.closedSources = new Set(await this.deps.closedSources(orgId));
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

  /** The relay actor says a relay connected: it joins the dispatch with the sends the store says it still holds. */
  async relayOnline(ctx: TenantContext, relayId: string, session: number): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const doc = await this.deps.db.relays.findOne(this.scope(orgId), { id: relayId, session, status: 'online' });
    if (!doc) return; // an older connection's news
    // A reconnecting agent still holds what it was given before (it re-reports those statuses): they keep their credit.
    state.relays.set(relayId, await this.withInFlight(orgId, doc));
    await this.pump(ctx, orgId, state);
  }

  async relayReady(ctx: TenantContext, report: RelayReport & { capacity: number }): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const relay = state.relays.get(report.relayId);
    if (!relay || relay.session !== report.session) return;
    relay.capacity = report.capacity;
    await this.pump(ctx, orgId, state);
  }

  /**
   * The relay actor took a session offline (closed socket or heartbeat
   * timeout): what it held goes back to the queue. It says so after the
   * session's own statuses, which reach this actor first.
   */
  async relayOffline(ctx: TenantContext, report: RelayReport, reason: string): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const relay = state.relays.get(report.relayId);
    if (relay && relay.session === report.session) state.relays.delete(report.relayId);
    const current = await this.deps.db.relays.findOne(this.scope(orgId), { id: report.relayId });
    if (current && current.status === 'online' && current.session > report.session) return; // back already, holding its sends
    ctx.log.info({ tenantId: orgId, relayId: report.relayId, reason }, 'relay left the dispatch');
    const inFlight = await this.deps.db.messages.find(this.scope(orgId), { status: 'processing', relayId: report.relayId });
    for (const m of inFlight) await this.handBack(orgId, state, m.id, report.relayId);
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

  async status(ctx: TenantContext, report: StatusReport): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const { messages } = this.deps.db;
    const scope = this.scope(orgId);
    // Only the message's current attempt on this relay counts: a late report of an earlier attempt
    // (re-sent after a reconnect) must neither free a credit nor settle the retry now in flight.
    const attempt = { id: report.messageId, relayId: report.relayId, attempts: report.attempt };
    const current = await messages.findOne(scope, attempt);
    if (!current) return;
    const at = report.at;
    const guid = report.guid ? { guid: report.guid } : {};
    // Sent, delivered or failed: the relay is done with the send, so its credit is free again.
    const released = report.status !== 'read' && (state.relays.get(report.relayId)?.inFlight.delete(report.messageId) ?? false);
    // Each status write carries its event in the message's outbox (events/outbox.ts): a crash after it loses nothing.
    if (report.status === 'sent') {
      await this.deps.outbox.change(messages, scope, { ...attempt, status: 'processing' },
        { $set: { status: 'sent', sentAt: at, lastError: null, updatedAt: nowIso(), ...guid } }, [sentEvent(current, 'sent')]);
    } else if (report.status === 'delivered') {
      // Delivered with no sent report before it: it was sent, so the same write says so, once.
      const unsent = current.sentAt === null;
      await this.deps.outbox.change(messages, scope, { ...attempt, status: { $in: ['processing', 'sent'] }, ...(unsent ? { sentAt: null } : {}) },
        { $set: { status: 'delivered', deliveredAt: at, updatedAt: nowIso(), ...guid, ...(unsent ? { sentAt: at } : {}) } }, unsent ? [sentEvent(current, 'delivered')] : []);
    } else if (report.status === 'read') {
      await messages.updateOne(scope, { ...attempt, status: { $in: ['sent', 'delivered'] }, readAt: null }, { $set: { readAt: at, updatedAt: nowIso() } });
    } else {
      await this.failAttempt(ctx, orgId, report.messageId, report.relayId, report.attempt, report.error ?? 'the relay could not send it');
    }
    if (released || report.status === 'failed') await this.pump(ctx, orgId, state);
  }

  async sendTimeout(ctx: TenantContext, messageId: string, relayId: string, attempt: number): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const doc = await this.deps.db.messages.findOne(this.scope(orgId), { id: messageId, status: 'processing', relayId, attempts: attempt });
    if (!doc) return;
    state.relays.get(relayId)?.inFlight.delete(messageId);
    await this.failAttempt(ctx, orgId, messageId, relayId, attempt, `the relay did not report on the send within ${this.deps.config.messageSendTimeoutMs} ms`);
    await this.pump(ctx, orgId, state);
  }

  /** Retries with backoff (base, then 4x, with jitter) until the attempts run out; then failed, dead-lettered, message.failed. */
  private async failAttempt(ctx: TenantContext, orgId: string, messageId: string, relayId: string, attempt: number, error: string): Promise<void> {
    const { messages } = this.deps.db;
    const scope = this.scope(orgId);
    const current = await messages.findOne(scope, { id: messageId, status: 'processing', relayId, attempts: attempt });
    if (!current) return;
    const now = nowIso();
    if (current.attempts < this.deps.config.messageMaxAttempts) {
      const delayMs = backoffMs(this.deps.config.messageRetryBaseMs, current.attempts);
      const retry = await messages.updateOne(scope, { id: messageId, status: 'processing', relayId, attempts: current.attempts }, {
        $set: { status: 'queued', relayId: null, lastError: error, nextAttemptAt: new Date(Date.now() + delayMs).toISOString(), updatedAt: now },
      });
      if (retry) await ctx.send(tenantProtocol, orgId, { kind: 'retry', messageId }, { delayMs });
      return;
    }
    const event = domainEvent('message.failed', current, { ...messageEventData({ ...current, status: 'failed' }), error }, changeEventId('message.failed', messageId));
    const { doc: failed } = await this.deps.outbox.change(messages, scope, { id: messageId, status: 'processing', relayId, attempts: current.attempts }, {
      $set: { status: 'failed', lastError: error, failedAt: now, deadLettered: true, updatedAt: now },
    }, [event]);
    if (failed) ctx.log.warn({ tenantId: orgId, messageId, attempts: failed.attempts, error }, 'message failed after every attempt');
  }

  async retry(ctx: TenantContext, messageId: string): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const doc = await this.deps.db.messages.updateOne(this.scope(orgId), { id: messageId, status: 'queued' }, { $set: { nextAttemptAt: null } });
    if (doc) state.queue.push(queueItem(doc));
    await this.pump(ctx, orgId, state);
  }

  /** Hands queued messages to relays with free credit, highest priority first. */
  private async pump(ctx: TenantContext, orgId: string, state: TenantState): Promise<void> {
    const free = () => [...state.relays.values()].filter((r) => r.inFlight.size < r.capacity);
    let open = free();
    if (open.length === 0 || state.queue.size === 0) return;
    const planned = new Map<string, OnlineRelay>();
    const taken = state.queue.take((item) => {
      if (item.source !== undefined && state.closedSources.has(item.source)) return true; // leaves the queue, never claimed
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
    const sendable = taken.filter((item) => planned.has(item.id));
    const claimed = await Promise.all(sendable.map((item) => this.deps.db.messages.updateOne(this.scope(orgId), { id: item.id, status: 'queued' }, {
      $set: { status: 'processing', relayId: planned.get(item.id)!.id, processingAt: now, nextAttemptAt: null, updatedAt: now },
      $inc: { attempts: 1 },
    })));
    let unclaimed = 0;
    for (const [i, item] of sendable.entries()) {
      const relay = planned.get(item.id)!;
      const doc = claimed[i];
      if (!doc) {
        relay.inFlight.delete(item.id); // cancelled, or handled already
        unclaimed++;
        continue;
      }
      await ctx.send(tenantProtocol, orgId, { kind: 'send-timeout', messageId: doc.id, relayId: relay.id, attempt: doc.attempts }, { delayMs: this.deps.config.messageSendTimeoutMs });
      await this.deps.link.deliver(relay, {
        type: 'send',
        messageId: doc.id,
        attempt: doc.attempts,
        to: doc.to,
        ...(doc.body ? { body: doc.body } : {}),
        ...(doc.attachments.length > 0 ? { attachments: doc.attachments } : {}),
        ...(doc.fromNumber ? { fromNumber: doc.fromNumber } : {}),
      });
    }
    // The credit of a message nobody could claim (a cancelled job's) goes to the next in the queue now, not at the next report.
    if (unclaimed > 0) await this.pump(ctx, orgId, state);
  }
}

/** A message's one `message.sent`, built before the write that records it (with the status that write sets). */
function sentEvent(m: MessageDoc, status: 'sent' | 'delivered') {
  return domainEvent('message.sent', m, messageEventData({ ...m, status }), changeEventId('message.sent', m.id));
}

/** Queued messages that are not waiting for a retry's backoff. */
function dueQueued() {
  return { status: 'queued', fanout: { $ne: true }, $or: [{ nextAttemptAt: null }, { nextAttemptAt: { $exists: false } }, { nextAttemptAt: { $lte: nowIso() } }] };
}

function queueItem(m: MessageDoc): QueuedMessage {
  const source = m.jobId ?? m.parentId;
  return { id: m.id, priority: m.priority, fromNumber: m.fromNumber, ...(source ? { source } : {}) };
}

function onlineRelay(doc: RelayDoc): OnlineRelay {
  return { id: doc.id, node: doc.node ?? '', session: doc.session, capacity: doc.capacity, phoneNumbers: doc.phoneNumbers, inFlight: new Set() };
}
