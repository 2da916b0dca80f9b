import { platformScope, type Collection, type Store } from '../store/collection.ts';
import type { DomainEvent, EventStream, ReadEvent } from './event-stream.ts';

interface EventDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  seq: number;
  event: DomainEvent;
}

interface CursorDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  seq: number;
}

/**
 * The event stream of the embedded default: events are documents with a
 * sequence number in the store, and each group keeps the last sequence it
 * acknowledged. One process appends, so the sequence is a counter.
 */
export class StoreEventStream implements EventStream {
  private readonly events: Collection<EventDoc>;
  private readonly cursors: Collection<CursorDoc>;
  private seq: number | undefined;
  private appendsSinceTrim = 0;

  /** Keeps about the newest `keep` events; older ones have been read by every consumer or never will be. */
  constructor(store: Store, private readonly keep = 100_000) {
    this.events = store.collection<EventDoc>('events', [{ keys: { tenantId: 1, seq: 1 }, unique: true }]);
    this.cursors = store.collection<CursorDoc>('event_cursors');
  }

  private async nextSeq(): Promise<number> {
    if (this.seq === undefined) {
      const [last] = await this.events.find(platformScope, {}, { sort: { seq: -1 }, limit: 1 });
      this.seq = last?.seq ?? 0;
    }
    return ++this.seq;
  }

  async append(events: DomainEvent[]): Promise<void> {
    const docs: EventDoc[] = [];
    for (const event of events) docs.push({ id: event.id, tenantId: platformScope.tenantId, seq: await this.nextSeq(), event });
    await this.events.insertMany(platformScope, docs);
    this.appendsSinceTrim += docs.length;
    if (this.appendsSinceTrim >= this.keep / 10 && this.seq !== undefined) {
      this.appendsSinceTrim = 0;
      await this.events.deleteMany(platformScope, { seq: { $lte: this.seq - this.keep } });
    }
  }

  async read(group: string, _consumer: string, count: number): Promise<ReadEvent[]> {
    const cursor = await this.cursors.findOne(platformScope, { id: group });
    const docs = await this.events.find(platformScope, { seq: { $gt: cursor?.seq ?? 0 } }, { sort: { seq: 1 }, limit: count });
    return docs.map((d) => ({ position: String(d.seq), event: d.event }));
  }

  async ack(group: string, positions: string[]): Promise<void> {
    const highest = Math.max(...positions.map(Number));
    if (!Number.isFinite(highest)) return;
    await this.cursors.updateOne(platformScope, { id: group }, { $set: { seq: highest } }, { upsert: true });
  }
}
