import type { MessageDoc, MessagingCollections } from '../messages/message-store.ts';
import type { Scope } from '../store/collection.ts';
import type { JobCounts, JobStatus, ResultStatus } from './job-store.ts';

/**
 * How a job's messages stand now, read from the messages themselves. A
 * cancelled job's messages still stored as queued are counted as cancelled:
 * the dispatch no longer hands them out, and the job actor is stopping them
 * in the store (on a MongoDB wire server, one document at a time).
 */
export async function countJob(
  db: MessagingCollections,
  scope: Scope,
  jobId: string,
  jobStatus: JobStatus,
): Promise<JobCounts> {
  const count = (filter: Record<string, unknown>) => db.messages.count(scope, { jobId, ...filter });
  const [queued, processing, sent, delivered, failedAll, cancelled, skipped] = await Promise.all([
    count({ status: 'queued' }),
    count({ status: 'processing' }),
    count({ status: 'sent' }),
    count({ status: 'delivered' }),
    count({ status: 'failed' }),
    count({ status: 'failed', cancelled: true }),
    count({ status: 'failed', skipped: true }),
  ]);
  const failed = failedAll - cancelled - skipped;
  if (jobStatus === 'cancelled')
    return { queued: 0, processing, sent, delivered, failed, cancelled: cancelled + queued, skipped };
  return { queued, processing, sent, delivered, failed, cancelled, skipped };
}

/** The filter of a job's messages in one result status, as `countJob` counts them; null when none can be in it. */
export function resultFilter(status: ResultStatus, jobStatus: JobStatus): Record<string, unknown> | null {
  const stopping = jobStatus === 'cancelled';
  if (status === 'failed') return { status: 'failed', cancelled: { $ne: true }, skipped: { $ne: true } };
  if (status === 'skipped') return { status: 'failed', skipped: true };
  if (status === 'cancelled')
    return stopping
      ? { $or: [{ status: 'failed', cancelled: true }, { status: 'queued' }] }
      : { status: 'failed', cancelled: true };
  if (status === 'queued' && stopping) return null;
  return { status };
}

/** A job's message as its results show it, as `countJob` counts it. */
export function resultStatus(doc: MessageDoc, jobStatus: JobStatus): ResultStatus {
  if (doc.skipped) return 'skipped';
  if (doc.cancelled || (doc.status === 'queued' && jobStatus === 'cancelled')) return 'cancelled';
  return doc.status;
}
