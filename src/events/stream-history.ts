import { paginate, pageWindow, type Page } from '../http/pagination.ts';
import { platformScope, type Collection, type Filter } from '../store/collection.ts';
import type { EventCursors } from './event-cursor.ts';
import { validationError } from '../errors.ts';
import { type EventHistory, type OrgEventView } from './event-log.ts';
import type { CarriedEvents } from './carried-events.ts';
import { loadEvents, type EventDoc, type Subjects } from './stored-events.ts';

/**
 * GET /api/v1/events on the embedded store: the event stream's own rows,
 * which it keeps `retentionDays` (`StoreEventStream` with a history), and
 * the message.queued events accepted messages' rows carry
 * (`CarriedEvents`), merged by position and read by organization. Cursors are the same as those of
 * the per-organization log that stores kept before (the position, padded),
 * so a cursor handed out then still reads.
 */
export class StreamHistory implements EventHistory {
  /** With `carried` (the embedded store), accepted messages' rows carry their message.queued and are read with the event rows. */
  constructor(
    private readonly events: Collection<EventDoc>,
    private readonly subjects: Subjects,
    private readonly retentionDays: number,
    private readonly cursors: EventCursors,
    private readonly carried?: CarriedEvents,
  ) {}

  async list(
    tenantId: string,
    q: { type?: string; after?: string; page: number; limit: number },
  ): Promise<Page<OrgEventView>> {
    const since = new Date(Date.now() - this.retentionDays * 86_400_000).toISOString();
    const after = q.after === undefined ? undefined : await this.position(tenantId, q.after);
    if (!this.carried) return this.listRows(tenantId, since, after, q);
    const { skip, limit } = pageWindow(q.page, q.limit);
    const { rows, total } = this.carried.history({
      tenantId,
      since,
      ...(q.type ? { type: q.type } : {}),
      ...(after === undefined ? {} : { after }),
      descending: after === undefined,
      skip,
      limit,
    });
    const stored = rows.flatMap((r) => (r.carried ? [] : [r.doc]));
    const [loaded, cursors] = await Promise.all([
      loadEvents(stored, this.subjects),
      this.cursors.encode(
        tenantId,
        rows.map((r) => String(r.seq)),
      ),
    ]);
    let next = 0;
    const events = rows.map((r) => (r.carried ? r.event : loaded[next++]!));
    return paginate(
      events.map((e, i) => ({ id: e.id, event: e.event, timestamp: e.timestamp, data: e.data, cursor: cursors[i]! })),
      total,
      q.page,
      q.limit,
    );
  }

  /** The event rows alone: a stream in a store whose messages carry no events. */
  private async listRows(
    tenantId: string,
    since: string,
    after: number | undefined,
    q: { type?: string; page: number; limit: number },
  ): Promise<Page<OrgEventView>> {
    const filter: Filter = { 'event.tenantId': tenantId, 'event.timestamp': { $gte: since } };
    if (q.type) filter['event.event'] = q.type;
    if (after !== undefined) filter.seq = { $gt: after };
    const { skip, limit } = pageWindow(q.page, q.limit);
    const [docs, total] = await Promise.all([
      this.events.find(platformScope, filter, { sort: { seq: after === undefined ? -1 : 1 }, skip, limit }),
      this.events.count(platformScope, filter),
    ]);
    const [events, cursors] = await Promise.all([
      loadEvents(docs, this.subjects),
      this.cursors.encode(
        tenantId,
        docs.map((d) => String(d.seq)),
      ),
    ]);
    return paginate(
      events.map((e, i) => ({ id: e.id, event: e.event, timestamp: e.timestamp, data: e.data, cursor: cursors[i]! })),
      total,
      q.page,
      q.limit,
    );
  }

  /** The sequence a cursor stands for: one of a Redis stream's positions is not one of this store's. */
  private async position(tenantId: string, cursor: string): Promise<number> {
    const seq = Number(await this.cursors.decode(tenantId, cursor));
    if (!Number.isSafeInteger(seq)) throw validationError('/after', 'is not a cursor of this organization');
    return seq;
  }
}
