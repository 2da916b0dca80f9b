import { paginate, pageWindow, type Page } from '../http/pagination.ts';
import { platformScope, type Collection, type Filter } from '../store/collection.ts';
import type { EventCursors } from './event-cursor.ts';
import { validationError } from '../errors.ts';
import { type EventHistory, type OrgEventView } from './event-log.ts';
import { loadEvents, type EventDoc, type Subjects } from './stored-events.ts';

/**
 * GET /api/v1/events on the embedded store: the event stream's own rows,
 * which it keeps `retentionDays` (`StoreEventStream` with a history), read
 * by organization. Every read names the organization (`event.tenantId`, an
 * indexed field of the platform's rows). Cursors are the same as those of
 * the per-organization log that stores kept before (the position, padded),
 * so a cursor handed out then still reads.
 */
export class StreamHistory implements EventHistory {
  constructor(
    private readonly events: Collection<EventDoc>,
    private readonly subjects: Subjects,
    private readonly retentionDays: number,
    private readonly cursors: EventCursors,
  ) {}

  async list(
    tenantId: string,
    q: { type?: string; after?: string; page: number; limit: number },
  ): Promise<Page<OrgEventView>> {
    const cutoff = new Date(Date.now() - this.retentionDays * 86_400_000).toISOString();
    const filter: Filter = { 'event.tenantId': tenantId, 'event.timestamp': { $gte: cutoff } };
    if (q.type) filter['event.event'] = q.type;
    if (q.after !== undefined) filter.seq = { $gt: await this.position(tenantId, q.after) };
    const { skip, limit } = pageWindow(q.page, q.limit);
    const [docs, total] = await Promise.all([
      this.events.find(platformScope, filter, { sort: { seq: q.after === undefined ? -1 : 1 }, skip, limit }),
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
