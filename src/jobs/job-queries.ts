import { AppError } from '../errors.ts';
import type { Principal } from '../roles.ts';
import { emptyPage, paginate, pageWindow, readListPage, type PageRequest } from '../http/pagination.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import type { RelayCollections } from '../relays/relay-store.ts';
import type { Filter, Scope } from '../store/collection.ts';
import { countJob, resultFilter, resultStatus } from './job-counts.ts';
import {
  publicJob,
  type JobCollections,
  type JobCounts,
  type JobDoc,
  type JobStatus,
  type ResultStatus,
} from './job-store.ts';

const teamScope = (p: Principal): Scope => ({ tenantId: p.tenantId, teamId: p.teamId });

/** Why a skipped recipient's message was not sent, beside its error code. */
const skippedReason = "the recipient is on the organization's suppression list (opted out)";

/** How many of a scheduled job's recipients stand for all of them in its estimate. */
const forecastSample = 500;

/** The window of a job's recent throughput. */
const throughputWindowMs = 60_000;

/** The read side of bulk jobs, always within the caller's team. */
export class JobQueries {
  constructor(
    private readonly deps: {
      db: MessagingCollections & JobCollections & RelayCollections;
      assumedSendMs: number;
      /** When the dispatch expects the job's queued messages sent, from its lines' pace (epoch ms); null when it cannot say. */
      paced?: (tenantId: string, jobId: string) => Promise<number | null>;
      /** When `count` messages queued at `startAt` should all be sent, from the lines' pace and a sample of their recipients (epoch ms); null when it cannot say. */
      forecast?: (
        tenantId: string,
        plan: { startAt: number; count: number; sample: Array<{ to: string; fromNumber: string | null }> },
      ) => Promise<number | null>;
    },
  ) {}

  /** Newest first; counts and progress as of the job's last counted progress check (a few seconds at most while it runs). */
  async list(p: Principal, q: { status?: JobStatus; page: number; limit: number }) {
    const filter: Filter = q.status ? { status: q.status } : {};
    const { skip } = pageWindow(q.page, q.limit);
    const [docs, total] = await Promise.all([
      this.deps.db.jobs.find(teamScope(p), filter, { sort: { createdAt: -1 }, skip, limit: q.limit }),
      this.deps.db.jobs.count(teamScope(p), filter),
    ]);
    return paginate(
      docs.map((d) => publicJob(d)),
      total,
      q.page,
      q.limit,
    );
  }

  private async job(p: Principal, jobId: string): Promise<JobDoc> {
    const doc = await this.deps.db.jobs.findOne(teamScope(p), { id: jobId });
    if (!doc) throw new AppError('not_found', 'bulk job not found');
    return doc;
  }

  /** The job with counts read from its messages now. */
  async detail(p: Principal, jobId: string) {
    const job = await this.job(p, jobId);
    const counts = await countJob(this.deps.db, teamScope(p), jobId, job.status);
    return { ...publicJob(job, counts), estimatedCompletionAt: await this.estimate(p, job, counts) };
  }

  /**
   * When the job's open messages should be done: while some are queued, from
   * the pace of the sender lines they go through (the dispatch knows it:
   * actors/tenant/line-pacing.ts); a scheduled job's from the same pace from
   * its start, with its first `forecastSample` recipients standing for all; otherwise at the job's own rate over the
   * last minute, or, before it has one, at what the online relays' capacity
   * allows (each send assumed to take `assumedSendMs`). Null when no relay is
   * online to send them.
   */
  private async estimate(p: Principal, job: JobDoc, counts: JobCounts): Promise<string | null> {
    if (job.completedAt) return job.completedAt;
    const open = counts.queued + counts.processing;
    if (job.status === 'cancelled') return null;
    if (job.status === 'processing' && counts.queued > 0) {
      const paced = await this.deps.paced?.(p.tenantId, job.id).catch(() => null);
      if (paced) return new Date(paced).toISOString();
    }
    if (job.status === 'scheduled' && open > 0 && this.deps.forecast) {
      const sample = await this.deps.db.messages.find(
        teamScope(p),
        { jobId: job.id },
        { sort: { jobIndex: 1 }, limit: forecastSample },
      );
      const plan = {
        startAt: Date.parse(job.scheduledAt!),
        count: open,
        sample: sample.map((m) => ({ to: m.to, fromNumber: m.fromNumber ?? null })),
      };
      const forecast = await this.deps.forecast(p.tenantId, plan).catch(() => null);
      if (forecast) return new Date(forecast).toISOString();
    }
    const relays = await this.deps.db.relays.find({ tenantId: p.tenantId }, { status: 'online' });
    if (relays.length === 0) return null;
    const now = Date.now();
    const from = job.status === 'scheduled' ? Date.parse(job.scheduledAt!) : now;
    const startedMs = job.startedAt ? Date.parse(job.startedAt) : now;
    const windowMs = Math.min(throughputWindowMs, now - startedMs);
    let perSecond = 0;
    if (job.status === 'processing' && windowMs >= 1_000) {
      const since = new Date(now - windowMs).toISOString();
      const recent = await this.deps.db.messages.count(teamScope(p), {
        jobId: job.id,
        $or: [{ sentAt: { $gte: since } }, { failedAt: { $gte: since } }],
      });
      perSecond = recent / (windowMs / 1000);
    }
    if (perSecond === 0) {
      const capacity = relays.reduce((sum, r) => sum + Math.max(0, r.capacity), 0);
      perSecond = capacity / (this.deps.assumedSendMs / 1000);
    }
    if (perSecond === 0) return null;
    return new Date(from + Math.ceil((open / perSecond) * 1000)).toISOString();
  }

  /** One entry per recipient in request order; available while the job runs. */
  async results(p: Principal, jobId: string, q: PageRequest & { status?: ResultStatus }) {
    const job = await this.job(p, jobId);
    const only = q.status ? resultFilter(q.status, job.status) : {};
    if (only === null) return emptyPage(q);
    // Request order, on the index over (jobId, jobIndex, id).
    const page = await readListPage(this.deps.db.messages, teamScope(p), { jobId, ...only }, { jobIndex: 1 }, q);
    const data = page.data.map((d) => {
      const status = resultStatus(d, job.status);
      return {
        messageId: d.id,
        to: d.to,
        status,
        error: status === 'cancelled' ? 'cancelled' : d.status === 'failed' ? d.lastError : null,
        ...(status === 'skipped' ? { reason: skippedReason } : {}),
      };
    });
    return { ...page, data };
  }
}
