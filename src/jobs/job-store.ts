import { platformScope, type Store } from '../store/collection.ts';

export const jobStatuses = ['scheduled', 'processing', 'completed', 'cancelled'] as const;
export type JobStatus = (typeof jobStatuses)[number];

/**
 * How a job's messages stand; `cancelled` are the `failed` ones that a cancel
 * stopped before a relay had them, `skipped` those to a recipient on the
 * suppression list, never queued.
 */
export const resultStatuses = ['queued', 'processing', 'sent', 'delivered', 'failed', 'cancelled', 'skipped'] as const;
export type ResultStatus = (typeof resultStatuses)[number];
export type JobCounts = Record<ResultStatus, number>;

export interface JobDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId: string;
  status: JobStatus;
  totalRecipients: number;
  scheduledAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
  cancelledAt: string | null;
  /** The counts at the job actor's last look: what the job list shows. */
  counts: JobCounts;
  /** The progress check's chain: only the check that moves it on schedules the next one. */
  trackTick: number;
  /**
   * Its messages were put on the send queue and announced by the job actor.
   * Absent on jobs stored before the field: a processing one among them was
   * released by its request, so only `false` sends a restart to `start` again.
   */
  released?: boolean;
  /** Its messages' conversations were brought up to date (once, off the request path). */
  conversationsTouched: boolean;
  createdAt: string;
  updatedAt: string;
}

/**
 * One entry per job in the platform's own namespace: where a process finds
 * the jobs whose timers it must set again after a restart (the embedded
 * transport's timers live in memory), and what the jobs-by-status gauge counts.
 * The job document stays the truth; this follows it.
 */
export interface JobIndexDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  /** The tenant this entry points into (`tenantId` above is the platform scope); the stored name stays `orgId` so existing data reads. */
  orgId: string;
  teamId: string;
  status: JobStatus;
  scheduledAt: string | null;
  /** A timer of the job actor is due: its start, or its next progress check. */
  active: boolean;
}

export function jobCollections(store: Store) {
  return {
    jobs: store.collection<JobDoc>('bulk_jobs', [
      { keys: { tenantId: 1, teamId: 1, createdAt: -1 }, newestFirst: true },
      { keys: { tenantId: 1, status: 1 } },
    ]),
    jobIndex: store.collection<JobIndexDoc>('bulk_job_index', [
      { keys: { tenantId: 1, status: 1 } },
      { keys: { tenantId: 1, active: 1 } },
    ]),
  };
}

export type JobCollections = ReturnType<typeof jobCollections>;

/**
 * The organization's cancelled jobs that still have messages to stop or to
 * finish: sources the dispatch must not hand out. Those of `closed` (jobs the
 * dispatch heard were cancelled) stay in until they finish, whatever status
 * the store shows: a cancel is never undone, though on a MongoDB wire server
 * such as FerretDB 1.x a concurrent write can briefly put the job back as
 * running until its job actor makes the cancel again (JobTracker.stop).
 */
export async function cancelledJobIds(db: JobCollections, tenantId: string, closed: string[] = []): Promise<string[]> {
  const cancelled =
    closed.length === 0 ? { status: 'cancelled' } : { $or: [{ status: 'cancelled' }, { id: { $in: closed } }] };
  return (await db.jobs.find({ tenantId }, { ...cancelled, completedAt: null })).map((j) => j.id);
}

export const jobIndexScope = platformScope;

export function zeroCounts(): JobCounts {
  return { queued: 0, processing: 0, sent: 0, delivered: 0, failed: 0, cancelled: 0, skipped: 0 };
}

/** Done: sent, delivered, failed, cancelled or skipped. */
export function progressOf(counts: JobCounts, total: number): number {
  if (total === 0) return 1;
  const done = counts.sent + counts.delivered + counts.failed + counts.cancelled + counts.skipped;
  return Math.min(1, done / total);
}

/** What the API shows of a job. */
export function publicJob(doc: JobDoc, counts: JobCounts = doc.counts) {
  return {
    jobId: doc.id,
    status: doc.status,
    teamId: doc.teamId,
    totalRecipients: doc.totalRecipients,
    counts,
    progress: progressOf(counts, doc.totalRecipients),
    createdAt: doc.createdAt,
    scheduledAt: doc.scheduledAt,
    startedAt: doc.startedAt,
    completedAt: doc.completedAt,
    cancelledAt: doc.cancelledAt,
  };
}
