import type { Config } from '../../config.ts';
import { outboxGraceMs, type Outbox } from '../../events/outbox.ts';
import { nowIso } from '../../ids.ts';
import type { MessageRollups } from '../../messages/message-rollups.ts';
import type { MessagingCollections } from '../../messages/message-store.ts';
import type { RelayCollections } from '../../relays/relay-store.ts';
import type { ActorContext } from '../../runtime/types.ts';
import { afterInteractive, workClass } from '../../runtime/actor.ts';
import { defaultPaceOf } from '../../test-mode.ts';
import { relayProtocol } from '../relay/protocol.ts';
import { LinePacing, lineOf, type Hold, type LineContact } from './line-pacing.ts';
import { estimateAt, forecastAt, waitingFor, type ForecastPlan } from './pace-forecast.ts';
import {
  queueItemOf,
  tenantProtocol,
  type CreditGrant,
  type QueueItem,
  type RelayReport,
  type StatusReport,
} from './protocol.ts';
import { pickRelay } from './relay-choice.ts';
import { PagedQueue } from './queue-pages.ts';
import { StatusWriter } from './status-writer.ts';
import { TenantRecovery } from './tenant-recovery.ts';
import {
  applyGrant,
  noteRelays,
  tenantScope,
  type OnlineRelay,
  type TenantContext,
  type TenantState,
} from './tenant-state.ts';
import { markUndelivered } from './undelivered-watch.ts';
import { queueDueAsSms } from './sms-fallback-watch.ts';

/** Hand-out rounds of one pump at most, each after the pages its windows need (a relay's credits span a few windows at most). */
const maxRounds = 8;

type Deps = {
  config: Pick<
    Config,
    | 'messageRetryBaseMs'
    | 'messageMaxAttempts'
    | 'messageSendTimeoutMs'
    | 'tenantSweepMs'
    | 'undeliveredAfterMs'
    | 'pacing'
    | 'tenantQueueWindow'
  >;
  db: MessagingCollections & RelayCollections;
  /** Writes status changes with their events, and sweeps the events of messages and relays stored and not published (events/outbox.ts). */
  outbox: Outbox;
  /** Message statistics: counted in the same batch as the status changes. */
  rollups: MessageRollups;
  /** The tenant's closed sources as the store has them (cancelled bulk jobs not yet finished), keeping those of `closed` until they finish. */
  closedSources?: (tenantId: string, closed: string[]) => Promise<string[]>;
};

/**
 * The tenant actor's work: the organization's send queue, handed to its
 * relays within the credits their relay actors grant (each relay actor keeps
 * its own sends in flight, actors/relay/relay-sends.ts), and the status, retry and
 * failure of each message (status-writer.ts). The store is the truth; this
 * state is rebuilt from it on first use and on every sweep
 * (tenant-recovery.ts), so a crash, a takeover or a lost timer heals.
 */
export class TenantDispatcher {
  private readonly recovery: TenantRecovery;
  private readonly writer: StatusWriter;

  constructor(private readonly deps: Deps) {
    this.recovery = new TenantRecovery(deps);
    this.writer = new StatusWriter(deps);
  }

