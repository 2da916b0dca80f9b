import { randomUUID } from 'node:crypto';
import { relayProtocol, statusBatch } from './protocol.ts';
import { chunks } from '../../chunks.ts';
import { queueItemOf, tenantProtocol, type QueueItem } from '../tenant/protocol.ts';
import { nowIso } from '../../ids.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import { observeHop } from '../../messages/message-metrics.ts';
import { frameLimits, type SendFrame } from '../../relay-protocol/frames.ts';
import { workClass, type ActorContext, type MessageOfKind, type WorkClass } from '../../runtime/actor.ts';
import type { RelayLink } from '../../relays/relay-link.ts';
import type { FailoverCheck } from './failover-check.ts';
import { bulkSendsKept, isLive, type RelayState } from './relay-state.ts';
import type { RelayDoc } from '../../relays/relay-store.ts';
import { endSpan, outgoingTrace, SpanKind, startSpan, tracingOn } from '../../tracing/spans.ts';
import type { TraceContext } from '../../tracing/trace-context.ts';

type RelayContext = ActorContext<RelayState>;
type Msg<K extends keyof (typeof relayProtocol)['messages'] & string> = MessageOfKind<typeof relayProtocol, K>;
/** A relay's report on a send attempt, with the session it came on. */
export type SendReport = Omit<Msg<'status'>, 'kind' | 'tenantId'>;

/** Messages a `returned` carries at most (its schema's limit). */
const returnedBatch = 1_000;

/**
 * A relay's sends as its relay actor runs them: the tenant actor hands it
 * queued messages within the credits it granted; it claims each in the store
 * (`queued → processing`, one compare-and-set), keeps it in flight and
 * writes its frame to the relay's socket; a report or a send timeout settles
 * it and grants the credit back. The store stays the truth: the in-flight
 * set is read back from its `processing` messages whenever the actor is
 * activated. Only this actor claims a message for this relay or hands one
 * back from it, so those writes never race each other.
 */
export class RelaySends {
  constructor(
    private readonly deps: {
      db: MessagingCollections;
      link: RelayLink;
      sendTimeoutMs: number;
      /** Several reports go on to the tenant actor as one message (`RELAY_REPORT_BATCHES`). */
      batchReports: boolean;
      /** What a relay that went offline held is checked for on the next relay before it is sent (failover-check.ts). */
      check: FailoverCheck;
    },
  ) {}

  /**
   * The in-flight set as the store has it, when the relay's document is
   * (re)loaded. While the relay is online each send gets its timeout again
   * (due when its attempt's would have been: the worker that armed it may
   * have died first), and the tenant actor is told to ask for credits again,
   * since what was granted before was counted by the state just lost. A relay
   * that is not online holds nothing: what the store still has on it goes back.
   */
  async rebuild(ctx: RelayContext, tenantId: string, doc: RelayDoc | null): Promise<void> {
    const credits = ctx.state.credits;
    credits.clear();
    credits.detach();
    credits.capacity = doc?.status === 'online' ? doc.capacity : 0;
    const held = await this.held(ctx, tenantId);
    if (!doc || doc.status !== 'online') {
      await this.handBack(ctx, tenantId, held);
      return;
    }
    // A hand-over's claims share their time: its sends get one timer again, as they had.
    const byClaim = new Map<number, MessageDoc[]>();
    for (const m of held) {
      credits.add(m.id, m.attempts);
      const since = Date.parse(String(m.processingAt ?? m.updatedAt)) || Date.now();
      const group = byClaim.get(since);
      if (group) group.push(m);
      else byClaim.set(since, [m]);
    }
    for (const [since, docs] of byClaim) await this.armTimeout(ctx, tenantId, docs, since + this.deps.sendTimeoutMs);
    await ctx.send(tenantProtocol, tenantId, { kind: 'relay-online', relayId: ctx.key, session: doc.session });
  }

