import type { MessagingCollections } from '../messages/message-store.ts';
import type { Scope } from '../store/collection.ts';
import type { JobCounts } from './job-store.ts';

/** How a job's messages stand now, read from the messages themselves. */
export async function countJob(db: MessagingCollections, scope: Scope, jobId: string): Promise<JobCounts> {
  const count = (filter: Record<string, unknown>) => db.messages.count(scope, { jobId, ...filter });
  const [queued, processing, sent, delivered, failedAll, cancelled] = await Promise.all([
    count({ status: 'queued' }),
    count({ status: 'processing' }),
    count({ status: 'sent' }),
    count({ status: 'delivered' }),
    count({ status: 'failed' }),
    count({ status: 'failed', cancelled: true }),
  ]);
  return { queued, processing, sent, delivered, failed: failedAll - cancelled, cancelled };
}

/** The filter of messages in one result status. */
export function resultFilter(status: keyof JobCounts): Record<string, unknown> {
  if (status === 'failed') return { status: 'failed', cancelled: { $ne: true } };
  if (status === 'cancelled') return { status: 'failed', cancelled: true };
  return { status };
}
