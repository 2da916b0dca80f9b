import type { Redis } from 'ioredis';
import type { DomainEvent, EventStream, ReadEvent } from '../events/event-stream.ts';

type StreamEntry = [id: string, fields: string[]];

/** The event stream on Redis: one stream, trimmed to about `maxLength` entries, read through consumer groups. */
export class RedisEventStream implements EventStream {
  private readonly groups = new Set<string>();

  constructor(private readonly redis: Redis, private readonly key: string, private readonly maxLength = 1_000_000) {}

  async append(events: DomainEvent[]): Promise<void> {
    if (events.length === 0) return;
    const pipeline = this.redis.pipeline();
    for (const event of events) pipeline.xadd(this.key, 'MAXLEN', '~', this.maxLength, '*', 'e', JSON.stringify(event));
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([err]) => err);
    if (failed) throw failed[0];
  }

  private async ensureGroup(group: string): Promise<void> {
    if (this.groups.has(group)) return;
    try {
      // A new group starts at the beginning of what the stream still holds.
      await this.redis.xgroup('CREATE', this.key, group, '0', 'MKSTREAM');
    } catch (err) {
      if (!String(err).includes('BUSYGROUP')) throw err;
    }
    this.groups.add(group);
  }

  async read(group: string, consumer: string, count: number): Promise<ReadEvent[]> {
    await this.ensureGroup(group);
    // Entries this consumer read before and never acknowledged come first.
    for (const from of ['0', '>']) {
      const result = (await this.redis.xreadgroup('GROUP', group, consumer, 'COUNT', count, 'STREAMS', this.key, from)) as Array<[string, StreamEntry[]]> | null;
      const entries = result?.[0]?.[1] ?? [];
      if (entries.length > 0) return entries.map(([id, fields]) => ({ position: id, event: JSON.parse(fields[fields.indexOf('e') + 1] ?? 'null') }));
    }
    return [];
  }

  async ack(group: string, positions: string[]): Promise<void> {
    if (positions.length > 0) await this.redis.xack(this.key, group, ...positions);
  }
}