  /** A tenant activation asks for this session's credits: all that is free is granted to it. */
  async attach(ctx: RelayContext, doc: RelayDoc | null, m: Msg<'attach'>): Promise<void> {
    if (!isLive(ctx.key, doc, m.session)) return;
    ctx.state.credits.attach(m.session, m.epoch);
    await this.grant(ctx, m.tenantId);
  }

  /** Grants the tenant actor what has become free, if anything. */
  async grant(ctx: RelayContext, tenantId: string, cls: WorkClass = workClass.interactive): Promise<void> {
    const grant = ctx.state.credits.due();
    if (grant)
      await ctx.send(tenantProtocol, tenantId, { kind: 'grant', relayId: ctx.key, ...grant }, { workClass: cls });
  }

  /**
   * Claims and sends what the tenant actor handed over. A hand-over for
   * another session than the one online (the relay left or reconnected since)
   * sends nothing: its messages were never claimed and go back to the queue.
   * A message another claim or a cancel got first is skipped, and its credit
   * is granted again at once. A redelivered hand-over finds its claims made
   * and sends nothing twice; a frame its first delivery did not get out is
   * retried at the send's timeout.
   */
  async deliver(ctx: RelayContext, doc: RelayDoc | null, m: Msg<'deliver'>): Promise<void> {
    const credits = ctx.state.credits;
    if (!isLive(ctx.key, doc, m.session)) {
      ctx.log.info(
        { tenantId: m.tenantId, relayId: ctx.key, session: m.session, messages: m.items.length },
        'hand-over for a session no longer online: back to the queue',
      );
      await ctx.send(tenantProtocol, m.tenantId, { kind: 'returned', relayId: ctx.key, items: m.items });
      return;
    }
    credits.consumed(m.epoch, m.items.length);
    const relay = { id: ctx.key, node: doc.node ?? '', session: doc.session };
    const bulk = m.items.every((item) => item.source !== undefined);
    if (bulk) rememberBulk(ctx.state.bulkSends, m.items);
    const claimed = await this.claim(ctx, m);
    const { send, sent: already } = claimed.some((d) => d.failoverCheck)
      ? await this.deps.check.sift(ctx, m.tenantId, relay, claimed)
      : { send: claimed, sent: [] };
    for (const sent of send) credits.add(sent.id, sent.attempts);
    await this.armTimeout(ctx, m.tenantId, send, Date.now() + this.deps.sendTimeoutMs);
    // Each frame continues the trace of the request that sent its message, as a hop of its own.
    const spans = send.map((sent) =>
      tracingOn()
        ? startSpan('relay send', SpanKind.PRODUCER, sent, {
            'relaybox.message_id': sent.id,
            'relaybox.relay_id': ctx.key,
            'relaybox.attempt': sent.attempts,
          })
        : undefined,
    );
    // The hand-over's frames go to the relay's frontend in one message.
    try {
      await this.deps.link.deliverAll(
        relay,
        send.map((sent, i) => sendFrame(sent, outgoingTrace(spans[i], sent))),
      );
      for (const span of spans) endSpan(span);
    } catch (err) {
      for (const span of spans) endSpan(span, err);
      throw err;
    }
    if (already.length > 0) {
      // Sent by the relay that held them: reported sent here, with the guid the check found.
      for (const { doc } of already) credits.add(doc.id, doc.attempts);
      const at = nowIso();
      await this.reports(
        ctx,
        m.tenantId,
        already.map(({ doc, guid }) => ({
          session: m.session,
          messageId: doc.id,
          status: 'sent' as const,
          at,
          attempt: doc.attempts,
          ...(guid ? { guid } : {}),
        })),
      );
    }
    await this.grant(ctx, m.tenantId, bulk ? workClass.bulk : workClass.interactive);
  }

