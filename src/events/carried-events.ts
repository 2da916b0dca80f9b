import type { IndexSpec, Store } from '../store/collection.ts';
import type { Row } from '../store/embedded-schema.ts';
import { StoredForm } from '../store/stored-form.ts';
import { EmbeddedStore } from '../store/embedded-store.ts';
import { quote, text, type SqlValue } from '../store/sql-filter.ts';
import { copyTrace } from '../tracing/trace-context.ts';
import { changeEventId, queuedEvent, type DomainEvent, type EventName, type QueuedSubject } from './event-stream.ts';
import type { EventDoc } from './stored-events.ts';

/**
 * The field of an accepted message's row that holds its message.queued
 * event's position in the embedded store's event stream: the row is the
 * record of acceptance and carries the event, which is built again from it
 * (`queuedEvent`) whenever it is read. No event row is written for it.
 */
export const queuedSeqField = 'queuedSeq';

/** The field of a message's row that holds the position of the newest status event it carries (the stream's load finds them by it). */
export const statusSeqField = 'statusSeq';

/**
 * How many status events a message's row carries, each in a field of its
 * own (`ev1` … `ev4`, in order), so that each is an index entry of its
 * own: a message's checkpoint (handed to its relay), sent, delivered and
 * read. A change whose events do not fit appends them as event rows.
 */
type Slot = 'ev1' | 'ev2' | 'ev3' | 'ev4';
const slots: Slot[] = ['ev1', 'ev2', 'ev3', 'ev4'];

/**
 * A status event a message's row carries: its position, its name without
 * `message.`, its time and what its `data` adds to the message's own fields
 * (a delivery's time, a checkpoint's hop; its status only where it is not
 * the one of its name, `ownStatus`); its id only where it is not the one
 * `changeEventId` gives for the message. The rest is the message's.
 */
export interface CarriedEntry {
  q: number;
  e: string;
  t: string;
  d?: Record<string, unknown>;
  i?: string;
}

/** The status a message has in the `data` of each event it carries, unless its entry says another. */
const ownStatus: Record<string, string> = {
  checkpoint: 'processing',
  sent: 'sent',
  delivered: 'delivered',
  read: 'delivered',
};
const prefix = 'message.';

/** A message as its row carries its message.queued event, and its status events (`ev1` … `ev4`, the newest at `statusSeq`). */
export type CarrierDoc = QueuedSubject & { queuedSeq?: number; statusSeq?: number } & Partial<
    Record<Slot, CarriedEntry>
  >;

/** The indexes the carried events are read by: the stream's order, and each organization's history in that order, of every type and of one. */
const carrierIndexes: IndexSpec[] = [
  { keys: { [queuedSeqField]: 1 }, sparse: true },
  // The time last, so a count of the history within its retention reads the index alone.
  { keys: { tenantId: 1, [queuedSeqField]: 1, createdAt: 1 }, sparse: true },
  { keys: { [statusSeqField]: 1 }, sparse: true },
  ...slots.flatMap((slot): IndexSpec[] => [
    { keys: { tenantId: 1, [`${slot}.q`]: 1, [`${slot}.t`]: 1 }, sparse: true },
    { keys: { tenantId: 1, [`${slot}.e`]: 1, [`${slot}.q`]: 1, [`${slot}.t`]: 1 }, sparse: true },
  ]),
];

/** The message fields a message event's `data` copies, first and in this order (`messageEventData`), with `status` between `body` and `conversationId`. */
const copied = ['id', 'to', 'from', 'body', 'status', 'conversationId'] as const;

/** `event` of the message `messageId` as its row carries it at `seq`; undefined when its `data` is not the message's fields. */
function carriedEntry(event: DomainEvent, seq: number, messageId: string): CarriedEntry | undefined {
  const keys = Object.keys(event.data);
  if (!event.event.startsWith(prefix) || event.data.id !== messageId || !copied.every((k, i) => keys[i] === k))
    return undefined;
  const { id: _id, to: _to, from: _from, body: _body, conversationId: _conversation, status, ...own } = event.data;
  const name = event.event.slice(prefix.length);
  const d = status === ownStatus[name] ? own : { status, ...own };
  const entry: CarriedEntry = { q: seq, e: name, t: event.timestamp };
  if (Object.keys(d).length > 0) entry.d = d;
  if (event.id !== changeEventId(event.event, subjectOf(event.event, messageId, own))) entry.i = event.id;
  return entry;
}

/**
 * The `$set` that has the row of `message` (as read) carry `events` from
 * position `first` on, in its next free slots; undefined when they do not
 * fit or are not the message's (they are appended as event rows).
 */