  /** The tenant's state, built from the store when the runtime activates the key. */
  async activate(ctx: ActorContext<undefined>): Promise<TenantState> {
    const state: TenantState = {
      queue: new PagedQueue(this.deps.config.tenantQueueWindow),
      relays: new Map(),
      sweepChain: undefined,
      fresh: true,
      closedSources: new Set(),
      pacing: new LinePacing(defaultPaceOf(ctx.key, this.deps.config.pacing)),
      awaitingDelivery: new Map(),
      smsFallbackDue: new Map(),
      lineRelays: new Map(),
      undeliveredAfterMs: this.deps.config.undeliveredAfterMs,
    };
    await this.recovery.rebuild(ctx, state);
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

  /** The state a query reads: as it is when answered out of the mailbox's order (`ctx.readOnly`), which starts no sweep. */
  private async readState(ctx: TenantContext): Promise<TenantState> {
    return ctx.readOnly ? ctx.state : this.state(ctx);
  }

  /** Pacing settings changed: read again, and send what they now allow. */
  async pacingChanged(ctx: TenantContext): Promise<void> {
    const state = await this.state(ctx);
    if (!ctx.state.fresh) await this.recovery.loadPaces(ctx.key, state);
    await this.pump(ctx, ctx.key, state);
  }

  /** A recipient wrote: what waited for their reply may go. */
  async inbound(ctx: TenantContext, from: string, at: number): Promise<void> {
    const state = await this.state(ctx);
    state.pacing.replied(from, at);
    await this.pump(ctx, ctx.key, state);
  }

  /** The pace timer: a paced line has a free slot. */
  async paceTimer(ctx: TenantContext): Promise<void> {
    const state = await this.state(ctx);
    delete state.paceAt;
    await this.pump(ctx, ctx.key, state);
  }

  /** Why a queued message waits (pace-forecast.ts `waitingFor`); its line and recipient answer for one counted in the store. */
  async waiting(
    ctx: TenantContext,
    messageId: string,
    stored?: { fromNumber?: string | null; to?: string },
  ): Promise<Hold | null> {
    return waitingFor(await this.readState(ctx), messageId, Date.now(), stored);
  }

  /** When a bulk job's queued messages should all be sent (pace-forecast.ts `estimateAt`). */
  async estimate(ctx: TenantContext, source: string): Promise<number | null> {
    return estimateAt(await this.readState(ctx), source, Date.now());
  }

  /** When a scheduled job's messages would all be sent (pace-forecast.ts `forecastAt`). */
  async forecast(ctx: TenantContext, plan: ForecastPlan): Promise<number | null> {
    return forecastAt(await this.readState(ctx), plan, Date.now());
  }

  /** A sender line's usage and its next free slots (epoch ms). */
  async usage(ctx: TenantContext, line: string) {
    const state = await this.readState(ctx);
    return state.pacing.usage(line, Date.now());
  }

  /**
   * A cancelled bulk job: none of its messages is handed out from now on
   * (they leave the queue at its next pass), whatever puts them back in it
   * before the job actor has stopped them in the store.
   */
  async closeSource(ctx: TenantContext, source: string): Promise<void> {
    const state = await this.state(ctx);
    state.closedSources.add(source);
    state.queue.dropSource(source);
  }

  async enqueue(ctx: TenantContext, items: QueueItem[]): Promise<void> {
    const tenantId = ctx.key;
    const state = await this.state(ctx);
    for (const item of items) state.queue.push(item);
    await this.pump(ctx, tenantId, state);
  }

  /**
   * The periodic check of a tenant: relays and orphaned sends are reconciled
   * with the store every time; queued messages a lost actor message left
   * behind are looked for only when a relay could take them and nothing is
   * waiting in memory, so a long backlog costs nothing here.
   */
  async sweep(ctx: TenantContext, chain: string): Promise<void> {
    const tenantId = ctx.key;
    const cold = ctx.state.fresh;
    const state = await this.state(ctx, chain);
    if (state.sweepChain !== chain) return;
    if (!cold) await this.recovery.reconcile(ctx, state);
    const { db, outbox } = this.deps;
    await queueDueAsSms(ctx, state, this.deps);
    await this.pump(ctx, tenantId, state);
    const scope = tenantScope(tenantId);
    // No TTL indexes on every MongoDB wire server: expired Idempotency-Keys are removed here.
    await db.idempotency.deleteMany(scope, { expiresAt: { $lte: nowIso() } });
    // Events a writer stored and could not publish (it died, or the stream failed) go out now; no more often than they can be due.
    if (Date.now() - (state.outboxSweptAt ?? 0) >= outboxGraceMs) {
      state.outboxSweptAt = Date.now();
      await outbox.sweep(db.messages, scope);
      await outbox.sweep(db.relays, scope);
    }
    await markUndelivered(ctx, state, this.deps);
    const busy =
      state.queue.size > 0 ||
      state.relays.size > 0 ||
      state.awaitingDelivery.size > 0 ||
      state.smsFallbackDue.size > 0 ||
      (await db.messages.findOne(scope, { status: { $in: ['queued', 'processing'] } })) !== null ||
      (await db.messages.findOne(scope, { outboxAt: { $exists: true } })) !== null ||
      (await db.relays.findOne(scope, { outboxAt: { $exists: true } })) !== null;
    if (!busy) {
      // The chain ends here; the next message activates the tenant again and starts a new one.
      ctx.deactivate();
      return;
    }
    await ctx.send(tenantProtocol, tenantId, { kind: 'sweep', chain }, { delayMs: this.deps.config.tenantSweepMs });
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
    const doc = await this.deps.db.relays.findOne(tenantScope(ctx.key), { id: relayId, session, status: 'online' });
    if (!doc) return; // an older connection's news
    await this.recovery.join(ctx, state, doc);
  }

  /** Credits from a relay actor, counted only if they are for this activation and the relay's current session. */
  async grant(ctx: TenantContext, grant: { relayId: string } & CreditGrant): Promise<void> {
    const state = await this.state(ctx);
    if (applyGrant(state, grant.relayId, grant) > 0) await this.pump(ctx, ctx.key, state);
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
    const state = await this.state(ctx);
    await this.writer.failed(ctx, state, report);
    await this.pump(ctx, ctx.key, state);
  }

  /**
   * Reports that waited side by side, handled as `status` handles each, in
   * one read and one write (status-writer.ts `settle`). A failure report
   * schedules a retry, so a batch holding one is handled one report at a time.
   */
  async statuses(ctx: TenantContext, reports: StatusReport[]): Promise<void> {
    if (reports.some((r) => r.status === 'failed')) {
      for (const report of reports) await this.status(ctx, report);
      return;
    }
    const state = await this.state(ctx);
    if (!(await this.writer.settle(ctx, state, reports))) return;
    // A batch's hand-out (a page read, a relay's next sends) runs as its commit's continuation, outside any slice of the
    // lane: it first lets what another organization has waiting go, as a slice would (a lone report goes on at once).
    if (reports.length > 1) await afterInteractive();
    await this.pump(ctx, ctx.key, state);
  }

  async sendTimeout(ctx: TenantContext, messageId: string, relayId: string, attempt: number): Promise<void> {
    const state = await this.state(ctx);
    if (await this.writer.timedOut(ctx, messageId, relayId, attempt)) await this.pump(ctx, ctx.key, state);
  }

  /** A message's backoff after attempt `attempts` is over: queued again unless a later attempt has been made since. */
  async retry(ctx: TenantContext, messageId: string, attempts?: number): Promise<void> {
    const tenantId = ctx.key;
    const state = await this.state(ctx);
    const doc = await this.deps.db.messages.updateOne(
      tenantScope(tenantId),
      { id: messageId, status: 'queued', ...(attempts === undefined ? {} : { attempts }) },
      { $set: { nextAttemptAt: null } },
    );
    if (doc) state.queue.push(queueItemOf(doc, 'accepted'));
    await this.pump(ctx, tenantId, state);
  }

  /**
   * Hands queued messages out while relays have credit for them, a page read
   * from the store first for each part whose window runs low; a window
   * emptied by a hand-out is read again before the next round.
   */
  private async pump(ctx: TenantContext, tenantId: string, state: TenantState): Promise<void> {
    for (let round = 0; round < maxRounds; round++) {
      if (![...state.relays.values()].some((r) => r.credits > 0) || state.queue.size === 0) return;
      const read = await this.recovery.refill(tenantId, state);
      if ((await this.handOut(ctx, tenantId, state)) === 0 && !read) return;
      if (state.queue.wanting().length === 0) return;
    }
  }

  /**
   * Hands queued messages to relays with credit, highest priority first: one
   * `deliver` per relay, which its relay actor claims and sends. Nothing is
   * written here; a message its relay actor cannot claim (a cancelled job's)
   * comes back as a credit. The messages handed out, counted.
   */
  private async handOut(ctx: TenantContext, tenantId: string, state: TenantState): Promise<number> {
    const online = [...state.relays.values()];
    let open = online.filter((r) => r.credits > 0);
    if (open.length === 0 || state.queue.held === 0) return 0;
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
    // new-contact cap (or spacing its first messages) holds every new recipient outside the reply window: remembered,
    // so a long paced queue is not checked line by line, and the walk stops once every line that could send is out of
    // its rate.
    const rateHeld = new Set<string>();
    const capHeld = new Set<string>();
    const lines = new Set(open.flatMap((r) => [lineOf(null, r.id), ...r.phoneNumbers]));
    let linesOut = 0;
    const holds = (line: string, to: string | undefined): boolean => {
      if (rateHeld.has(line) || (to !== undefined && capHeld.has(line) && pacing.isFresh(line, to, now))) return true;
      const hold = pacing.hold(line, to, now);
      if (hold?.fresh) capHeld.add(line);
      else if (hold?.waitingFor === 'line_rate') {
        rateHeld.add(line);
        if (lines.has(line)) linesOut++;
      }
      return held(hold);
    };
    const taken = state.queue.take((item) => {
      if (item.source !== undefined && state.closedSources.has(item.source)) return true; // leaves the queue, never claimed
      if (open.length === 0 || linesOut === lines.size) return 'stop';
      // A paced line's message stays where it is (false), so the queue's order holds: the next one it allows is the first in line.
      if (item.fromNumber && holds(item.fromNumber, item.to)) return false;
      const free = item.fromNumber ? open : open.filter((r) => !holds(lineOf(null, r.id), item.to));
      const relay = pickRelay(
        free,
        item.fromNumber,
        online,
        item.fromNumber ? state.lineRelays.get(item.fromNumber) : undefined,
      );
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
    if (met.length > 0) await this.recovery.recordContacts(tenantId, met);
    for (const [relay, items] of planned) {
      // A hand-over of a job's messages only is bulk work: another organization's single send is claimed first.
      const bulk = items.every((item) => item.source !== undefined);
      await ctx.send(
        relayProtocol,
        relay.id,
        { kind: 'deliver', tenantId, session: relay.session, epoch: relay.epoch, items },
        { workClass: bulk ? workClass.bulk : workClass.interactive },
      );
    }
    if (wakeAt !== undefined) await this.wakeAt(ctx, state, wakeAt);
    return taken.length;
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
