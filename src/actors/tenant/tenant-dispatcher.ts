import { randomUUID } from 'node:crypto';
import type { Config } from '../../config.ts';
import { changeEventId, domainEvent, messageEventData } from '../../events/event-stream.ts';
import { outboxGraceMs, type Outbox } from '../../events/outbox.ts';
import { nowIso } from '../../ids.ts';
import type { RelayCollections, RelayDoc } from '../../relays/relay-store.ts';
import { relayProtocol } from '../relay/protocol.ts';
import { queueItemOf, tenantProtocol, type CreditGrant, type QueueItem } from './protocol.ts';
import type { ActorContext } from '../../runtime/types.ts';
import { backoffMs } from './backoff.ts';
import { pickRelay, type RelayCredit } from './relay-choice.ts';
import type { Scope } from '../../store/collection.ts';
import { insertNew } from '../../store/insert-new.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import { countMessages, observeHop, observeLatency, observeSendWait } from '../../messages/message-metrics.ts';
import { RollupTally, type MessageRollups } from '../../messages/message-rollups.ts';
import type { AgentCheckpoint } from '../../relay-protocol/frames.ts';
import { SendQueue } from './send-queue.ts';
import { LinePacing, lineOf, type Hold, type LineContact } from './line-pacing.ts';
import { foldReports, type StatusChange } from './status-fold.ts';
import type { RelayReport, StatusReport } from './protocol.ts';

interface OnlineRelay extends RelayCredit {
  session: number;
  /** This join of the relay's session, unique: its relay actor's grants name it, and a grant naming an earlier join is ignored. */
  epoch: string;
}

export interface TenantState {
  queue: SendQueue;
  /** The online relays and the credits each granted this activation on its current session. */
  relays: Map<string, OnlineRelay>;
  /** The one live chain of sweep timers; a timer of another chain is dropped. */
  sweepChain: string | undefined;
  /** When the messages' outboxes were last swept. */
  outboxSweptAt?: number;
  /** Activated by the message being handled: nothing in it predates this message. */
  fresh: boolean;
  /** Sources (cancelled bulk jobs) none of whose messages may be handed out any more, though some are still stored as queued. */
  closedSources: Set<string>;
  /** Each sender line's rate and new-contact cap, rebuilt from the store on activation. */
  pacing: LinePacing;
  /** When the pending pace timer fires (epoch ms), if one is pending. */
  paceAt?: number;
  /** Epoch ms since when at least one relay has been online without a break (as far as this activation knows); undefined while none is. */
  relayOnlineSince?: number;
}

/** Keeps `relayOnlineSince` true to the relays online now: called after every change to them. */
function noteRelays(state: TenantState): void {
  if (state.relays.size === 0) delete state.relayOnlineSince;
  else state.relayOnlineSince ??= Date.now();
}

type TenantContext = ActorContext<TenantState>;

/** Line contacts written per insert when they are read from the messages sent before they were kept. */
const historyBatch = 1_000;

type Deps = {
  config: Pick<
    Config,
    'messageRetryBaseMs' | 'messageMaxAttempts' | 'messageSendTimeoutMs' | 'tenantSweepMs' | 'pacing'
  >;
  db: MessagingCollections & RelayCollections;
  /** Writes status changes with their events, and sweeps the events of messages and relays stored and not published (events/outbox.ts). */
  outbox: Outbox;
  /** Message statistics: counted in the same batch as the status changes. */
  rollups: MessageRollups;
  /** The tenant's closed sources as the store has them (cancelled bulk jobs not yet finished), keeping those of `closed` until they finish. */
  closedSources?: (orgId: string, closed: string[]) => Promise<string[]>;
};

/**
 * The tenant actor's work: the organization's send queue, handed to its
 * relays within the credits their relay actors grant (each relay actor keeps
 * its own sends in flight, actors/relay/relay-sends.ts), and the status, retry and
 * failure of each message. The store is the truth; this state is rebuilt from
 * it on first use and on every sweep, so a crash, a takeover or a lost timer
 * heals. Every status change is one compare-and-set on the message, so a
 * replayed actor message never moves a message backwards.
 */
