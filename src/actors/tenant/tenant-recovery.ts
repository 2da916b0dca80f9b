import { randomUUID } from 'node:crypto';
import type { Config } from '../../config.ts';
import { nowIso } from '../../ids.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import type { RelayCollections, RelayDoc } from '../../relays/relay-store.ts';
import type { ActorContext } from '../../runtime/types.ts';
import type { Scope } from '../../store/collection.ts';
import { insertNew } from '../../store/insert-new.ts';
import { chunks } from '../../chunks.ts';
import { relayProtocol } from '../relay/protocol.ts';
import { lineOf, type LineContact } from './line-pacing.ts';
import { readPage } from './queue-pages.ts';
import { readAwaitingDelivery } from './undelivered-watch.ts';
import { readFallbacksDue } from './sms-fallback-watch.ts';
import { noteRelays, tenantScope, type TenantContext, type TenantState } from './tenant-state.ts';

/** Line contacts written per insert when they are read from the messages sent before they were kept. */
const historyBatch = 1_000;

export type RecoveryDeps = {
  config: Pick<Config, 'pacing' | 'undeliveredAfterMs'>;
  db: MessagingCollections & RelayCollections;
  /** The tenant's closed sources as the store has them (cancelled bulk jobs not yet finished), keeping those of `closed` until they finish. */
  closedSources?: (tenantId: string, closed: string[]) => Promise<string[]>;
};

/**
 * The tenant actor's state as the store has it: read back when the key is
 * activated (the queue counted, and each part's head read), and reconciled on every sweep (relays that came and
 * went, closed sources, paces, sends left on relays that are gone, queued
 * messages a lost actor message left behind). The store is the truth, so a
 * crash, a takeover or a lost timer heals here.
 */
export class TenantRecovery {
  constructor(private readonly deps: RecoveryDeps) {}

  /**
   * Counts the queue in the store (one grouped count by sender line,
   * priority and source: no message read), reads each part's first page,
   * and reads the online relays back, asking each relay actor for credits.
   */
  async rebuild(ctx: ActorContext<unknown>, state: TenantState): Promise<void> {
    const tenantId = ctx.key;
    const { messages, relays } = this.deps.db;
    const scope = tenantScope(tenantId);
    const [counted, online, closed, contacts, history, replies] = await Promise.all([
      this.countQueue(scope),
      relays.find(scope, { status: 'online' }),
      this.deps.closedSources?.(tenantId, []) ?? [],
      this.lineContacts(scope),
      this.contactsFromHistory(ctx, tenantId),
      this.replies(scope),
      this.loadPaces(tenantId, state),
    ]);
    state.pacing.seed([...contacts, ...history], Date.now());
    await this.lessQueued(scope, replies, state.pacing.smallestUnansweredCap());
    state.pacing.seedReplies(replies);
    // After the organization's settings: the window says how far back to look.
    await readAwaitingDelivery(messages, tenantId, state);
    await readFallbacksDue(messages, tenantId, state);
    state.closedSources = new Set(closed);
    this.seedQueue(state, counted);
    await this.refill(tenantId, state);
    state.relays.clear();
    for (const doc of online) await this.join(ctx, state, doc);
    noteRelays(state);
    await this.handBackStrays(
      ctx,
      online.map((r) => r.id),
    );
  }

  /** The due queued messages in the store, counted by sender line, priority and source, and when. */
  private async countQueue(scope: Scope): Promise<{ groups: Array<{ values: unknown[]; count: number }>; at: number }> {
    const groups = await this.deps.db.messages.countBy(scope, dueQueued(), [
      'priority',
      'fromNumber',
      'jobId',
      'parentId',
    ]);
    return { groups, at: Date.now() };
  }

  /** The queue as counted in the store, nothing held yet (a closed source's messages left out). */
  private seedQueue(
    state: TenantState,
    counted: { groups: Array<{ values: unknown[]; count: number }>; at: number },
  ): void {
    state.queue.clear();
    for (const { values, count } of counted.groups) {
      const [priority, fromNumber, jobId, parentId] = values as [number, string | null, string | null, string | null];
      const source = jobId ?? parentId ?? undefined;
      if (source === undefined || !state.closedSources.has(source))
        state.queue.seed(priority, fromNumber, source, count, counted.at);
    }
  }