export function carriedSet(
  message: { id: string; [field: string]: unknown },
  events: DomainEvent[],
  first: number,
): Record<string, unknown> | undefined {
  const used = slots.findIndex((slot) => message[slot] === undefined || message[slot] === null);
  if (used < 0 || used + events.length > slots.length) return undefined;
  const set: Record<string, unknown> = {};
  for (const [k, event] of events.entries()) {
    const entry = carriedEntry(event, first + k, message.id);
    if (!entry) return undefined;
    set[slots[used + k]!] = entry;
  }
  set[statusSeqField] = first + events.length - 1;
  return set;
}

/** What a carried event's id is derived from (`changeEventId`): its message, and a checkpoint's attempt and hop (status-fold.ts). */
function subjectOf(event: EventName, messageId: string, own: Record<string, unknown>): string {
  return event === 'message.checkpoint' ? `${messageId}:${String(own.attempt)}:${String(own.hop)}` : messageId;
}

/** The status event `entry` of message `m`, as it was appended. */
function statusEvent(m: CarrierDoc, entry: CarriedEntry): DomainEvent {
  const event = `${prefix}${entry.e}` as EventName;
  const { status = ownStatus[entry.e], ...after } = entry.d ?? {};
  const data = { id: m.id, to: m.to, from: m.from, body: m.body, status, conversationId: m.conversationId, ...after };
  return copyTrace<DomainEvent>(
    {
      id: entry.i ?? changeEventId(event, subjectOf(event, m.id, after)),
      event,
      timestamp: entry.t,
      tenantId: m.tenantId,
      teamId: m.teamId ?? null,
      data,
    },
    m,
  );
}

/** The status event of `m` at position `seq`, if its row carries one there. */
function carriedAt(m: CarrierDoc, seq: number): DomainEvent | undefined {
  const entry = slots.map((slot) => m[slot]).find((e) => e?.q === seq);
  return entry ? statusEvent(m, entry) : undefined;
}

/** A carried event's key among the stream's ids: its message's id, and for a status event its position after `@`. */
export function carriedKey(messageId: string, seq?: number): string {
  return seq === undefined ? messageId : `${messageId}@${seq}`;
}

/** A stored event's row, or a message's row carrying its message.queued or one of its status events. */
export type StreamRow =
  { carried: false; seq: number; doc: EventDoc } | { carried: true; seq: number; event: DomainEvent };

const seq = `"f:${queuedSeqField}"`;
const statusSeq = `"f:${statusSeqField}"`;
const column = (path: string) => quote(`f:${path}`);

/**
 * Reads of the carried events: SQL on the messages' and `events` tables of
 * the embedded store (their key columns as `embedded-schema.ts` lays them
 * out), the two merged by position.
 */
export class CarriedEvents {
  private readonly messages: string;

  /** `messages`: the table of the messages, whose indexes for the carried events are declared here. */
  private constructor(
    private readonly store: EmbeddedStore,
    private readonly name: string,
  ) {
    store.collection(name, carrierIndexes);
    this.messages = quote(name);
  }

  static of(store: Store, messages: string): CarriedEvents | undefined {
    return store instanceof EmbeddedStore ? new CarriedEvents(store, messages) : undefined;
  }

  /** The highest position a message carries, or 0. */
  newest(): number {
    const row = this.store.first(
      `SELECT max(coalesce((SELECT max(${seq}) FROM ${this.messages} WHERE ${seq} IS NOT NULL), 0), coalesce((SELECT max(${statusSeq}) FROM ${this.messages} WHERE ${statusSeq} IS NOT NULL), 0)) AS seq`,
    ) as { seq: number | null } | null;
    return row?.seq ?? 0;
  }

  /** Positions and keys (`carriedKey`) of the carried events after `from`, in order. */
  after(from: number): Array<{ seq: number; id: string }> {
    const queued = this.store
      .statement(`SELECT ${seq} AS seq, id FROM ${this.messages} WHERE ${seq} > ? ORDER BY ${seq}`)
      .all([from]) as Array<{ seq: number; id: string }>;
    const status = this.store
      .statement(
        `SELECT id, ${slots.map((slot, k) => `${column(`${slot}.q`)} AS q${k}`).join(', ')} FROM ${this.messages} WHERE ${statusSeq} > ?`,
      )
      .all([from]) as Array<{ id: string } & Record<string, number | null>>;
    if (status.length === 0) return queued;
    const carried = status.flatMap((row) =>
      slots.flatMap((_, k) => {
        const at = row[`q${k}`];
        return at !== null && at !== undefined && at > from ? [{ seq: at, id: carriedKey(row.id, at) }] : [];
      }),
    );
    return [...queued, ...carried].sort((a, b) => a.seq - b.seq);
  }

