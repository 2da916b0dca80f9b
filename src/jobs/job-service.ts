import { Counter, register } from 'prom-client';
import type { Static } from '@sinclair/typebox';
import { AppError, pointer, validationError, type ErrorDetail } from '../errors.ts';
import { validationFailure } from '../http/validation.ts';
import type { Principal } from '../roles.ts';
import { newId, nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { EventStream } from '../events/event-stream.ts';
import type { IdempotencyKeys } from '../messages/idempotency.ts';
import type { MessageDoc, MessagingCollections } from '../messages/message-store.ts';
import { parseRecipient } from '../messages/recipients.ts';
import { sentMessage, type OptOutCheck } from '../messages/send-service.ts';
import { fallbackProblem } from '../messages/sms-fallback.ts';
import { traceFields, type TraceContext } from '../tracing/trace-context.ts';
import { countMessages } from '../messages/message-metrics.ts';
import { RollupTally, type MessageRollups } from '../messages/message-rollups.ts';
import type { jobProtocol } from '../actors/job/protocol.ts';
import type { tenantProtocol } from '../actors/tenant/protocol.ts';
import { workClass, type ActorClient } from '../runtime/actor.ts';
import { countJob } from './job-counts.ts';
import { stopUnsent } from './job-stop.ts';
import { maxScheduleAheadDays, type AcceptedJob, type BulkBody } from './job-schemas.ts';
import { jobIndexScope, publicJob, zeroCounts, type JobCollections, type JobDoc } from './job-store.ts';
import { chunks } from '../chunks.ts';

const acceptedMessages =
  (register.getSingleMetric('relaybox_bulk_messages_accepted_total') as Counter | undefined) ??
  new Counter({
    name: 'relaybox_bulk_messages_accepted_total',
    help: 'Messages accepted through bulk jobs',
  });

type Deps = {
  db: MessagingCollections & JobCollections;
  events: EventStream;
  rollups: MessageRollups;
  idempotency: IdempotencyKeys;
  jobs: ActorClient<typeof jobProtocol>;
  tenants: ActorClient<typeof tenantProtocol>;
  log: Logger;
  /** The organization's suppression list: its recipients' entries are stored skipped, never queued. */
  optOuts: OptOutCheck;
  /** The shortest `if_undelivered` window (config `smsFallbackMinSeconds`). */
  smsFallbackMinSeconds: number;
};

/** The write side of bulk jobs: accept (all or nothing) and cancel. */
export class JobService {
  constructor(private readonly deps: Deps) {}

  /** Each message of the job stores `trace`, the request's trace context, as a single send does. */
  accept(principal: Principal, input: BulkBody, idempotencyKey: string | undefined, trace: TraceContext) {
    return this.deps.idempotency.run(
      principal.tenantId,
      idempotencyKey,
      { teamId: principal.teamId, bulk: input },
      () => this.create(principal, input, trace),
    );
  }

  private async create(
    principal: Principal,
    input: BulkBody,
    trace: TraceContext,
  ): Promise<{ status: 201; body: AcceptedJob }> {
    const scheduledAt = input.scheduledAt === undefined ? null : checkSchedule(input.scheduledAt);
    const recipients = await this.checkEntries(principal.tenantId, input);
    const jobId = newId('job');
    const now = nowIso();
    const scope = { tenantId: principal.tenantId, teamId: principal.teamId };
    const owner = { tenantId: principal.tenantId, teamId: principal.teamId };
    // A scheduled job's messages wait out their start like a retry waits out its backoff: the send queue skips them until then.
    const held: Partial<MessageDoc> = scheduledAt ? { queuedAt: null, nextAttemptAt: scheduledAt } : {};
    const traced = traceFields(trace);
    const skipped: Partial<MessageDoc> = {
      status: 'failed',
      skipped: true,
      lastError: 'recipient_opted_out',
      queuedAt: null,
      failedAt: now,
    };
    let skippedCount = 0;
    const docs: MessageDoc[] = [];
    for (const [i, entry] of input.messages.entries()) {
      const optedOut = await this.deps.optOuts.isSuppressed(principal.tenantId, recipients[i]!);
      if (optedOut) skippedCount++;
      const fields = optedOut ? skipped : held;
      docs.push(
        sentMessage(principal, entry, entry.to.trim(), recipients[i]!, now, {
          jobId,
          jobIndex: i,
          ...fields,
          ...traced,
        }),
      );
    }
    const job: JobDoc = {
      id: jobId,
      tenantId: principal.tenantId,
      teamId: principal.teamId,
      status: scheduledAt ? 'scheduled' : 'processing',
      totalRecipients: docs.length,
      scheduledAt,
      startedAt: scheduledAt ? null : now,
      completedAt: null,
      cancelledAt: null,
      counts: { ...zeroCounts(), queued: docs.length - skippedCount, skipped: skippedCount },
      trackTick: 0,
      released: false,
      conversationsTouched: false,
      createdAt: now,
      updatedAt: now,
    };
    // Counted per sender number: the job's messages share their organization and time.
    const bySender = new Map<string | null, number>();
    for (const d of docs) if (!d.skipped) bySender.set(d.fromNumber, (bySender.get(d.fromNumber) ?? 0) + 1);
    const tally = new RollupTally();
    for (const [phoneNumber, count] of bySender)
      tally.add(principal.tenantId, 'accepted', Date.parse(now), { phoneNumber }, undefined, count);
    try {
      // Nothing reads the job before its id is answered: its documents are written side by side (and counted accepted with them).
      await Promise.all([
        this.deps.rollups.write(tally),
        this.deps.db.jobs.insertOne(scope, job),
        ...chunks(docs, insertChunk).map((chunk) => this.deps.db.messages.insertMany(scope, chunk)),
        this.deps.db.jobIndex.insertOne(jobIndexScope, {
          id: jobId,
          tenantId: jobIndexScope.tenantId,
          orgId: principal.tenantId,
          teamId: principal.teamId,
          status: job.status,
          scheduledAt,
          active: true,
        }),
      ]);
      // Durable before the answer: the job actor puts the messages on the send queue and announces them, now or at scheduledAt.
      // That work (an actor message of 10,000 items, 10,000 message.queued events) is the job's, not the request's.
      await this.deps.jobs.send(
        jobId,
        { kind: 'start', ...owner },
        {
          workClass: workClass.bulk,
          ...(scheduledAt ? { delayMs: Math.max(0, Date.parse(scheduledAt) - Date.now()) } : {}),
        },
      );
    } catch (err) {
      await this.forget(scope, jobId);
      throw err;
    }
    acceptedMessages.inc(docs.length - skippedCount);
    countMessages('accepted', docs.length - skippedCount);
    return {
      status: 201 as const,
      body: { jobId, status: job.status, totalRecipients: job.totalRecipients, createdAt: now, scheduledAt },
    };
  }

  /** Nothing of a refused job stays behind. */
  private async forget(scope: { tenantId: string; teamId: string }, jobId: string): Promise<void> {
    await Promise.all([
      this.deps.db.messages.deleteMany(scope, { jobId }),
      this.deps.db.jobs.deleteOne(scope, { id: jobId }),
      this.deps.db.jobIndex.deleteOne(jobIndexScope, { id: jobId }),
    ]).catch((err: unknown) => this.deps.log.error({ err, jobId }, 'could not remove a refused job'));
  }

  /**
   * What the schema cannot check, for every entry at once: each bad entry is
   * named by its JSON Pointer. Answers each entry's participant (a phone
   * number in E.164), read once here.
   */
  private async checkEntries(tenantId: string, input: BulkBody): Promise<string[]> {
    const details: Array<ErrorDetail & { entry: number }> = [];
    const fromNumbers = new Set<string>();
    const participants: string[] = [];
    input.messages.forEach((entry, i) => {
      try {
        const recipient = parseRecipient(entry.to, pointer('messages', i, 'to'));
        if (recipient.kind === 'group')
          details.push({
            entry: i,
            path: pointer('messages', i, 'to'),
            message: 'a contact group is not a recipient of a bulk job: list its members',
          });
        else participants[i] = recipient.participant;
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        for (const d of err.details ?? []) details.push({ entry: i, ...d });
      }
      if ((entry.body ?? '') === '' && (entry.attachments ?? []).length === 0)
        details.push({
          entry: i,
          path: pointer('messages', i, 'body'),
          message: 'is required unless attachments are given',
        });
      const fallback = fallbackProblem(entry.fallback, this.deps.smsFallbackMinSeconds);
      if (fallback)
        details.push({ entry: i, path: pointer('messages', i, 'fallback', fallback.field), message: fallback.message });
      if (entry.fromNumber !== undefined) fromNumbers.add(entry.fromNumber);
    });
    if (fromNumbers.size > 0) {
      const active = await this.deps.db.phoneNumbers.find(
        { tenantId },
        { number: { $in: [...fromNumbers] }, status: 'active' },
      );
      const known = new Set(active.map((n) => n.number));
      input.messages.forEach((entry, i) => {
        if (entry.fromNumber !== undefined && !known.has(entry.fromNumber))
          details.push({
            entry: i,
            path: pointer('messages', i, 'fromNumber'),
            message: 'is not an active registered phone number of the organization',
          });
      });
    }
    if (details.length === 0) return participants;
    details.sort((a, b) => a.entry - b.entry);
    throw validationFailure(
      'body',
      details.map(({ path, message }) => ({ path, message })),
    );
  }

  /**
   * Stops every message of the job that no relay has: they end failed with
   * lastError "cancelled". Sends a relay already has finish as it reports them.
   * The answer comes once the dispatch has closed the job (nothing more of it
   * is handed out); the job actor then stops its queued messages in the store,
   * which on a MongoDB wire server such as FerretDB 1.x is one write per
   * document however it is asked for (10,000 took 10 to 40 s there).
   */
  async cancel(principal: Principal, jobId: string) {
    const scope = { tenantId: principal.tenantId, teamId: principal.teamId };
    const owner = { tenantId: principal.tenantId, teamId: principal.teamId };
    const now = nowIso();
    const job = await this.deps.db.jobs.updateOne(
      scope,
      { id: jobId, status: { $in: ['scheduled', 'processing'] } },
      { $set: { status: 'cancelled', cancelledAt: now, updatedAt: now } },
    );
    if (!job) {
      const current = await this.deps.db.jobs.findOne(scope, { id: jobId });
      if (!current) throw new AppError('not_found', 'bulk job not found');
      if (current.status === 'completed')
        throw new AppError('conflict', 'the job has completed: there is nothing left to cancel');
      return publicJob(current, await countJob(this.deps.db, scope, jobId, current.status));
    }
    try {
      await this.deps.tenants.ask(principal.tenantId, { kind: 'close-source', source: jobId });
    } catch (err) {
      // The dispatch did not answer in time: its messages are stopped here instead, before the answer.
      this.deps.log.warn({ err, jobId }, 'the dispatch did not hear of a cancel; stopping its messages in the request');
      await stopUnsent(this.deps, scope, jobId);
    }
    await this.deps.db.jobIndex.updateOne(jobIndexScope, { id: jobId }, { $set: { status: 'cancelled' } });
    // The job actor stops the queued messages in the store, then records when the sends already on a relay are done.
    await this.deps.jobs
      .send(jobId, { kind: 'stop', ...owner, cancelledAt: now })
      .catch((err: unknown) =>
        this.deps.log.warn(
          { err, jobId },
          'could not hand a cancel to its job actor; its next progress check stops the messages',
        ),
      );
    return publicJob(job, await countJob(this.deps.db, scope, jobId, job.status));
  }
}

/**
 * A job's messages are written in chunks side by side: on a MongoDB wire
 * server one 10,000-document insert is one long sequential write (measured on
 * FerretDB: 8.3 s as one insertMany, 2.6 s as ten of 1,000 side by side).
 */
const insertChunk = 1_000;

function checkSchedule(raw: string): string {
  const at = Date.parse(raw);
  const now = Date.now();
  const detail = (message: string) => validationError('/scheduledAt', message);
  if (Number.isNaN(at)) throw detail('is not an ISO 8601 date-time');
  if (at <= now) throw detail('must be in the future');
  if (at > now + maxScheduleAheadDays * 24 * 3600 * 1000)
    throw detail(`must be at most ${maxScheduleAheadDays} days ahead`);
  return new Date(at).toISOString();
}
