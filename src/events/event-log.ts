import { paginate, pageWindow, type Page } from '../http/pagination.ts';
import type { Collection, Filter, Store } from '../store/collection.ts';
import { insertNew } from '../store/insert-new.ts';
import type { EventCursors } from './event-cursor.ts';
import type { ReadEvent } from './event-stream.ts';

export interface OrgEventDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  event: string;
  timestamp: string;
  data: Record<string, unknown>;
  /** Sortable position in the event stream: the order events were appended in (shared by every organization, so never shown). */
  cursor: string;
}

export interface OrgEventView {
  id: string;
  event: string;
  timestamp: string;
  data: Record<string, unknown>;
  /** The position as this organization's own opaque cursor (`EventCursors`). */
  cursor: string;
}

/** What GET /api/v1/events reads: an organization's events of the retention period. */
export interface EventHistory {
  /** Newest first; with `after`, the events after that cursor, oldest first. */
  list(
    tenantId: string,
    q: { type?: string; after?: string; page: number; limit: number },
  ): Promise<Page<OrgEventView>>;
}

/** A retention sweep per organization at most this often; reads hide expired events meanwhile. */
const trimEveryMs = 3600_000;

export function eventLogCollection(store: Store): Collection<OrgEventDoc> {
  return store.collection<OrgEventDoc>('org_events', [
    { keys: { tenantId: 1, cursor: 1 } },
    { keys: { tenantId: 1, event: 1, cursor: 1 } },
  ]);
}

/** Stream positions as strings that sort in stream order: Redis ids (`ms-seq`) or the embedded stream's sequence numbers. */
export function sortableCursor(position: string): string {
  const [ms, seq] = position.split('-');
  return seq === undefined ? ms!.padStart(24, '0') : `${ms!.padStart(15, '0')}-${seq.padStart(8, '0')}`;
}

/**
 * Each organization's events, copied from the internal stream (Redis) by a
 * consumer group of its own, kept `retentionDays`: what GET /api/v1/events
 * pages through, so a receiver that was down can catch up and see what it
 * missed. The embedded store needs no copy: its stream's rows are the
 * history (`StreamHistory`).
 */
export class EventLog implements EventHistory {
  private readonly trimmedAt = new Map<string, number>();

  constructor(
    private readonly events: Collection<OrgEventDoc>,
    private readonly retentionDays: number,
    private readonly cursors: EventCursors,
  ) {}

  private cutoff(): string {
    return new Date(Date.now() - this.retentionDays * 86_400_000).toISOString();
  }

  async record(batch: ReadEvent[]): Promise<void> {
    const byOrg = new Map<string, OrgEventDoc[]>();
    for (const { position, event } of batch) {
      const doc: OrgEventDoc = {
        id: event.id,
        tenantId: event.tenantId,
        event: event.event,
        timestamp: event.timestamp,
        data: event.data,
        cursor: sortableCursor(position),
      };
      const list = byOrg.get(event.tenantId);
      if (list) list.push(doc);
      else byOrg.set(event.tenantId, [doc]);
    }
    await Promise.all(
      [...byOrg].map(async ([tenantId, docs]) => {
        await insertNew(this.events, { tenantId }, docs);
        await this.trim(tenantId);
      }),
    );
  }

  private async trim(tenantId: string): Promise<void> {
    const last = this.trimmedAt.get(tenantId) ?? 0;
    if (Date.now() - last < trimEveryMs) return;
    this.trimmedAt.set(tenantId, Date.now());
    await this.events.deleteMany({ tenantId }, { timestamp: { $lt: this.cutoff() } });
  }

  /** Newest first; with `after`, the events after that cursor, oldest first. */
  async list(
    tenantId: string,
    q: { type?: string; after?: string; page: number; limit: number },
  ): Promise<Page<OrgEventView>> {
    const filter: Filter = { timestamp: { $gte: this.cutoff() } };
    if (q.type) filter.event = q.type;
    if (q.after !== undefined) filter.cursor = { $gt: sortableCursor(await this.cursors.decode(tenantId, q.after)) };
    const { skip, limit } = pageWindow(q.page, q.limit);
    const scope = { tenantId };
    const [docs, total] = await Promise.all([
      this.events.find(scope, filter, { sort: { cursor: q.after === undefined ? -1 : 1 }, skip, limit }),
      this.events.count(scope, filter),
    ]);
    const cursors = await this.cursors.encode(
      tenantId,
      docs.map((d) => d.cursor),
    );
    return paginate(
      docs.map((d, i) => ({ id: d.id, event: d.event, timestamp: d.timestamp, data: d.data, cursor: cursors[i]! })),
      total,
      q.page,
      q.limit,
    );
  }
}
