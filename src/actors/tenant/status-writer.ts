import type { Config } from '../../config.ts';
import { changeEventId, domainEvent, messageEventData } from '../../events/event-stream.ts';
import type { Outbox } from '../../events/outbox.ts';
import { nowIso } from '../../ids.ts';
import { countMessages, observeHop, observeLatency, observeSendWait } from '../../messages/message-metrics.ts';
import { RollupTally, type MessageRollups } from '../../messages/message-rollups.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import type { AgentCheckpoint } from '../../relay-protocol/frames.ts';
import { backoffMs } from './backoff.ts';
import { tenantProtocol, type StatusReport } from './protocol.ts';
import { foldReports, type StatusChange } from './status-fold.ts';
import { applyGrant, tenantScope, type TenantContext, type TenantState } from './tenant-state.ts';
import { followDeliveries } from './undelivered-watch.ts';
import { fallbackEvent } from './sms-fallback-watch.ts';

export type StatusWriterDeps = {
  config: Pick<Config, 'messageRetryBaseMs' | 'messageMaxAttempts' | 'messageSendTimeoutMs'>;
  db: Pick<MessagingCollections, 'messages'>;
  /** Writes status changes with their events (events/outbox.ts). */
  outbox: Outbox;
  /** Message statistics: counted in the same batch as the status changes. */
  rollups: MessageRollups;
};

/**
 * The status of each message as its relay reports it, its retries and its
 * failure. Every status change is one compare-and-set on the message, so a
 * replayed actor message never moves a message backwards. Credits that a
 * report frees are counted into the state and said in the answer: the
 * dispatcher decides what to hand out with them.
 */
export class StatusWriter {
  constructor(private readonly deps: StatusWriterDeps) {}

  /**
   * Sent, delivered and read reports that waited side by side: the messages
   * read in one query, every change written in one bulk write (each a
   * compare-and-set carrying its events in the message's outbox), the events
   * published together. True when their grants released credits.
   */
  async settle(ctx: TenantContext, state: TenantState, reports: StatusReport[]): Promise<boolean> {
    const tenantId = ctx.key;
    // The first report on a send: the relay actor freed its credit, and grants it with the report.
    let released = false;
    for (const r of reports) if (r.grant && applyGrant(state, r.relayId, r.grant) > 0) released = true;
    // One message is read by id (the embedded store may answer it from memory); several by one id list.
    const ids = [...new Set(reports.map((r) => r.messageId))];
    const { messages } = this.deps.db;
    const read =
      ids.length === 1
        ? [await messages.findOne(tenantScope(tenantId), { id: ids[0] })].filter((m) => m !== null)
        : await messages.find(tenantScope(tenantId), { id: { $in: ids } });
    const byId = new Map(read.map((m) => [m.id, m]));
    const changes = foldReports(byId, reports, nowIso());
    const applied = await this.writeChanges(tenantId, changes, byId, state.relayOnlineSince);
    followDeliveries(ctx, state, changes, applied, byId);
    return released;
  }

  /**
   * A failure report: its grant counted, then the attempt failed (a retry, or
   * the message failed). One with a reason is Messages' own error on the
   * message's chat.db row: `not_registered` fails the message at once (no
   * attempt can reach a recipient without iMessage), and so does any error
   * that comes after the message was sent (sending it again could reach the
   * recipient twice); others are retried as any failed attempt.
   */
  async failed(ctx: TenantContext, state: TenantState, report: StatusReport): Promise<void> {
    // The relay actor freed the send's credit, and grants it with the report.
    if (report.grant) applyGrant(state, report.relayId, report.grant);
    await this.failAttempt(ctx, report.messageId, report.relayId, report.attempt, {
      error: report.error ?? 'the relay could not send it',
      ...(report.reason ? { reason: report.reason } : {}),
      ...(report.service ? { service: report.service } : {}),
    });
  }

  /** The relay did not report on an attempt in time: the attempt failed, if it is still the one in flight (false if not). */
  async timedOut(ctx: TenantContext, messageId: string, relayId: string, attempt: number): Promise<boolean> {
    const doc = await this.deps.db.messages.findOne(tenantScope(ctx.key), {
      id: messageId,
      status: 'processing',
      relayId,
      attempts: attempt,
    });
    if (!doc) return false;
    await this.failAttempt(ctx, messageId, relayId, attempt, {
      error: `the relay did not report on the send within ${this.deps.config.messageSendTimeoutMs} ms`,
    });
    return true;
  }

