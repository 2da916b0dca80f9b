import { tenantProtocol } from '../actors/tenant.actor.ts';
import { domainEvent, messageEventData, type EventStream } from '../events/event-stream.ts';
import type { Logger } from '../log.ts';
import type { MessageDoc } from '../messages/message-store.ts';
import type { ActorContext, ActorClient } from '../runtime/actor.ts';

/** message.queued events are appended this many at a time, so one append never holds a whole 10,000-message job. */
const eventChunk = 1_000;

/** Who puts the messages on the queue: the frontend (a client) or the job actor (its context, so a redelivery sends and appends nothing twice). */
export type Releaser = { client: ActorClient<typeof tenantProtocol> } | { ctx: ActorContext };

/**
 * Puts a job's stored, queued messages on their organization's send queue
 * (one actor message for the whole job) and announces them. As for single
 * sends, a failure here leaves them stored as queued, where the tenant's
 * sweep finds them.
 */
export async function releaseToSendQueue(deps: { events: EventStream; log: Logger }, by: Releaser, orgId: string, jobId: string, docs: MessageDoc[]): Promise<void> {
  if (docs.length === 0) return;
  const enqueue = { kind: 'enqueue' as const, items: docs.map((d) => ({ id: d.id, priority: d.priority, fromNumber: d.fromNumber, source: jobId })) };
  try {
    if ('ctx' in by) await by.ctx.send(tenantProtocol, orgId, enqueue);
    else await by.client.send(orgId, enqueue);
  } catch (err) {
    deps.log.warn({ err, jobId, messages: docs.length }, 'could not notify the send queue; the sweep will pick the job up');
  }
  try {
    for (let i = 0; i < docs.length; i += eventChunk) {
      const chunk = docs.slice(i, i + eventChunk);
      if ('ctx' in by) {
        await deps.events.append(chunk.map((d) => domainEvent('message.queued', d, messageEventData(d), by.ctx.derivedId(`message.queued:${d.id}`))), { once: true });
      } else {
        await deps.events.append(chunk.map((d) => domainEvent('message.queued', d, messageEventData(d))));
      }
    }
  } catch (err) {
    deps.log.error({ err, jobId }, 'could not append message.queued events of a job');
  }
}