  /**
   * Claims the hand-over's messages still queued, in one write (`queued →
   * processing`, one more attempt, marked with a claim unique to this
   * delivery) that answers what this claim got: on MongoDB two round trips
   * for the whole hand-over (the write, then a read of the claim), one for a
   * hand-over of one message (`findOneAndUpdate`); on the embedded store no
   * read at all. Returned in queue order. A
   * redelivered hand-over makes a new claim, which finds its messages no
   * longer queued: nothing is sent twice.
   */
  private async claim(ctx: RelayContext, m: Msg<'deliver'>): Promise<MessageDoc[]> {
    const { messages } = this.deps.db;
    const scope = { tenantId: m.tenantId };
    const now = nowIso();
    const claim = randomUUID();
    const ids = m.items.map((item) => item.id);
    const update = {
      $set: { status: 'processing', relayId: ctx.key, processingAt: now, updatedAt: now, claim },
      // The agent's hops are those of the current attempt; a retry's backoff is over (unset, not null: a message never
      // retried, which has none, writes nothing to the backoff's sparse index).
      $unset: { agentCheckpoints: '', nextAttemptAt: '' },
      $inc: { attempts: 1 },
    };
    let got: MessageDoc[];
    if (ids.length === 1) {
      const one = await messages.updateOne(scope, { id: ids[0], status: 'queued' }, update);
      got = one ? [one] : [];
    } else {
      const claimed = await messages.updateManyReturning(scope, { id: { $in: ids }, status: 'queued' }, update, {
        id: { $in: ids },
        claim,
      });
      const byId = new Map(claimed.map((d) => [d.id, d]));
      got = ids.flatMap((id) => byId.get(id) ?? []);
    }
    for (const d of got) observeHop('handed_to_relay', d.createdAt, now);
    return got;
  }

  /**
   * Reports on sends, in the order the relay made them: the first one on an
   * attempt in flight (sent, or a delivered or read that came before it, or
   * failed) ends the attempt and frees its credit. They go on to the tenant
   * actor, which writes each status (one compare-and-set on the attempt),
   * whatever the session: several as one `statuses` (unless `batchReports`
   * is off), one as a `status`, with the credits they freed.
   */
  async reports(ctx: RelayContext, tenantId: string, reports: SendReport[]): Promise<void> {
    const { credits, bulkSends } = ctx.state;
    const parts = this.deps.batchReports ? chunks(reports, statusBatch) : reports.map((r) => [r]);
    for (const part of parts) {
      let settled = false;
      let bulk = true;
      for (const r of part) {
        if (credits.settle(r.messageId, r.attempt)) settled = true;
        // Reports on a job's sends are bulk work; one on any other send makes the whole message interactive.
        if (!bulkSends.has(r.messageId)) bulk = false;
        else if (r.status !== 'sent') bulkSends.delete(r.messageId);
      }
      const grant = settled ? credits.due() : undefined;
      await ctx.send(
        tenantProtocol,
        tenantId,
        part.length === 1
          ? { kind: 'status', relayId: ctx.key, ...part[0]!, ...(grant ? { grant } : {}) }
          : { kind: 'statuses', relayId: ctx.key, reports: part, ...(grant ? { grant } : {}) },
        { workClass: bulk ? workClass.bulk : workClass.interactive },
      );
    }
  }

  /**
   * One timer for the sends of a hand-over, due at `dueAt`: a send costs no
   * timer of its own (its write, its wake-up, its run when due).
   */
  private async armTimeout(ctx: RelayContext, tenantId: string, docs: MessageDoc[], dueAt: number): Promise<void> {
    for (const part of chunks(docs, frameLimits.maxCapacity)) {
      await ctx.send(
        relayProtocol,
        ctx.key,
        { kind: 'send-timeouts', tenantId, sends: part.map((d) => ({ messageId: d.id, attempt: d.attempts })) },
        { delayMs: Math.max(0, dueAt - Date.now()) },
      );
    }
  }

