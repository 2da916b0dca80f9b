import { domainEvent, messageEventData, type DomainEvent, type EventStream } from '../events/event-stream.ts';
import { nowIso } from '../ids.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import { derivedId } from '../runtime/envelope.ts';

/**
 * The id of an event about one message of a job, derived from the job: a
 * release or a cancel repeated (a redelivered actor message, or one sent again
 * after a restart) appends each event once.
 */
export function jobEventId(jobId: string, event: string, messageId: string): string {
  return derivedId(jobId, `${event}\u0000${messageId}`);
}

/**
 * Every message of a cancelled job still stored as queued ends failed with
 * lastError "cancelled", in one update, each with its message.failed event.
 * The events are appended first, under ids derived from the job and the
 * message, so a stop repeated after a crash appends none twice and misses
 * none; the update is a compare-and-set on `queued` as of the read (a
 * message handed back by a relay after it is left for the next pass).
 */
export async function stopUnsent(
  deps: { db: MessagingCollections; events: EventStream },
  scope: { tenantId: string; teamId: string },
  jobId: string,
): Promise<number> {
  const readAt = nowIso();
  const queued = { jobId, status: 'queued', updatedAt: { $lte: readAt } };
  const events: DomainEvent[] = [];
  for await (const page of deps.db.messages.scan(scope, queued, { sort: { jobIndex: 1 } })) {
    for (const d of page) {
      const failed = { ...d, status: 'failed' as const, lastError: 'cancelled' };
      events.push(
        domainEvent(
          'message.failed',
          failed,
          { ...messageEventData(failed), error: 'cancelled' },
          jobEventId(jobId, 'message.failed', d.id),
        ),
      );
    }
  }
  if (events.length === 0) return 0;
  for (let i = 0; i < events.length; i += stopEventChunk)
    await deps.events.append(events.slice(i, i + stopEventChunk), { once: true });
  const now = nowIso();
  return deps.db.messages.updateMany(scope, queued, {
    $set: {
      status: 'failed',
      lastError: 'cancelled',
      cancelled: true,
      failedAt: now,
      nextAttemptAt: null,
      updatedAt: now,
    },
  });
}

/** message.failed events of a cancel are appended this many at a time. */
const stopEventChunk = 1_000;
