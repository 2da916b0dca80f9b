import { domainEvent, messageEventData, type EventStream } from '../../events/event-stream.ts';
import { jobEventId } from '../../jobs/job-stop.ts';
import type { Logger } from '../../log.ts';
import type { MessageDoc } from '../../messages/message-store.ts';
import { inSteps, workClass, type ActorContext } from '../../runtime/actor.ts';
import { queueItemOf, tenantProtocol } from '../tenant/protocol.ts';

/** message.queued events are appended at most this many at a time (fewer on the embedded store: a step of about 2 ms), so one append never holds a whole 10,000-message job. */
const eventChunk = 1_000;

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
  tenantId: string,
  jobId: string,
  docs: MessageDoc[],
): Promise<void> {
  if (docs.length === 0) return;
  const enqueue = {
    kind: 'enqueue' as const,
    items: docs.map((d) => queueItemOf(d, 'taken')),
  };
  try {
    await ctx.send(tenantProtocol, tenantId, enqueue, { workClass: workClass.bulk });
  } catch (err) {
    deps.log.warn(
      { err, jobId, messages: docs.length },
      'could not notify the send queue; the sweep will pick the job up',
    );
  }
  try {
    await inSteps(
      docs,
      (piece) =>
        deps.events.append(
          piece.map((d) =>
            domainEvent('message.queued', d, messageEventData(d), jobEventId(jobId, 'message.queued', d.id)),
          ),
          { once: true },
        ),
      { maxPiece: eventChunk },
    );
  } catch (err) {
    deps.log.error({ err, jobId }, 'could not append message.queued events of a job');
  }
}