  /** The relay never reported on these attempts: each still in flight leaves it, and the tenant actor retries it. */
  async sendTimeout(
    ctx: RelayContext,
    tenantId: string,
    sends: { messageId: string; attempt: number }[],
  ): Promise<void> {
    let settled = false;
    for (const { messageId, attempt } of sends) {
      if (!ctx.state.credits.settle(messageId, attempt)) continue;
      settled = true;
      ctx.log.warn({ tenantId, relayId: ctx.key, messageId, attempt }, 'no report on a send in time');
      await ctx.send(tenantProtocol, tenantId, { kind: 'send-timeout', relayId: ctx.key, messageId, attempt });
    }
    if (settled) await this.grant(ctx, tenantId);
  }

  /** The relay leaves: everything in flight goes back to the queue, and no credit stays granted. */
  async handBackAll(ctx: RelayContext, tenantId: string): Promise<void> {
    const held = ctx.state.credits.entries().map(([id, attempts]) => ({ id, attempts }));
    ctx.state.credits.detach();
    await this.handBack(ctx, tenantId, held);
  }

  /** Sends the store still has on this relay while it is not online (a relay removed, say): handed back. */
  async handBackStray(ctx: RelayContext, doc: RelayDoc | null, tenantId: string): Promise<void> {
    if (doc?.status === 'online') return;
    await this.handBack(ctx, tenantId, await this.held(ctx, tenantId));
  }

  private held(ctx: RelayContext, tenantId: string): Promise<MessageDoc[]> {
    return this.deps.db.messages.find({ tenantId }, { status: 'processing', relayId: ctx.key }, { limit: 10_000 });
  }

  /** Each message back to `queued`, and so to the tenant's queue; the attempt it was on does not count. */
  private async handBack(ctx: RelayContext, tenantId: string, held: { id: string; attempts: number }[]): Promise<void> {
    if (held.length === 0) return;
    const now = nowIso();
    // This relay may have handed them to Messages already: the next relay checks first (failover-check.ts).
    const failoverCheck = this.deps.check.mark(ctx.key);
    const back = await Promise.all(
      held.map((m) =>
        this.deps.db.messages.updateOne(
          { tenantId },
          { id: m.id, status: 'processing', relayId: ctx.key, attempts: m.attempts },
          { $set: { status: 'queued', relayId: null, updatedAt: now, failoverCheck }, $inc: { attempts: -1 } },
        ),
      ),
    );
    for (const m of held) ctx.state.credits.settle(m.id, m.attempts);
    const items: QueueItem[] = back
      .filter((doc): doc is MessageDoc => doc !== null)
      .map((doc) => queueItemOf(doc, 'accepted'));
    if (items.length > 0)
      ctx.log.info({ tenantId, relayId: ctx.key, messages: items.length }, 'sends in flight handed back');
    for (let i = 0; i < items.length; i += returnedBatch) {
      await ctx.send(tenantProtocol, tenantId, {
        kind: 'returned',
        relayId: ctx.key,
        items: items.slice(i, i + returnedBatch),
      });
    }
  }
}

/** The ids of a bulk hand-over, kept within `bulkSendsKept` (the oldest forgotten first). */
function rememberBulk(kept: Set<string>, items: QueueItem[]): void {
  for (const item of items) kept.add(item.id);
  for (const id of kept) {
    if (kept.size <= bulkSendsKept) break;
    kept.delete(id);
  }
}

function sendFrame(doc: MessageDoc, trace: TraceContext | undefined): SendFrame {
  return {
    type: 'send',
    messageId: doc.id,
    attempt: doc.attempts,
    to: doc.to,
    ...(doc.body ? { body: doc.body } : {}),
    ...(doc.attachments.length > 0 ? { attachments: doc.attachments } : {}),
    ...(doc.fromNumber ? { fromNumber: doc.fromNumber } : {}),
    // Either fallback sends as SMS a recipient the agent knows has no iMessage; the rest of `if_undelivered` (the
    // window and a second attempt) is the server's to carry out, so the agent is told only that.
    ...(doc.viaSms
      ? { service: 'SMS' as const }
      : doc.fallback
        ? { fallback: { sms: 'if_not_imessage' as const } }
        : {}),
    ...(trace ? { traceparent: trace.traceparent } : {}),
  };
}