export class TenantDispatcher {
  constructor(private readonly deps: Deps) {}

  private scope(orgId: string): Scope {
    return { tenantId: orgId };
  }

  /** The tenant's state, built from the store when the runtime activates the key. */
  async activate(ctx: ActorContext<undefined>): Promise<TenantState> {
    const state: TenantState = {
      queue: new SendQueue(),
      relays: new Map(),
      sweepChain: undefined,
      fresh: true,
      closedSources: new Set(),
      pacing: new LinePacing(this.deps.config.pacing),
    };
    await this.rebuild(ctx, state);
    return state;
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
        await ctx.send(
          tenantProtocol,
          ctx.key,
          { kind: 'sweep', chain: ctx.id },
          { delayMs: this.deps.config.tenantSweepMs },
        );
        state.sweepChain = ctx.id;
      }
    }
    return state;
  }

  /** Reads the queue and the online relays back from the store, and asks each relay actor for credits. */
  private async rebuild(ctx: ActorContext<unknown>, state: TenantState): Promise<void> {
    const orgId = ctx.key;
    const { messages, relays } = this.deps.db;
    const scope = this.scope(orgId);
    // A bulk job can leave thousands queued: read by keyset pages, the event loop free between them.
    const readAll = async (filter: Parameters<typeof messages.scan>[1], sort: Record<string, 1 | -1>) => {
      const all: MessageDoc[] = [];
      for await (const page of messages.scan(scope, filter, { sort })) all.push(...page);
      return all;
    };
    const [queued, online, closed, contacts, history] = await Promise.all([
      readAll(dueQueued(), { priority: -1, createdAt: 1 }),
      relays.find(scope, { status: 'online' }),
      this.deps.closedSources?.(orgId, []) ?? [],
      this.lineContacts(scope),
      this.contactsFromHistory(ctx, orgId),
      this.loadPaces(orgId, state),
    ]);
    state.pacing.seed([...contacts, ...history], Date.now());
    state.closedSources = new Set(closed);
    state.queue.clear();
    for (const m of queued) state.queue.push(queueItemOf(m, 'accepted'));
    state.relays.clear();
    for (const doc of online) await this.join(ctx, state, doc);
    noteRelays(state);
    await this.handBackStrays(
      ctx,
      online.map((r) => r.id),
    );
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
   * Once per organization: the recipients each line wrote to before line
   * contacts were recorded (messages sent by an earlier version), from its
   * sent messages, recorded as line contacts at the time each was first
   * sent. Without it every existing contact would count as new, and an
   * organization's regular sends would meet the new-contact cap. The
   * organization's pacing document marks it done.
   */
  private async contactsFromHistory(ctx: ActorContext<unknown>, orgId: string): Promise<LineContact[]> {
    const scope = this.scope(orgId);
    const { messages, orgPacing } = this.deps.db;
    if ((await orgPacing.findOne(scope, { id: orgId }))?.contactsFromHistoryAt) return [];
    const first = new Map<string, LineContact>();
    let read = 0;
    for await (const page of messages.scan(
      scope,
      { direction: 'sent', status: { $in: ['sent', 'delivered'] } },
      { sort: { status: 1, priority: -1, createdAt: 1 } },
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
      await this.recordContacts(orgId, contacts.slice(i, i + historyBatch));
    await orgPacing.updateOne(scope, { id: orgId }, { $set: { contactsFromHistoryAt: nowIso() } }, { upsert: true });
    if (contacts.length > 0)
      ctx.log.info(
        { tenantId: orgId, messages: read, contacts: contacts.length },
        'line contacts recorded from the messages sent before they were kept',
      );
    return contacts;
  }

  /** The organization's pace and each number's own, from the store. */
  private async loadPaces(orgId: string, state: TenantState): Promise<void> {
    const scope = this.scope(orgId);
    const [org, numbers] = await Promise.all([
      this.deps.db.orgPacing.findOne(scope, { id: orgId }),
      this.deps.db.phoneNumbers.find(scope, { pacing: { $exists: true } }, { limit: 10_000 }),
    ]);
    state.pacing.configure(org?.pacing, new Map(numbers.filter((n) => n.pacing).map((n) => [n.number, n.pacing!])));
  }

  /** Pacing settings changed: read again, and send what they now allow. */
  async pacingChanged(ctx: TenantContext): Promise<void> {
    const state = await this.state(ctx);
    if (!ctx.state.fresh) await this.loadPaces(ctx.key, state);
    await this.pump(ctx, ctx.key, state);
  }

  /** The pace timer: a paced line has a free slot. */
  async paceTimer(ctx: TenantContext): Promise<void> {
    const state = await this.state(ctx);
    delete state.paceAt;
    await this.pump(ctx, ctx.key, state);
  }

  /**
   * Why a queued message waits, from memory: no relay online, its line's
   * rate or new-contact cap (with when it may go), no credit, or the messages
   * before it. Null when the queue does not hold it.
   */
  async waiting(ctx: TenantContext, messageId: string): Promise<Hold | null> {
    const state = await this.state(ctx);
    const item = state.queue.get(messageId);
    if (!item) return null;
    const relays = [...state.relays.values()];
    if (relays.length === 0) return { waitingFor: 'relay_offline' };
    const now = Date.now();
    const lines = item.fromNumber ? [item.fromNumber] : relays.map((r) => lineOf(null, r.id));
    const holds = lines.map((line) => state.pacing.hold(line, item.to, now));
    if (holds.every((h) => h !== null)) return holds.sort((a, b) => (a!.notBefore ?? 0) - (b!.notBefore ?? 0))[0]!;
    if (!relays.some((r) => r.credits > 0)) return { waitingFor: 'relay_busy' };
    return { waitingFor: 'queue' };
  }

  /**
   * When a bulk job's (or group send's) queued messages should all be sent
   * (epoch ms), from the pace of the lines they go through: for each sender
   * line (a number, or the online relays together), the messages of that
   * line at the job's priority or above, this job's and the others' it takes
   * turns with, drained at the lines' rate, and the days their new-contact
   * caps need. Null when nothing of it is queued here or no relay is online.
   */
  async estimate(ctx: TenantContext, source: string): Promise<number | null> {
    const state = await this.state(ctx);
    const now = Date.now();
    const relayLines = [...state.relays.keys()].map((id) => lineOf(null, id));
    if (relayLines.length === 0) return null;
    const mine = [...state.queue.all()].filter((item) => item.source === source);
    if (mine.length === 0) return null;
    let at = now;
    for (const [fromNumber, group] of bySenderLine(state.pacing, relayLines, mine, now)) {
      let ahead = 0;
      for (const item of state.queue.all())
        if (item.fromNumber === fromNumber && item.priority >= group.lowest) ahead++;
      const done = state.pacing.drainedAt(fromNumber ? [fromNumber] : relayLines, ahead, group.fresh, now);
      if (done === null) return null;
      at = Math.max(at, done);
    }
    return at;
  }

  /**
   * When `count` messages queued at `startAt` would all be sent (epoch ms):
   * the sample's share of each sender line (a number, or the online relays
   * together) and of recipients new to it, scaled to `count`, drained at the
   * lines' pace as they stand now. Null when no relay is online.
   */
  async forecast(
    ctx: TenantContext,
    plan: { startAt: number; count: number; sample: Array<{ to: string; fromNumber: string | null }> },
  ): Promise<number | null> {
    const state = await this.state(ctx);
    const now = Date.now();
    const relayLines = [...state.relays.keys()].map((id) => lineOf(null, id));
    if (relayLines.length === 0) return null;
    const start = Math.max(now, plan.startAt);
    let at = start;
    for (const [fromNumber, group] of bySenderLine(state.pacing, relayLines, plan.sample, now)) {
      const count = Math.round((plan.count * group.count) / plan.sample.length);
      const done = state.pacing.drainedAt(
        fromNumber ? [fromNumber] : relayLines,
        count,
        Math.round((count * group.fresh) / group.count),
        now,
      );
      if (done === null) return null;
      at = Math.max(at, done + (start - now));
    }
    return at;
  }

  /** A sender line's usage and its next free slots (epoch ms). */
  async usage(ctx: TenantContext, line: string) {
    const state = await this.state(ctx);
    return state.pacing.usage(line, Date.now());
  }

  /**
   * A relay session joins the dispatch with no credit, and asks its relay
   * actor for what it has free. The join's epoch is new every time (never
   * derived from the actor message: a redelivered message that activates the
   * key again must not count the grants made to the join before), so grants
   * still on their way to an earlier join, of this activation or another, are ignored.
   */
  private async join(ctx: ActorContext<unknown>, state: TenantState, doc: RelayDoc): Promise<void> {
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

  /**
   * Messages the store has in flight on a relay that is not online (its
   * relay actor hands back what it holds when it leaves, so these are
   * leftovers: a relay removed, say). Its relay actor, the only one that
   * claims for it, hands them back.
   */
  private async handBackStrays(ctx: ActorContext<unknown>, onlineIds: string[]): Promise<void> {
    const strays = await this.deps.db.messages.find(
      this.scope(ctx.key),
      { status: 'processing', relayId: { $nin: onlineIds } },
      { limit: 500 },
    );
    for (const relayId of new Set(strays.map((m) => m.relayId).filter((id): id is string => !!id))) {
      await ctx.send(relayProtocol, relayId, { kind: 'hand-back', tenantId: ctx.key });
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

  async enqueue(ctx: TenantContext, items: QueueItem[]): Promise<void> {
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
    if (!cold) await this.reconcile(ctx, state);
    await this.pump(ctx, orgId, state);
    // No TTL indexes on every MongoDB wire server: expired Idempotency-Keys are removed here.
    await this.deps.db.idempotency.deleteMany(this.scope(orgId), { expiresAt: { $lte: nowIso() } });
    // Events a writer stored and could not publish (it died, or the stream failed) go out now; no more often than they can be due.
    if (Date.now() - (state.outboxSweptAt ?? 0) >= outboxGraceMs) {
      state.outboxSweptAt = Date.now();
      await this.deps.outbox.sweep(this.deps.db.messages, this.scope(orgId));
      await this.deps.outbox.sweep(this.deps.db.relays, this.scope(orgId));
    }
    const busy =
      state.queue.size > 0 ||
      state.relays.size > 0 ||
      (await this.deps.db.messages.findOne(this.scope(orgId), { status: { $in: ['queued', 'processing'] } })) !==
        null ||
      (await this.deps.db.messages.findOne(this.scope(orgId), { outboxAt: { $exists: true } })) !== null ||
      (await this.deps.db.relays.findOne(this.scope(orgId), { outboxAt: { $exists: true } })) !== null;
    if (!busy) {
      // The chain ends here; the next message activates the tenant again and starts a new one.
      ctx.deactivate();
      return;
    }
    await ctx.send(tenantProtocol, orgId, { kind: 'sweep', chain }, { delayMs: this.deps.config.tenantSweepMs });
  }

  private async reconcile(ctx: TenantContext, state: TenantState): Promise<void> {
    const orgId = ctx.key;
    const { messages, relays } = this.deps.db;
    const scope = this.scope(orgId);
    const online = await relays.find(scope, { status: 'online' });
    // The store records a close before the actor hears of it, so its list is complete; a finished job drops out.
    // One closed here stays closed until it finishes, even while the store shows it running again (a lost write, see cancelledJobIds).
    if (this.deps.closedSources)
      state.closedSources = new Set(await this.deps.closedSources(orgId, [...state.closedSources]));
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
    await this.loadPaces(orgId, state);
    await this.handBackStrays(ctx, onlineIds);
    const canSend = [...state.relays.values()].some((r) => r.credits > 0);
    if (canSend && state.queue.size === 0) {
      for (const m of await messages.find(scope, dueQueued(), { sort: { priority: -1, createdAt: 1 }, limit: 500 }))
        state.queue.push(queueItemOf(m, 'accepted'));
    }
  }

  /**
   * A relay's session came online, or its relay actor was activated again and
   * lost count of what it granted: the relay joins the dispatch afresh and
   * asks for credits. A reconnecting agent still holds what it was given
   * before (it re-reports those statuses): its relay actor keeps those in flight.
   */
  async relayOnline(ctx: TenantContext, relayId: string, session: number): Promise<void> {
    const fresh = ctx.state.fresh;
    const state = await this.state(ctx);
    if (fresh && state.relays.get(relayId)?.session === session) return; // the activation just joined it
    const doc = await this.deps.db.relays.findOne(this.scope(ctx.key), { id: relayId, session, status: 'online' });
    if (!doc) return; // an older connection's news
    await this.join(ctx, state, doc);
  }

  /** Credits from a relay actor, counted only if they are for this activation and the relay's current session. */
  async grant(ctx: TenantContext, grant: { relayId: string } & CreditGrant): Promise<void> {
    const state = await this.state(ctx);
    if (this.applyGrant(state, grant.relayId, grant) > 0) await this.pump(ctx, ctx.key, state);
  }

  /** The credits added; 0 for a grant of another activation or session. */
  private applyGrant(state: TenantState, relayId: string, grant: CreditGrant): number {
    const relay = state.relays.get(relayId);
    if (!relay || relay.session !== grant.session || grant.epoch !== relay.epoch) return 0;
    relay.credits += grant.credits;
    relay.capacity = grant.capacity;
    return grant.credits;
  }

  /** Messages a relay actor did not send or took back (queued again in the store): first in line again. */
  async returned(ctx: TenantContext, items: QueueItem[]): Promise<void> {
    const state = await this.state(ctx);
    for (const item of [...items].reverse()) state.queue.pushFront(item);
    await this.pump(ctx, ctx.key, state);
  }

  /**
   * The relay actor took a session offline (closed socket or heartbeat
   * timeout), after handing back what it held (`returned`).
   */
  async relayOffline(ctx: TenantContext, report: RelayReport, reason: string): Promise<void> {
    const state = await this.state(ctx);
    const relay = state.relays.get(report.relayId);
    if (!relay || relay.session !== report.session) return;
    state.relays.delete(report.relayId);
    noteRelays(state);
    ctx.log.info({ tenantId: ctx.key, relayId: report.relayId, reason }, 'relay left the dispatch');
  }

  /** A relay's report on a send. Sent, delivered and read are a batch of one (`statuses`); a failure schedules a retry. */
  async status(ctx: TenantContext, report: StatusReport): Promise<void> {
    if (report.status !== 'failed') return this.statuses(ctx, [report]);
    const orgId = ctx.key;
    const state = await this.state(ctx);
    // The relay actor freed the send's credit, and grants it with the report.
    if (report.grant) this.applyGrant(state, report.relayId, report.grant);
    await this.failAttempt(
      ctx,
      orgId,
      report.messageId,
      report.relayId,
      report.attempt,
      report.error ?? 'the relay could not send it',
    );
    await this.pump(ctx, orgId, state);
  }

  /**
   * Reports that waited side by side, handled as `status` handles each: the
   * messages read in one query, every change written in one bulk write (each
   * a compare-and-set carrying its events in the message's outbox), the
   * events published together. A failure report schedules a retry, so a
   * batch holding one is handled one report at a time.
   */
  async statuses(ctx: TenantContext, reports: StatusReport[]): Promise<void> {
    if (reports.some((r) => r.status === 'failed')) {
      for (const report of reports) await this.status(ctx, report);
      return;
    }
    const orgId = ctx.key;
    const state = await this.state(ctx);
    // The first report on a send: the relay actor freed its credit, and grants it with the report.
    let released = false;
    for (const r of reports) if (r.grant && this.applyGrant(state, r.relayId, r.grant) > 0) released = true;
    // One message is read by id (the embedded store may answer it from memory); several by one id list.
    const ids = [...new Set(reports.map((r) => r.messageId))];
    const { messages } = this.deps.db;
    const read =
      ids.length === 1
        ? [await messages.findOne(this.scope(orgId), { id: ids[0] })].filter((m) => m !== null)
        : await messages.find(this.scope(orgId), { id: { $in: ids } });
    const byId = new Map(read.map((m) => [m.id, m]));
    await this.writeChanges(orgId, foldReports(byId, reports, nowIso()), byId, state.relayOnlineSince);
    if (released) await this.pump(ctx, orgId, state);
  }

  /**
   * Each status change written with its events (events/outbox.ts): a crash
   * after the write loses nothing. The statistics count the applied ones in
   * the same batch (one upsert per bucket, not per message).
   */
  private async writeChanges(
    orgId: string,
    changes: StatusChange[],
    read: Map<string, MessageDoc>,
    relayOnlineSince: number | undefined,
  ): Promise<void> {
    const count = (applied: boolean[]) =>
      this.deps.rollups.write(statusTally(orgId, changes, read, applied, Date.now()));
    const applied = await this.deps.outbox.changeMany(
      this.deps.db.messages,
      this.scope(orgId),
      changes.map((c) => ({ filter: c.filter, update: { $set: c.set }, events: c.events, exclusive: c.exclusive })),
      count,
    );
    const now = Date.now();
    changes.forEach((c, i) => {
      if (!applied[i]) return;
      const doc = read.get(String(c.filter.id));
      const createdAt = Date.parse(doc?.createdAt ?? '');
      for (const outcome of c.reached) {
        countMessages(outcome);
        observeLatency(outcome, (now - createdAt) / 1000);
        if (doc) observeHop(outcome, doc.createdAt, String(c.set[outcome === 'sent' ? 'sentAt' : 'deliveredAt']));
      }
      const hops = (c.set.agentCheckpoints as AgentCheckpoint[] | undefined) ?? [];
      for (const hop of hops.slice(doc?.agentCheckpoints?.length ?? 0))
        if (doc) observeHop(hop.hop, doc.createdAt, hop.at);
      // The delivery SLO's clock runs only while a relay is online: from acceptance, or from when one came online if later.
      if (c.reached.includes('sent'))
        observeSendWait((now - Math.max(createdAt, relayOnlineSince ?? createdAt)) / 1000);
    });
  }

  async sendTimeout(ctx: TenantContext, messageId: string, relayId: string, attempt: number): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const doc = await this.deps.db.messages.findOne(this.scope(orgId), {
      id: messageId,
      status: 'processing',
      relayId,
      attempts: attempt,
    });
    if (!doc) return;
    await this.failAttempt(
      ctx,
      orgId,
      messageId,
      relayId,
      attempt,
      `the relay did not report on the send within ${this.deps.config.messageSendTimeoutMs} ms`,
    );
    await this.pump(ctx, orgId, state);
  }

  /** Retries with backoff (base, then 4x, with jitter) until the attempts run out; then failed, dead-lettered, message.failed. */
  private async failAttempt(
    ctx: TenantContext,
    orgId: string,
    messageId: string,
    relayId: string,
    attempt: number,
    error: string,
  ): Promise<void> {
    const { messages } = this.deps.db;
    const scope = this.scope(orgId);
    const current = await messages.findOne(scope, { id: messageId, status: 'processing', relayId, attempts: attempt });
    if (!current) return;
    const now = nowIso();
    if (current.attempts < this.deps.config.messageMaxAttempts) {
      const delayMs = backoffMs(this.deps.config.messageRetryBaseMs, current.attempts);
      const retry = await messages.updateOne(
        scope,
        { id: messageId, status: 'processing', relayId, attempts: current.attempts },
        {
          $set: {
            status: 'queued',
            relayId: null,
            lastError: error,
            nextAttemptAt: new Date(Date.now() + delayMs).toISOString(),
            updatedAt: now,
          },
        },
      );
      if (retry) await ctx.send(tenantProtocol, orgId, { kind: 'retry', messageId }, { delayMs });
      return;
    }
    const event = domainEvent(
      'message.failed',
      current,
      { ...messageEventData({ ...current, status: 'failed' }), error },
      changeEventId('message.failed', messageId),
    );
    const { doc: failed } = await this.deps.outbox.change(
      messages,
      scope,
      { id: messageId, status: 'processing', relayId, attempts: current.attempts },
      {
        $set: { status: 'failed', lastError: error, failedAt: now, deadLettered: true, updatedAt: now },
      },
      [event],
    );
    if (failed) {
      const tally = new RollupTally();
      tally.add(orgId, 'failed', Date.now(), { phoneNumber: failed.fromNumber, relayId });
      await this.deps.rollups.write(tally);
      countMessages('failed');
      countMessages('dead_lettered');
      ctx.log.warn(
        { tenantId: orgId, messageId, attempts: failed.attempts, error },
        'message failed after every attempt',
      );
    }
  }

  async retry(ctx: TenantContext, messageId: string): Promise<void> {
    const orgId = ctx.key;
    const state = await this.state(ctx);
    const doc = await this.deps.db.messages.updateOne(
      this.scope(orgId),
      { id: messageId, status: 'queued' },
      { $set: { nextAttemptAt: null } },
    );
    if (doc) state.queue.push(queueItemOf(doc, 'accepted'));
    await this.pump(ctx, orgId, state);
  }

  /**
   * Hands queued messages to relays with credit, highest priority first: one
   * `deliver` per relay, which its relay actor claims and sends. Nothing is
   * written here; a message its relay actor cannot claim (a cancelled job's)
   * comes back as a credit.
   */
  private async pump(ctx: TenantContext, orgId: string, state: TenantState): Promise<void> {
    const online = [...state.relays.values()];
    let open = online.filter((r) => r.credits > 0);
    if (open.length === 0 || state.queue.size === 0) return;
    const planned = new Map<OnlineRelay, QueueItem[]>();
    const { pacing } = state;
    const now = Date.now();
    const met: LineContact[] = [];
    let wakeAt: number | undefined;
    const held = (hold: Hold | null): boolean => {
      if (hold?.notBefore !== undefined && (wakeAt === undefined || hold.notBefore < wakeAt)) wakeAt = hold.notBefore;
      return hold !== null;
    };
    // Within one pump (one `now`, and sends only take from a line), a line out of its rate stays out, and one at its
    // new-contact cap holds every recipient it does not know: remembered, so a long paced queue is not checked line by
    // line, and the walk stops once every line that could send is out of its rate.
    const rateHeld = new Set<string>();
    const capHeld = new Set<string>();
    const lines = new Set(open.flatMap((r) => [lineOf(null, r.id), ...r.phoneNumbers]));
    let linesOut = 0;
    const holds = (line: string, to: string | undefined): boolean => {
      if (rateHeld.has(line) || (to !== undefined && capHeld.has(line) && !pacing.knows(line, to))) return true;
      const hold = pacing.hold(line, to, now);
      if (hold?.waitingFor === 'line_rate') {
        rateHeld.add(line);
        if (lines.has(line)) linesOut++;
      }
      if (hold?.waitingFor === 'new_contact_cap') capHeld.add(line);
      return held(hold);
    };
    state.queue.take((item) => {
      if (item.source !== undefined && state.closedSources.has(item.source)) return true; // leaves the queue, never claimed
      if (open.length === 0 || linesOut === lines.size) return 'stop';
      // A paced line's message stays where it is (false), so the queue's order holds: the next one it allows is the first in line.
      if (item.fromNumber && holds(item.fromNumber, item.to)) return false;
      const free = item.fromNumber ? open : open.filter((r) => !holds(lineOf(null, r.id), item.to));
      const relay = pickRelay(free, item.fromNumber, online);
      if (!relay) return false;
      const contact = pacing.take(lineOf(item.fromNumber, relay.id), item.to, now);
      if (contact) met.push(contact);
      const items = planned.get(relay);
      if (items) items.push(item);
      else planned.set(relay, [item]);
      relay.credits--;
      if (relay.credits <= 0) open = open.filter((r) => r !== relay);
      return true;
    });
    // First messages to new recipients are recorded before they go: a restart must not forget them and exceed the cap.
    if (met.length > 0) await this.recordContacts(orgId, met);
    for (const [relay, items] of planned) {
      await ctx.send(relayProtocol, relay.id, {
        kind: 'deliver',
        tenantId: orgId,
        session: relay.session,
        epoch: relay.epoch,
        items,
      });
    }
    if (wakeAt !== undefined) await this.wakeAt(ctx, state, wakeAt);
  }

  /**
   * Inserted, not upserted: an upsert is a read of the collection first, and
   * on a MongoDB wire server that scans (FerretDB 1.x) it halved a bulk
   * job's drain. One already stored (a line's memory rebuilt while a write
   * was on its way) is left as it is.
   */
  private async recordContacts(orgId: string, contacts: LineContact[]): Promise<void> {
    const docs = contacts.map((c) => ({
      id: `${c.line} ${c.to}`,
      tenantId: orgId,
      line: c.line,
      to: c.to,
      firstAt: new Date(c.firstAt).toISOString(),
    }));
    await insertNew(this.deps.db.lineContacts, this.scope(orgId), docs);
  }

  /**
   * One pace timer at a time, at the earliest slot a held message waits for;
   * a slot further off than the next sweep is left to the sweep, which pumps too.
   */
  private async wakeAt(ctx: TenantContext, state: TenantState, at: number): Promise<void> {
    const now = Date.now();
    if (at - now > this.deps.config.tenantSweepMs) return;
    if (state.paceAt !== undefined && state.paceAt > now && state.paceAt <= at) return;
    state.paceAt = at;
    await ctx.send(tenantProtocol, ctx.key, { kind: 'pace' }, { delayMs: Math.max(1, at - now) });
  }
}

/**
 * Messages by their sender line (the number, or null for the online relays
 * together): how many, how many go to a recipient new to the line, and the
 * lowest priority among them.
 */
function bySenderLine(
  pacing: LinePacing,
  relayLines: string[],
  items: Iterable<{ to?: string; fromNumber: string | null; priority?: number }>,
  now: number,
) {
  const groups = new Map<string | null, { count: number; fresh: number; lowest: number }>();
  for (const item of items) {
    const group = groups.get(item.fromNumber) ?? { count: 0, fresh: 0, lowest: Infinity };
    group.count++;
    group.lowest = Math.min(group.lowest, item.priority ?? 0);
    if (pacing.isNewTo(item.fromNumber ? [item.fromNumber] : relayLines, item.to, now)) group.fresh++;
    groups.set(item.fromNumber, group);
  }
  return groups;
}

/**
 * What the applied changes count: each status reached (sent, delivered, with
 * its latency from acceptance as the message records it) and read, at the
 * time they are stored, by the message's sender number and relay.
 */
function statusTally(
  orgId: string,
  changes: StatusChange[],
  read: Map<string, MessageDoc>,
  applied: boolean[],
  nowMs: number,
): RollupTally {
  const tally = new RollupTally();
  changes.forEach((c, i) => {
    const doc = read.get(String(c.filter.id));
    if (!applied[i] || !doc) return;
    const dims = { phoneNumber: doc.fromNumber, relayId: doc.relayId };
    const acceptedAt = Date.parse(doc.createdAt);
    for (const outcome of c.reached)
      tally.add(
        orgId,
        outcome,
        nowMs,
        dims,
        Date.parse(String(c.set[outcome === 'sent' ? 'sentAt' : 'deliveredAt'])) - acceptedAt,
      );
    if (typeof c.set.readAt === 'string') tally.add(orgId, 'read', nowMs, dims);
  });
  return tally;
}

/** Queued messages that are not waiting for a retry's backoff. */
function dueQueued() {
  return {
    status: 'queued',
    fanout: { $ne: true },
    $or: [{ nextAttemptAt: null }, { nextAttemptAt: { $exists: false } }, { nextAttemptAt: { $lte: nowIso() } }],
  };
}