  /** A page from the store for each part whose window runs low (read side by side); true when any was read. */
  async refill(tenantId: string, state: TenantState): Promise<boolean> {
    for (const source of state.closedSources) state.queue.dropSource(source);
    const wanting = state.queue.wanting();
    if (wanting.length === 0) return false;
    const { queue } = state;
    await Promise.all(
      wanting.map(async (part) => {
        part.reading = true;
        try {
          queue.applyPage(part, await readPage(this.deps.db.messages, tenantId, part, queue.windowSize - part.held));
        } finally {
          part.reading = false;
        }
      }),
    );
    return true;
  }

  /** The sweep's look at the store: relays, closed sources, paces, strays, and queued messages when the queue ran dry. */
  async reconcile(ctx: TenantContext, state: TenantState): Promise<void> {
    const tenantId = ctx.key;
    const { messages, relays } = this.deps.db;
    const scope = tenantScope(tenantId);
    const online = await relays.find(scope, { status: 'online' });
    // The store records a close before the actor hears of it, so its list is complete; a finished job drops out.
    // One closed here stays closed until it finishes, even while the store shows it running again (a lost write, see cancelledJobIds).
    if (this.deps.closedSources)
      state.closedSources = new Set(await this.deps.closedSources(tenantId, [...state.closedSources]));
    const onlineIds = online.map((r) => r.id);
    for (const id of [...state.relays.keys()]) if (!onlineIds.includes(id)) state.relays.delete(id);
    for (const doc of online) {
      const known = state.relays.get(doc.id);
      if (known && known.session === doc.session) {
        known.phoneNumbers = doc.phoneNumbers;
        continue;
      }
      await this.join(ctx, state, doc);
    }
    noteRelays(state);
    await this.loadPaces(tenantId, state);
    await this.handBackStrays(ctx, onlineIds);
    if (state.queue.size > 0) await this.rejoinIdle(ctx, state);
    const canSend = [...state.relays.values()].some((r) => r.credits > 0);
    if (canSend && state.queue.held === 0) {
      // Nothing in memory to hand out while a relay could take it: the queue is counted and read again, as at
      // activation, so a message a lost actor message left behind, or a count that drifted, is found.
      const before = state.queue.size;
      this.seedQueue(state, await this.countQueue(scope));
      await this.refill(tenantId, state);
      if (state.queue.held > 0)
        ctx.log.warn(
          { tenantId, counted: before, queued: state.queue.size },
          'queued messages found again by the sweep',
        );
    }
  }

  /**
   * A relay this actor holds no credit for while it has nothing in flight in
   * the store: a grant was lost on its way (a worker that died with it), and
   * nothing would ever free a credit again. It joins afresh, as a relay
   * coming online does, and its relay actor grants what it has free.
   */
  private async rejoinIdle(ctx: TenantContext, state: TenantState): Promise<void> {
    const scope = tenantScope(ctx.key);
    for (const relay of [...state.relays.values()]) {
      if (relay.credits > 0 || relay.capacity === 0) continue;
      if (await this.deps.db.messages.findOne(scope, { status: 'processing', relayId: relay.id })) continue;
      ctx.log.warn({ tenantId: ctx.key, relayId: relay.id }, 'no credit held for an idle relay: it is asked again');
      await this.join(ctx, state, relay);
    }
  }

