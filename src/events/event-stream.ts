import { digestId, idTimeChars, newId, nowIso } from '../ids.ts';
import { copyTrace, type TraceCarrier } from '../tracing/trace-context.ts';

/**
 * The events of spec section 6, and `message.delivered`, `message.read`,
 * `message.undelivered` (sent, and not delivered within the organization's
 * window) and `message.checkpoint` (a hop of a send between queued and sent)
 * added beside them, and `contact.opted_out` and `contact.opted_in` (a handle
 * put on the organization's suppression list or taken off it), and
 * `message.reaction`, `message.edited` and `message.unsent` (a tapback on a
 * message; a received message its sender edited or unsent) and
 * `conversation.updated` (a group chat renamed, a member added or gone); webhooks and
 * automations consume them with consumer groups of their own. A webhook
 * receives only the events it names.
 */
export const eventNames = [
  'message.queued',
  'message.sent',
  'message.delivered',
  'message.read',
  'message.failed',
  'message.undelivered',
  'message.received',
  'message.checkpoint',
  'message.reaction',
  'message.edited',
  'message.unsent',
  'conversation.updated',
  'relay.online',
  'relay.offline',
  'relay.failover',
  'relay.failback',
  'contact.opted_out',
  'contact.opted_in',
] as const;
export type EventName = (typeof eventNames)[number];

export interface DomainEvent {
  id: string;
  event: EventName;
  timestamp: string;
  tenantId: string;
  teamId: string | null;
  /** The webhook payload's `data`: spec section 6, rules 4 and 5. */
  data: Record<string, unknown>;
  /** The W3C trace context of what caused it (a message's: the request that sent it), continued by its webhook deliveries. */
  traceparent?: string;
  tracestate?: string;
}

export interface ReadEvent {
  /** Position in the stream, to acknowledge. */
  position: string;
  event: DomainEvent;
}

/**
 * The internal, durable event stream. Appends are durable when they resolve;
 * each consumer group reads every event at least once, in order, and
 * acknowledges what it has handled.
 */
export interface EventStream {
  /**
   * With `once`, an event whose id was appended before (within the runtime's
   * dedupe window on Redis; ever on the embedded store) is not appended
   * again: actors append with ids derived from the actor message, so a
   * redelivered message stores its events once.
   */
  append(events: DomainEvent[], opts?: { once?: boolean }): Promise<void>;
  /**
   * Present when the stream is kept in the same embedded store as the
   * documents and commits with their writes: events appended in the same
   * synchronous run as a document write (after `ready()`) are in that write's
   * transaction, so neither exists without the other and no outbox is needed.
   * Event ids must be new (ids of new documents' events).
   */
  appendWithWrite?: (events: DomainEvent[]) => Promise<void>;
  /**
   * Present where an accepted message's row can carry its message.queued
   * event (the embedded store, whose stream is also the history): each
   * message is given its event's position (`queuedSeq`) and inserted by
   * `insert` in the caller's turn, and no event row is written; the event is
   * `queuedEvent` of the message whenever it is read (after `ready()`).
   */
  insertQueued?: <T extends QueuedSubject & { queuedSeq?: number }>(
    docs: T[],
    insert: (docs: T[]) => Promise<void>,
  ) => Promise<void>;
  /**
   * Present where a message's row can carry the events of its status
   * changes too (the embedded store), as `insertQueued` has it carry its
   * message.queued: given, for each change of a bulk write, the message as
   * read and the change's events (undefined: not a message's status
   * change), it hands out the events' positions and calls `write` in the
   * caller's turn with each change's `$set` of them (undefined where the
   * events are not the message's: `write` appends those with
   * `appendWithWrite`). `write` answers which changes applied; like an
   * append, readers stop before the positions until it settles.
   */
  carryChanges?: (
    changes: Array<{ subject: { id: string; [field: string]: unknown }; events: DomainEvent[] } | undefined>,
    write: (sets: Array<Record<string, unknown> | undefined>) => Promise<boolean[]>,
  ) => Promise<boolean[]>;
  /** Settles once `appendWithWrite` can be called. */
  ready?(): Promise<void>;
  /**
   * Events for `consumer` of `group`, about `count` of them: up to `count` on
   * the embedded store; on Redis, whose entries each hold the events one
   * append gave (a tick's), whole entries: first one for each 16 of `count`,
   * then, while the reads come back full and short of `count`, as many as the
   * events missing take at the entries' size so far, three reads more at most
   * (a read of 256 events holds from about 256 to 4,096). With `waitMs`, a stream
   * that can block (Redis: `XREADGROUP BLOCK` on a connection of the
   * group's own) waits that long for an event to be appended before it
   * returns none, and an append ends the wait at once; `blocks` says it does.
   */
  read(group: string, consumer: string, count: number, waitMs?: number): Promise<ReadEvent[]>;
  /** Whether `read` with `waitMs` waits for an append (so a reader need not pause between reads). */
  readonly blocks?: boolean;
  /** Ends a read of `group` that waits (at a stop); the read returns none or fails. */
  interrupt?(group: string): void;
  ack(group: string, positions: string[]): Promise<void>;
  /** Each consumer group's events appended and not yet acknowledged, and how long ago the oldest of them was appended. */
  lag(): Promise<GroupLag[]>;
}