  /** The carried events named by keys (`carriedKey`), with their positions; one no longer stored is left out. */
  byKey(keys: string[]): Array<{ seq: number; event: DomainEvent }> {
    const wanted = keys.map((key) => {
      const at = key.lastIndexOf('@');
      return at < 0 ? { id: key, seq: undefined } : { id: key.slice(0, at), seq: Number(key.slice(at + 1)) };
    });
    const ids = [...new Set(wanted.map((w) => w.id))];
    if (ids.length === 0) return [];
    const reader = this.store.rows(this.name);
    const rows = this.store
      .statement(`SELECT ${reader.rowColumns} FROM ${this.messages} WHERE id IN (${ids.map(() => '?').join(', ')})`)
      .all(ids.map(text)) as Row[];
    const messages = new Map(
      rows.map((row) => {
        const m = reader.decodeRow<CarrierDoc>(row);
        return [m.id, m];
      }),
    );
    return wanted.flatMap(({ id, seq: at }) => {
      const m = messages.get(id);
      if (!m) return [];
      if (at === undefined) return m.queuedSeq === undefined ? [] : [{ seq: m.queuedSeq, event: queuedEvent(m) }];
      const event = carriedAt(m, at);
      return event ? [{ seq: at, event }] : [];
    });
  }

  /**
   * One page of an organization's history, newest first (with `after`,
   * oldest first after it): its event rows and the messages carrying their
   * message.queued and status events, merged by position; and how many
   * there are in all.
   */
  history(q: {
    tenantId: string;
    since: string;
    type?: string;
    after?: number;
    descending: boolean;
    skip: number;
    limit: number;
  }): { rows: StreamRow[]; total: number } {
    const tenant = text(q.tenantId);
    const after = q.after ?? 0;
    const reader = this.store.rows(this.name);
    // The messages' rows with the key columns that tell their documents; the event rows with none (NULL in their place).
    const messageColumns = reader.rowColumns;
    const eventColumns = `rid, id, tenant, doc${reader.toldColumns.map((c) => `, NULL AS ${c}`).join('')}`;
    // Events of every type are rows, message.queued too (a bulk job's, and those written before messages carried theirs);
    // a message's status events are carried by its row, each in a slot of its own (one index search each).
    const arms: Array<{ sql: string; params: SqlValue[] }> = [
      {
        sql: `SELECT ${eventColumns}, "f:seq" AS seq, 0 AS carried FROM events WHERE "f:event.tenantId" = ?${q.type ? ' AND "f:event.event" = ?' : ''} AND "f:seq" > ? AND json_extract(CAST(doc AS TEXT), '$.event.timestamp') >= ?`,
        params: [tenant, ...(q.type ? [text(q.type)] : []), after, q.since],
      },
    ];
    if (!q.type || q.type === 'message.queued')
      arms.push({
        sql: `SELECT ${messageColumns}, ${seq} AS seq, 1 AS carried FROM ${this.messages} WHERE tenant = ? AND ${seq} > ? AND "f:createdAt" >= ?`,
        params: [tenant, after, text(q.since)],
      });
    if (!q.type || (q.type.startsWith('message.') && q.type !== 'message.queued'))
      for (const [k, slot] of slots.entries())
        arms.push({
          sql: `SELECT ${messageColumns}, ${column(`${slot}.q`)} AS seq, ${k + 2} AS carried FROM ${this.messages} WHERE tenant = ?${q.type ? ` AND ${column(`${slot}.e`)} = ?` : ''} AND ${column(`${slot}.q`)} > ? AND ${column(`${slot}.t`)} >= ?`,
          params: [tenant, ...(q.type ? [text(q.type.slice(prefix.length))] : []), after, text(q.since)],
        });
    const params = arms.flatMap((a) => a.params);
    const rows = this.store
      .statement(
        `${arms.map((a) => a.sql).join(' UNION ALL ')} ORDER BY seq ${q.descending ? 'DESC' : 'ASC'} LIMIT ? OFFSET ?`,
      )
      .all([...params, q.limit, q.skip]) as Array<Row & { seq: number; carried: number }>;
    const counted = this.store.first(
      `SELECT ${arms.map((a) => `(SELECT count(*) FROM (${a.sql}))`).join(' + ')} AS n`,
      params,
    ) as { n: number };
    return {
      rows: rows.map((row): StreamRow => {
        if (row.carried === 1)
          return {
            carried: true,
            seq: row.seq,
            event: queuedEvent(reader.decodeRow<CarrierDoc>(row)),
          };
        if (row.carried > 1) {
          const event = carriedAt(reader.decodeRow<CarrierDoc>(row), row.seq)!;
          return { carried: true, seq: row.seq, event };
        }
        return { carried: false, seq: row.seq, doc: StoredForm.whole.decode<EventDoc>(row.doc, row.id, row.tenant) };
      }),
      total: counted.n,
    };
  }
}
