import type { IndexSpec, Store } from '../store/collection.ts';
import { decode, type Row } from '../store/embedded-schema.ts';
import { EmbeddedStore } from '../store/embedded-store.ts';
import { quote, text, type SqlValue } from '../store/sql-filter.ts';
import { queuedEvent, type DomainEvent, type QueuedSubject } from './event-stream.ts';
import type { EventDoc } from './stored-events.ts';

/**
 * The field of an accepted message's row that holds its message.queued
 * event's position in the embedded store's event stream: the row is the
 * record of acceptance and carries the event, which is built again from it
 * (`queuedEvent`) whenever it is read. No event row is written for it.
 */
export const queuedSeqField = 'queuedSeq';

/** A message as its row carries its message.queued event. */
export type CarrierDoc = QueuedSubject & { queuedSeq?: number };

/** The indexes the carried events are read by: the stream's order, and each organization's history in that order. */
const carrierIndexes: IndexSpec[] = [
  { keys: { [queuedSeqField]: 1 }, sparse: true },
  // The time last, so a count of the history within its retention reads the index alone.
  { keys: { tenantId: 1, [queuedSeqField]: 1, createdAt: 1 }, sparse: true },
];

/** A stored event's row, or a message's row carrying its message.queued. */
export type StreamRow =
  { carried: false; seq: number; doc: EventDoc } | { carried: true; seq: number; event: DomainEvent };

const seq = `"f:${queuedSeqField}"`;

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
    messages: string,
  ) {
    store.collection(messages, carrierIndexes);
    this.messages = quote(messages);
  }

  static of(store: Store, messages: string): CarriedEvents | undefined {
    return store instanceof EmbeddedStore ? new CarriedEvents(store, messages) : undefined;
  }

  /** The highest position a message carries, or 0. */
  newest(): number {
    const row = this.store.first(`SELECT max(${seq}) AS seq FROM ${this.messages} WHERE ${seq} IS NOT NULL`) as {
      seq: number | null;
    } | null;
    return row?.seq ?? 0;
  }

  /** Positions and message ids of the carried events after `from`, in order. */
  after(from: number): Array<{ seq: number; id: string }> {
    return this.store
      .statement(`SELECT ${seq} AS seq, id FROM ${this.messages} WHERE ${seq} > ? ORDER BY ${seq}`)
      .all([from]) as Array<{ seq: number; id: string }>;
  }

  /** The carried events of these messages, by message id, with their positions. */
  byMessage(ids: string[]): Map<string, { seq: number; event: DomainEvent }> {
    const found = new Map<string, { seq: number; event: DomainEvent }>();
    if (ids.length === 0) return found;
    const rows = this.store
      .statement(
        `SELECT id, tenant, doc, ${seq} AS seq FROM ${this.messages} WHERE id IN (${ids.map(() => '?').join(', ')}) AND ${seq} IS NOT NULL`,
      )
      .all(ids.map(text)) as Array<Row & { seq: number }>;
    for (const row of rows) {
      const message = decode<CarrierDoc>(row.doc, row.id, row.tenant);
      found.set(message.id, { seq: row.seq, event: queuedEvent(message) });
    }
    return found;
  }

  /**
   * One page of an organization's history, newest first (with `after`,
   * oldest first after it): its event rows and the messages carrying their
   * message.queued, merged by position; and how many there are in all.
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
    // Events of every type are rows, message.queued too (a bulk job's, and those written before messages carried theirs).
    const arms: Array<{ sql: string; params: SqlValue[] }> = [
      {
        sql: `SELECT rid, id, tenant, doc, "f:seq" AS seq, 0 AS carried FROM events WHERE "f:event.tenantId" = ?${q.type ? ' AND "f:event.event" = ?' : ''} AND "f:seq" > ? AND json_extract(CAST(doc AS TEXT), '$.event.timestamp') >= ?`,
        params: [tenant, ...(q.type ? [text(q.type)] : []), after, q.since],
      },
    ];
    if (!q.type || q.type === 'message.queued')
      arms.push({
        sql: `SELECT rid, id, tenant, doc, ${seq} AS seq, 1 AS carried FROM ${this.messages} WHERE tenant = ? AND ${seq} > ? AND "f:createdAt" >= ?`,
        params: [tenant, after, text(q.since)],
      });
    const params = arms.flatMap((a) => a.params);
    const rows = this.store
      .statement(
        `${arms.map((a) => a.sql).join(' UNION ALL ')} ORDER BY seq ${q.descending ? 'DESC' : 'ASC'} LIMIT ? OFFSET ?`,
      )
      .all([...params, q.limit, q.skip]) as Array<Row & { seq: number; carried: 0 | 1 }>;
    const counted = this.store.first(
      `SELECT ${arms.map((a) => `(SELECT count(*) FROM (${a.sql}))`).join(' + ')} AS n`,
      params,
    ) as { n: number };
    return {
      rows: rows.map((row): StreamRow => {
        if (row.carried === 1)
          return { carried: true, seq: row.seq, event: queuedEvent(decode<CarrierDoc>(row.doc, row.id, row.tenant)) };
        return { carried: false, seq: row.seq, doc: decode<EventDoc>(row.doc, row.id, row.tenant) };
      }),
      total: counted.n,
    };
  }
}