  /**
   * A relay session joins the dispatch with no credit, and asks its relay
   * actor for what it has free. The join's epoch is new every time (never
   * derived from the actor message: a redelivered message that activates the
   * key again must not count the grants made to the join before), so grants
   * still on their way to an earlier join, of this activation or another, are ignored.
   */
  async join(
    ctx: ActorContext<unknown>,
    state: TenantState,
    doc: Pick<RelayDoc, 'id' | 'session' | 'capacity' | 'phoneNumbers'>,
  ): Promise<void> {
    const epoch = randomUUID();
    state.relays.set(doc.id, {
      id: doc.id,
      session: doc.session,
      epoch,
      capacity: doc.capacity,
      phoneNumbers: doc.phoneNumbers,
      credits: 0,
    });
    noteRelays(state);
    await ctx.send(relayProtocol, doc.id, { kind: 'attach', tenantId: ctx.key, session: doc.session, epoch });
  }

  /** The organization's pace and each number's own, and its undelivered window, from the store. */
  async loadPaces(tenantId: string, state: TenantState): Promise<void> {
    const scope = tenantScope(tenantId);
    const [org, numbers, chains] = await Promise.all([
      this.deps.db.orgPacing.findOne(scope, { id: tenantId }),
      this.deps.db.phoneNumbers.find(scope, { pacing: { $exists: true } }, { limit: 10_000 }),
      this.deps.db.phoneNumbers.find(scope, { relays: { $exists: true } }, { limit: 10_000 }),
    ]);
    state.lineRelays = new Map(
      chains.filter((n) => n.relays && n.relays.length > 0 && n.status === 'active').map((n) => [n.number, n.relays!]),
    );
    state.pacing.configure(org?.pacing, new Map(numbers.filter((n) => n.pacing).map((n) => [n.number, n.pacing!])));
    const windowSeconds = org?.delivery?.undeliveredAfterSeconds;
    state.undeliveredAfterMs = windowSeconds ? windowSeconds * 1000 : this.deps.config.undeliveredAfterMs;
  }

  /**
   * Inserted, not upserted: an upsert is a read of the collection first, and
   * on a MongoDB wire server that scans (FerretDB 1.x) it halved a bulk
   * job's drain. One already stored (a line's memory rebuilt while a write
   * was on its way) is left as it is.
   */
  async recordContacts(tenantId: string, contacts: LineContact[]): Promise<void> {
    const docs = contacts.map((c) => ({
      id: `${c.line} ${c.to}`,
      tenantId,
      line: c.line,
      to: c.to,
      firstAt: new Date(c.firstAt).toISOString(),
    }));
    await insertNew(this.deps.db.lineContacts, tenantScope(tenantId), docs);
  }

  /** Every recipient each line wrote to first, as recorded when the dispatch handed the first message out. */
  private async lineContacts(scope: Scope): Promise<LineContact[]> {
    const all: LineContact[] = [];
    for await (const page of this.deps.db.lineContacts.scan(scope, {}, { sort: { line: 1, to: 1 } })) {
      for (const c of page) all.push({ line: c.line, to: c.to, firstAt: Date.parse(c.firstAt) });
    }
    return all;
  }

  /**
   * Each participant's replies (a group chat's: any message in it) as the organization's conversations
   * keep them (every team's: a line writes for all of them): when they last
   * wrote and how many messages were accepted for them since. One read of
   * the conversations per activation; the dispatch keeps them up to date in
   * memory from then on.
   */
  private async replies(scope: Scope): Promise<Array<{ to: string; lastInboundAt?: number; sentSinceReply: number }>> {
    const byParticipant = new Map<string, { to: string; lastInboundAt?: number; sentSinceReply: number }>();
    for await (const page of this.deps.db.conversations.scan(scope, {}, { sort: { id: 1 } })) {
      for (const c of page) {
        const at = c.lastInboundAt ? Date.parse(c.lastInboundAt) : undefined;
        const sent = c.sentSinceReply ?? 0;
        if (at === undefined && sent === 0) continue;
        const known = byParticipant.get(c.participant) ?? { to: c.participant, sentSinceReply: 0 };
        if (at !== undefined && !(at <= (known.lastInboundAt ?? -Infinity))) known.lastInboundAt = at;
        known.sentSinceReply += sent;
        byParticipant.set(c.participant, known);
      }
    }
    return [...byParticipant.values()];
  }

