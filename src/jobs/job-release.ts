import { tenantProtocol } from '../actors/tenant.actor.ts';
import { changeEventId, domainEvent, messageEventData, type DomainEvent, type EventStream } from '../events/event-stream.ts';
import type { Logger } from '../log.ts';
import type { MessageDoc } from '../messages/message-store.ts';
import type { ActorContext, ActorClient } from '../runtime/actor.ts';

/** message.queued events are appended this many at a time, so one append never holds a whole 10,000-message job. */
const eventChunk = 1_000;

/** Who puts the messages on the queue: the frontend (a client) or the job actor (its context, so a redelivery sends and appends nothing twice). */
export type Releaser = { client: ActorClient<typeof tenantProtocol> } | { ctx: ActorContext };

/** A message's one `message.queued` event: the same id whoever publishes it. */
export function queuedEvent(d: MessageDoc): DomainEvent {
  return domainEvent('message.queued', d, messageEventData(d), changeEventId('message.queued', d.id));
}

/**
 * Puts a job's stored, queued messages on their organization's send queue
 * (one actor message for the whole job) and announces them. As for single
 * sends, a failure here leaves them stored as queued, where the tenant's
 * sweep finds them. A job released by the frontend stored its events in its
 * messages' outboxes and published them already (`announced`); a scheduled
 * job's start appends them here, and a redelivered start appends them again
 * under the same ids, which the stream keeps once.
 */
export async function releaseToSendQueue(deps: { events: EventStream; log: Logger }, by: Releaser, orgId: string, jobId: string, docs: MessageDoc[], opts: { announced?: boolean } = {}): Promise<void> {
  if (docs.length === 0) return;
  const enqueue = { kind: 'enqueue' as const, items: docs.map((d) => ({ id: d.id, priority: d.priority, fromNumber: d.fromNumber, source: jobId })) };
  try {
    if ('ctx' in by) await by.ctx.send(tenantProtocol, orgId, enqueue);
    else await by.client.send(orgId, enqueue);
  } catch (err) {
    deps.log.warn({ err, jobId, messages: docs.length }, 'could not notify the send queue; the sweep will pick the job up');
  }
  if (opts.announced) return;
  try {
    for (let i = 0; i < docs.length; i += eventChunk) {
      await deps.events.append(docs.slice(i, i + eventChunk).map(queuedEvent), { once: true });
    }
  } catch (err) {
    deps.log.error({ err, jobId }, 'could not append message.queued events of a job');
  }
}
