import type { EventStream } from '../../events/event-stream.ts';
import { nowIso } from '../../ids.ts';
import type { Logger } from '../../log.ts';
import { sentTouch, touchConversations } from '../../messages/conversation-writer.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import { jobProtocol } from './protocol.ts';
import { tenantProtocol } from '../tenant/protocol.ts';
import { inSteps, workClass, type ActorClient, type ActorContext } from '../../runtime/actor.ts';
import { countJob } from '../../jobs/job-counts.ts';
import { releaseToSendQueue } from './job-release.ts';
import { chunks } from '../../chunks.ts';
import { stopUnsent } from '../../jobs/job-stop.ts';
import { jobIndexScope, type JobCollections, type JobDoc } from '../../jobs/job-store.ts';

/** The organization's suppression list, checked in memory (suppressions/suppression-list.ts). */
export interface SuppressionCheck {
  isSuppressed(tenantId: string, handle: string): boolean | Promise<boolean>;
}

type Deps = {
  db: MessagingCollections & JobCollections;
  events: EventStream;
  /** For timers set outside a handler (after a restart). */
  jobs: ActorClient<typeof jobProtocol>;
  log: Logger;
  /** How often a running job's progress is looked at. */
  trackMs: number;
  optOuts?: SuppressionCheck;
};

/** A job's own steps (its release, its looks) are bulk work (runtime/work-lane.ts). */
const bulkWork = { workClass: workClass.bulk };

/** The job list's counts are refreshed every this many looks. */
const countsEvery = 5;

/**
 * The job actor's work. The store is the truth: the job document and its
 * messages. Every step is a compare-and-set, so a redelivered actor message
 * or a timer set again after a restart does no harm.
 */
export class JobTracker {
  constructor(private readonly deps: Deps) {}

  /**
   * A job's messages go on the send queue and are announced: at once for a
   * job sent now (the request only stored them), at `scheduledAt` for a
   * scheduled one, whose held messages are let go first.
   */
  async start(ctx: ActorContext, tenantId: string, teamId: string): Promise<void> {
    const jobId = ctx.key;
    const { jobs, messages, jobIndex } = this.deps.db;
    const scope = { tenantId, teamId };
    const now = nowIso();
    let job = await jobs.updateOne(
      scope,
      { id: jobId, status: 'scheduled' },
      { $set: { status: 'processing', startedAt: now, updatedAt: now } },
    );
    // Sent now, or redelivered after the status moved on: release whatever is still held.
    job ??= await jobs.findOne(scope, { id: jobId, status: 'processing' });
    if (!job) return; // cancelled first: its messages are stopped, not sent
    if (job.released !== true) {
      if (job.scheduledAt)
        await messages.updateMany(
          scope,
          { jobId, status: 'queued', nextAttemptAt: job.scheduledAt },
          { $set: { nextAttemptAt: null, queuedAt: now, updatedAt: now } },
        );
      const released: MessageDoc[] = [];
      const skipped: string[] = [];
      for await (const page of messages.scan(
        scope,
        { jobId, status: 'queued', nextAttemptAt: null },
        { sort: { jobIndex: 1 } },
      ))
        for (const doc of page)
          if (job.scheduledAt && (await this.deps.optOuts?.isSuppressed(tenantId, doc.participant)))
            skipped.push(doc.id);
          else released.push(doc);
      // A scheduled job's recipient who opted out since it was accepted is skipped at its start, never queued.
      for (const ids of chunks(skipped, 1_000))
        await messages.updateMany(
          scope,
          { id: { $in: ids }, status: 'queued' },
          {
            $set: {
              status: 'failed',
              skipped: true,
              lastError: 'recipient_opted_out',
              queuedAt: null,
              failedAt: now,
              updatedAt: now,
            },
          },
        );
      await releaseToSendQueue(this.deps, ctx, tenantId, jobId, released);
      await jobs.updateOne(scope, { id: jobId }, { $set: { released: true } });
      await jobIndex.updateOne(jobIndexScope, { id: jobId }, { $set: { status: 'processing' } });
      ctx.log.info({ jobId, tenantId, messages: released.length }, 'bulk job released to the send queue');
    }
    await ctx.send(jobProtocol, jobId, { kind: 'track', tenantId, teamId, tick: job.trackTick }, bulkWork);
  }

  /** A cancelled job's messages still queued are stopped (the dispatch already hands none of them out); then its progress is followed to the end. */
  async stop(ctx: ActorContext, tenantId: string, teamId: string, cancelledAt = nowIso()): Promise<void> {
    const jobId = ctx.key;
    const scope = { tenantId, teamId };
    const job = await this.holdCancel(ctx, scope, jobId, cancelledAt);
    if (!job) return;
    const stopped = await stopUnsent(this.deps, scope, jobId);
    ctx.log.info({ jobId, tenantId, stopped }, 'cancelled job stopped');
    await ctx.send(jobProtocol, jobId, { kind: 'track', tenantId, teamId, tick: job.trackTick });
  }