export interface GroupLag {
  group: string;
  /** Events not yet handled: not yet read, or read and not yet acknowledged. */
  events: number;
  /** Seconds since the oldest of them was appended; 0 when there is none. */
  oldestAgeSeconds: number;
}

/** The ids `changeEventId` made last: a change's event id is asked again when it is stored (the embedded store's carried events). */
const recentIds = new Map<string, string>();
const recentIdsKept = 4_096;

/**
 * The id of the one event a state change makes, from what changed
 * (`message.sent` of a message, `relay.online` of a relay's session): every
 * writer, redelivery or sweep that publishes it uses the same id, so a
 * repeat is recognised downstream as the same event (and the same `webhook-id`).
 */
export function changeEventId(event: EventName, subject: string): string {
  const key = `${event}\u0000${subject}`;
  const known = recentIds.get(key);
  if (known !== undefined) return known;
  // The subject id's leading characters first: the events of messages with ordered ids (newOrderedId) are stored in that order too.
  const lead = /^[a-z]+_([A-Za-z0-9_-]+)/.exec(subject)?.[1]?.slice(0, idTimeChars) ?? '';
  const id = `evt_${lead}${digestId(key, 22 - lead.length)}`;
  if (recentIds.size >= recentIdsKept) recentIds.clear();
  recentIds.set(key, id);
  return id;
}

/**
 * `id` is given for an event of a state change (`changeEventId`), so
 * whoever publishes it makes the same event. `subject` is what it is about
 * (a message's or relay's document): its scope, and its trace context when
 * it stores one, so a message's events continue the trace of the request
 * that sent it.
 */
export function domainEvent(
  event: EventName,
  subject: { tenantId: string; teamId?: string | null } & TraceCarrier,
  data: Record<string, unknown>,
  id = newId('evt'),
): DomainEvent {
  return copyTrace<DomainEvent>(
    { id, event, timestamp: nowIso(), tenantId: subject.tenantId, teamId: subject.teamId ?? null, data },
    subject,
  );
}

/** data of message.* events (spec section 6, rule 4). */
export function messageEventData(m: {
  id: string;
  to: string;
  from: string | null;
  body: string;
  status: string;
  conversationId: string;
}) {
  return { id: m.id, to: m.to, from: m.from, body: m.body, status: m.status, conversationId: m.conversationId };
}

/** What a message.queued event is made of: the message as accepted. */
export interface QueuedSubject extends TraceCarrier {
  id: string;
  tenantId: string;
  teamId: string;
  to: string;
  from: string | null;
  body: string;
  conversationId: string;
  createdAt: string;
}

/**
 * The message.queued event of a message as accepted, from the message alone
 * (its id, time and trace too), so the event can be built again from the
 * message's row whenever it is read: on the embedded store the message row
 * carries the event's position and no event row is written.
 */
export function queuedEvent(m: QueuedSubject): DomainEvent {
  const data = { id: m.id, to: m.to, from: m.from, body: m.body, status: 'queued', conversationId: m.conversationId };
  return copyTrace<DomainEvent>(
    {
      id: changeEventId('message.queued', m.id),
      event: 'message.queued',
      timestamp: m.createdAt,
      tenantId: m.tenantId,
      teamId: m.teamId,
      data,
    },
    m,
  );
}
