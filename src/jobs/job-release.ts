import { queueItemOf, tenantProtocol } from '../actors/tenant/protocol.ts';
import { domainEvent, messageEventData, type DomainEvent, type EventStream } from '../events/event-stream.ts';
import { nowIso } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { MessageDoc, MessagingCollections } from '../messages/message-store.ts';
import type { ActorContext } from '../runtime/actor.ts';
import { derivedId } from '../runtime/envelope.ts';

/** message.queued events are appended this many at a time, so one append never holds a whole 10,000-message job. */
const eventChunk = 1_000;

/**
 * The id of an event about one message of a job, derived from the job: a
 * release or a cancel repeated (a redelivered actor message, or one sent again
 * after a restart) appends each event once.
 */
export function jobEventId(jobId: string, event: string, messageId: string): string {
  return derivedId(jobId, `${event}\u0000${messageId}`);
}

/**
 * Puts a job's stored, queued messages on their organization's send queue
 * (one actor message for the whole job) and announces them. As for single
 * sends, a failure here leaves them stored as queued, where the tenant's
 * sweep finds them. A redelivered start appends the events again under the
 * same ids, which the stream keeps once.
 */
export async function releaseToSendQueue(
  deps: { events: EventStream; log: Logger },
  ctx: ActorContext,
  orgId: string,
  jobId: string,
  docs: MessageDoc[],
): Promise<void> {
  if (docs.length === 0) return;
  const enqueue = {
    kind: 'enqueue' as const,
    items: docs.map((d) => queueItemOf(d, 'taken')),
  };
  try {
    await ctx.send(tenantProtocol, orgId, enqueue);
  } catch (err) {
    deps.log.warn(
      { err, jobId, messages: docs.length },
      'could not notify the send queue; the sweep will pick the job up',
    );
  }
  try {
    for (let i = 0; i < docs.length; i += eventChunk) {
      const chunk = docs.slice(i, i + eventChunk);
      await deps.events.append(
        chunk.map((d) =>
          domainEvent('message.queued', d, messageEventData(d), jobEventId(jobId, 'message.queued', d.id)),
        ),
        { once: true },
      );
    }
  } catch (err) {
    deps.log.error({ err, jobId }, 'could not append message.queued events of a job');
  }
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