  /**
   * The unfinished job, cancelled. A stop is sent only after a cancel, yet the
   * job may show `scheduled` or `processing` again: a MongoDB wire server
   * such as FerretDB 1.x applies concurrent updates of one document as read,
   * then write of the whole document, so a write of this actor (a progress
   * look's) that lands just after the request's cancel puts the job back as
   * it was. The cancel is made again here, in this actor's order, where none
   * of its later writes can undo it, and the dispatch closes the job again
   * (it may have read the job back as running meanwhile).
   */
  private async holdCancel(
    ctx: ActorContext,
    scope: { tenantId: string; teamId: string },
    jobId: string,
    cancelledAt: string,
  ): Promise<JobDoc | null> {
    const { jobs } = this.deps.db;
    const job = await jobs.findOne(scope, { id: jobId, completedAt: null });
    if (!job || job.status === 'cancelled') return job;
    const again = await jobs.updateOne(
      scope,
      { id: jobId, status: job.status, completedAt: null },
      { $set: { status: 'cancelled', cancelledAt, updatedAt: nowIso() } },
    );
    if (!again) return null;
    ctx.log.warn({ jobId, tenantId: scope.tenantId, was: job.status }, 'a cancel the store lost was made again');
    await ctx.send(tenantProtocol, scope.tenantId, { kind: 'close-source', source: jobId });
    return again;
  }

  /** One look at a running (or cancelled, still finishing) job; schedules the next until every message is done. */
  async track(ctx: ActorContext, tenantId: string, teamId: string, tick: number): Promise<void> {
    const jobId = ctx.key;
    const { jobs, jobIndex } = this.deps.db;
    const scope = { tenantId, teamId };
    const job = await jobs.findOne(scope, {
      id: jobId,
      trackTick: tick,
      completedAt: null,
      status: { $in: ['processing', 'cancelled'] },
    });
    if (!job) return; // another chain's look, or nothing left to look at
    if (!job.conversationsTouched) await this.touchConversations(job);
    // A send handed back by a relay, or failed and due for a retry, after the cancel is stopped too.
    if (job.status === 'cancelled') await stopUnsent(this.deps, scope, jobId);
    // Whether anything is open is one indexed lookup; the full counts (a count per status) only every few looks.
    const open = await this.deps.db.messages.findOne(scope, { jobId, status: { $in: ['queued', 'processing'] } });
    const now = nowIso();
    if (open) {
      const snapshot =
        (tick + 1) % countsEvery === 0 ? { counts: await countJob(this.deps.db, scope, jobId, job.status) } : {};
      // The next look is set before the chain moves on, so a crash in between repeats a look rather than losing the chain;
      // two looks of one tick both pass, and the next compare-and-set lets one of them go on.
      await ctx.send(
        jobProtocol,
        jobId,
        { kind: 'track', tenantId, teamId, tick: tick + 1 },
        { delayMs: this.deps.trackMs, workClass: workClass.bulk },
      );
      await jobs.updateOne(
        scope,
        { id: jobId, trackTick: tick },
        { $set: { trackTick: tick + 1, ...snapshot, updatedAt: now } },
      );
      return;
    }
    const counts = await countJob(this.deps.db, scope, jobId, job.status);
    const finished = await jobs.updateOne(
      scope,
      { id: jobId, completedAt: null },
      {
        $set: {
          counts,
          completedAt: now,
          updatedAt: now,
          ...(job.status === 'processing' ? { status: 'completed' } : {}),
        },
      },
    );
    if (finished) {
      await jobIndex.updateOne(jobIndexScope, { id: jobId }, { $set: { status: finished.status, active: false } });
      ctx.log.info({ jobId, tenantId, counts }, 'bulk job finished');
    }
  }

  /** Each conversation of the job shows its latest message, as a single send's does; done off the request path, a page of messages at a time. */
  private async touchConversations(job: JobDoc): Promise<void> {
    const scope = { tenantId: job.tenantId, teamId: job.teamId };
    for await (const page of this.deps.db.messages.scan(scope, { jobId: job.id }, { sort: { jobIndex: 1 } })) {
      await inSteps(page, (piece) => touchConversations(this.deps.db.conversations, piece.map(sentTouch)));
    }
    await this.deps.db.jobs.updateOne(scope, { id: job.id }, { $set: { conversationsTouched: true } });
  }

  /**
   * Sets again the timers of every job that has one due. Only for a transport
   * whose timers live in memory (the embedded default): Redis keeps its own.
   */
  async recoverTimers(): Promise<number> {
    const due = await this.deps.db.jobIndex.find(jobIndexScope, { active: true });
    for (const entry of due) {
      const job = await this.deps.db.jobs.findOne({ tenantId: entry.orgId, teamId: entry.teamId }, { id: entry.id });
      if (!job) continue;
      const owner = { tenantId: entry.orgId, teamId: entry.teamId };
      if (job.status === 'scheduled')
        await this.deps.jobs.send(
          job.id,
          { kind: 'start', ...owner },
          { delayMs: Math.max(0, Date.parse(job.scheduledAt ?? nowIso()) - Date.now()) },
        );
      else if (job.status === 'processing' && job.released === false)
        await this.deps.jobs.send(job.id, { kind: 'start', ...owner });
      else if (job.completedAt === null)
        await this.deps.jobs.send(job.id, { kind: 'track', ...owner, tick: job.trackTick });
    }
    return due.length;
  }
}