  /**
   * Each status change written with its events (events/outbox.ts): a crash
   * after the write loses nothing. The statistics count the applied ones in
   * the same batch (one upsert per bucket, not per message).
   */
  private async writeChanges(
    tenantId: string,
    changes: StatusChange[],
    read: Map<string, MessageDoc>,
    relayOnlineSince: number | undefined,
  ): Promise<boolean[]> {
    const count = (applied: boolean[]) =>
      this.deps.rollups.write(statusTally(tenantId, changes, read, applied, Date.now()));
    const applied = await this.deps.outbox.changeMany(
      this.deps.db.messages,
      tenantScope(tenantId),
      changes.map((c) => ({
        filter: c.filter,
        update: { $set: c.set },
        events: c.events,
        exclusive: c.exclusive,
        carrier: read.get(String(c.filter.id)),
      })),
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
    return applied;
  }

  /** Retries with backoff (base, then 4x, with jitter) until the attempts run out; then failed, dead-lettered, message.failed. */
  private async failAttempt(
    ctx: TenantContext,
    messageId: string,
    relayId: string,
    attempt: number,
    failure: AttemptFailure,
  ): Promise<void> {
    const tenantId = ctx.key;
    const { messages } = this.deps.db;
    const scope = tenantScope(tenantId);
    const { error, reason } = failure;
    // Only Messages' own error (a reason) can fail a message already sent: its row showed the error after the send.
    const statuses = reason ? ['processing', 'sent'] : ['processing'];
    const current = await messages.findOne(scope, {
      id: messageId,
      status: { $in: statuses },
      relayId,
      attempts: attempt,
    });
    if (!current) return;
    const now = nowIso();
    const cas = { id: messageId, status: current.status, relayId, attempts: current.attempts };
    const said = {
      failureReason: reason ?? null,
      ...(failure.service && failure.service !== current.service ? { service: failure.service } : {}),
    };
    // Not registered with iMessage, and the send asked for SMS then: at once again, as SMS (one more attempt, whatever
    // the count). `if_undelivered` asks for it even once Messages showed the iMessage sent.
    if (
      reason === 'not_registered' &&
      current.fallback !== undefined &&
      current.viaSms !== true &&
      (current.status === 'processing' || current.fallback.sms === 'if_undelivered')
    ) {
      const set = { status: 'queued', relayId: null, lastError: error, ...said, viaSms: true, updatedAt: now };
      const again =
        current.status === 'sent'
          ? (
              await this.deps.outbox.change(messages, scope, cas, { $set: { ...set, smsFallbackAt: now } }, [
                fallbackEvent(current, now, 'not_registered'),
              ])
            ).doc
          : await messages.updateOne(scope, cas, { $set: set });
      if (again) await ctx.send(tenantProtocol, tenantId, { kind: 'retry', messageId, attempts: current.attempts });
      return;
    }
    const terminal = reason === 'not_registered' || current.status === 'sent';
    if (!terminal && current.attempts < this.deps.config.messageMaxAttempts) {
      const delayMs = backoffMs(this.deps.config.messageRetryBaseMs, current.attempts);
      const retry = await messages.updateOne(scope, cas, {
        $set: {
          status: 'queued',
          relayId: null,
          lastError: error,
          ...said,
          nextAttemptAt: new Date(Date.now() + delayMs).toISOString(),
          updatedAt: now,
        },
      });
      if (retry)
        await ctx.send(tenantProtocol, tenantId, { kind: 'retry', messageId, attempts: current.attempts }, { delayMs });
      return;
    }
    const event = domainEvent(
      'message.failed',
      current,
      { ...messageEventData({ ...current, status: 'failed' }), error, ...(reason ? { reason } : {}) },
      changeEventId('message.failed', messageId),
    );
    const { doc: failed } = await this.deps.outbox.change(
      messages,
      scope,
      cas,
      {
        $set: { status: 'failed', lastError: error, ...said, failedAt: now, deadLettered: true, updatedAt: now },
      },
      [event],
    );
    if (failed) {
      const tally = new RollupTally();
      tally.add(tenantId, 'failed', Date.now(), { phoneNumber: failed.fromNumber, relayId });
      await this.deps.rollups.write(tally);
      countMessages('failed');
      countMessages('dead_lettered');
      ctx.log.warn(
        { tenantId, messageId, attempts: failed.attempts, error, reason },
        terminal
          ? 'message failed: Messages reported an error retrying cannot mend'
          : 'message failed after every attempt',
      );
    }
  }
}

/** Why an attempt failed: the sentence, and Messages' reason and service when its relay reported them. */
interface AttemptFailure {
  error: string;
  reason?: string;
  service?: string;
}

/**
 * What the applied changes count: each status reached (sent, delivered, with
 * its latency from acceptance as the message records it) and read, at the
 * time they are stored, by the message's sender number and relay.
 */
function statusTally(
  tenantId: string,
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
        tenantId,
        outcome,
        nowMs,
        dims,
        Date.parse(String(c.set[outcome === 'sent' ? 'sentAt' : 'deliveredAt'])) - acceptedAt,
      );
    if (typeof c.set.readAt === 'string') tally.add(tenantId, 'read', nowMs, dims);
  });
  return tally;
}
