import { platformScope, type Collection, type Doc, type Store } from '../store/collection.ts';
import type { DomainEvent, EventName } from './event-stream.ts';

/**
 * An event as the embedded store keeps it: one row per event, serving both
 * the platform's stream (by `seq`) and each organization's history
 * (GET /api/v1/events, by `event.tenantId`). The row's `id` column is the
 * event's id, so the stored event leaves it out; a message's event leaves
 * out the message too (`subject` names it): its `data` is built again from
 * the message, whose id, recipients, body and conversation never change.
 */
export interface EventDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  seq: number;
  event: StoredEvent;
}

type StoredEvent = Omit<DomainEvent, 'id'> & {
  /** Set on events of rows written before the id was left out. */
  id?: string;
  /** The message whose fields `data` leaves out. */
  subject?: string;
};

/** What of a message a message event's `data` copies (`messageEventData`). */
export interface SubjectDoc extends Doc {
  to: string;
  from: string | null;
  body: string;
  conversationId: string;
}

/** The messages a stored event names, read (in their organization's scope) to build its `data` again. */
export type Subjects = Collection<SubjectDoc>;

const copied = ['id', 'to', 'from', 'body', 'status', 'conversationId'] as const;

export function eventCollection(store: Store): Collection<EventDoc> {
  return store.collection<EventDoc>('events', [
    { keys: { tenantId: 1, seq: 1 }, unique: true },
    // An organization's history, newest first, all of it or of one type.
    { keys: { 'event.tenantId': 1, seq: 1 } },
    { keys: { 'event.tenantId': 1, 'event.event': 1, seq: 1 } },
  ]);
}

/** Whether `data` is a message's as `messageEventData` makes it (its fields first, in that order), with anything after them. */
function copiesMessage(event: EventName, data: Record<string, unknown>): boolean {
  if (!event.startsWith('message.') || typeof data.id !== 'string' || !data.id.startsWith('msg_')) return false;
  const keys = Object.keys(data);
  return copied.every((k, i) => keys[i] === k);
}

/** The row of `event` at `seq`: without its id, and, with `slim` (its messages are at hand to read back), without its message's fields where it copies them. */
export function storedEvent(event: DomainEvent, seq: number, slim: boolean): EventDoc {
  const { id, data, ...rest } = event;
  if (!slim || !copiesMessage(event.event, data))
    return { id, tenantId: platformScope.tenantId, seq, event: { ...rest, data } };
  const { id: subject, to: _to, from: _from, body: _body, conversationId: _conversation, ...kept } = data;
  return { id, tenantId: platformScope.tenantId, seq, event: { ...rest, data: kept, subject: subject as string } };
}

/**
 * The events of `docs` as appended, each message's fields read back from
 * it (one read per organization). An event whose message is gone keeps
 * what the row holds, with the message's id.
 */
export async function loadEvents(docs: EventDoc[], subjects: Subjects | undefined): Promise<DomainEvent[]> {
  const wanted = new Map<string, Set<string>>();
  for (const { event } of docs) {
    if (event.subject === undefined) continue;
    const ids = wanted.get(event.tenantId) ?? new Set();
    ids.add(event.subject);
    wanted.set(event.tenantId, ids);
  }
  const found = new Map<string, SubjectDoc>();
  if (subjects)
    await Promise.all(
      [...wanted].map(async ([tenantId, ids]) => {
        for (const m of await subjects.find({ tenantId }, { id: { $in: [...ids] } })) found.set(m.id, m);
      }),
    );
  return docs.map((doc) => loadedEvent(doc, found));
}

function loadedEvent(doc: EventDoc, found: Map<string, SubjectDoc>): DomainEvent {
  const { subject, id: _id, data, event, timestamp, tenantId, teamId, ...trace } = doc.event;
  let full = data;
  if (subject !== undefined) {
    const m = found.get(subject);
    const { status, ...after } = data;
    full = m
      ? { id: m.id, to: m.to, from: m.from, body: m.body, status, conversationId: m.conversationId, ...after }
      : { id: subject, ...data };
  }
  return { id: doc.id, event, timestamp, tenantId, teamId, data: full, ...trace };
}