  /**
   * The counts of the recipients at a cap (`cap`, the smallest of the
   * organization's) less their messages still queued: a conversation counts
   * a message when it is accepted, a line when it hands it out. Only their
   * queued messages are read (by recipient, a thousand at a time); below the
   * cap a count that is too high only lets fewer more go before the hold.
   */
  private async lessQueued(
    scope: Scope,
    replies: Array<{ to: string; sentSinceReply: number }>,
    cap: number,
  ): Promise<void> {
    const atCap = new Map(replies.filter((r) => r.sentSinceReply >= cap).map((r) => [r.to, r]));
    for (const batch of chunks([...atCap.keys()], historyBatch)) {
      const queued = await this.deps.db.messages.countBy(
        scope,
        { status: 'queued', fanout: { $ne: true }, to: { $in: batch } },
        ['to'],
      );
      for (const { values, count } of queued) {
        const reply = atCap.get(values[0] as string);
        if (reply) reply.sentSinceReply = Math.max(0, reply.sentSinceReply - count);
      }
    }
  }

  /**
   * Once per organization: the recipients each line wrote to before line
   * contacts were recorded (messages sent by an earlier version), from its
   * sent messages, recorded as line contacts at the time each was first
   * sent. Without it every existing contact would count as new, and an
   * organization's regular sends would meet the new-contact cap. The
   * organization's pacing document marks it done.
   */
  private async contactsFromHistory(ctx: ActorContext<unknown>, tenantId: string): Promise<LineContact[]> {
    const scope = tenantScope(tenantId);
    const { messages, orgPacing } = this.deps.db;
    if ((await orgPacing.findOne(scope, { id: tenantId }))?.contactsFromHistoryAt) return [];
    const first = new Map<string, LineContact>();
    let read = 0;
    for await (const page of messages.scan(
      scope,
      { direction: 'sent', status: { $in: ['sent', 'delivered'] } },
      { sort: { status: 1, fromNumber: 1, priority: -1, createdAt: 1 } },
    )) {
      read += page.length;
      for (const m of page) {
        const line = m.fromNumber ?? (m.relayId ? lineOf(null, m.relayId) : null);
        const firstAt = Date.parse(m.sentAt ?? '');
        if (line === null || Number.isNaN(firstAt)) continue;
        const key = `${line} ${m.to}`;
        const known = first.get(key);
        if (!known || firstAt < known.firstAt) first.set(key, { line, to: m.to, firstAt });
      }
    }
    const contacts = [...first.values()];
    for (let i = 0; i < contacts.length; i += historyBatch)
      await this.recordContacts(tenantId, contacts.slice(i, i + historyBatch));
    await orgPacing.updateOne(scope, { id: tenantId }, { $set: { contactsFromHistoryAt: nowIso() } }, { upsert: true });
    if (contacts.length > 0)
      ctx.log.info(
        { tenantId, messages: read, contacts: contacts.length },
        'line contacts recorded from the messages sent before they were kept',
      );
    return contacts;
  }

  /**
   * Messages the store has in flight on a relay that is not online (its
   * relay actor hands back what it holds when it leaves, so these are
   * leftovers: a relay removed, say). Its relay actor, the only one that
   * claims for it, hands them back.
   */
  private async handBackStrays(ctx: ActorContext<unknown>, onlineIds: string[]): Promise<void> {
    const strays = await this.deps.db.messages.find(
      tenantScope(ctx.key),
      { status: 'processing', relayId: { $nin: onlineIds } },
      { limit: 500 },
    );
    for (const relayId of new Set(strays.map((m) => m.relayId).filter((id): id is string => !!id))) {
      await ctx.send(relayProtocol, relayId, { kind: 'hand-back', tenantId: ctx.key });
    }
  }
}

/** Queued messages that are not waiting for a retry's backoff. */
function dueQueued() {
  return {
    status: 'queued',
    fanout: { $ne: true },
    $or: [{ nextAttemptAt: null }, { nextAttemptAt: { $exists: false } }, { nextAttemptAt: { $lte: nowIso() } }],
  };
}
