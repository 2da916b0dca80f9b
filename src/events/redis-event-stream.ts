import type { RedisClient } from '../runtime/redis-client.ts';
import { writeReplicated } from '../runtime/replicated-write.ts';
import { TickBatches } from '../runtime/tick-batches.ts';
import type { ScriptedPipeline, ScriptedRedis } from '../runtime/scripts.ts';
import type { DomainEvent, EventStream, GroupLag, ReadEvent } from './event-stream.ts';

type StreamEntry = [id: string, fields: string[]];

/**
 * The event stream on Redis: one stream, trimmed to about `maxLength` entries,
 * read through consumer groups. Entries a consumer read and never
 * acknowledged (its process died) are taken over by another consumer of the
 * group once they have been idle `claimIdleMs`. With `replicaWaitMs` (a Redis
 * Cluster) an append resolves once a replica holds it: the outbox clears an
 * event from its document only after that, so a master lost before its
 * replica had the event leaves the event in the outbox to publish again.
 */
export class RedisEventStream implements EventStream {
  private readonly groups = new Set<string>();
  private readonly lastClaim = new Map<string, number>();
  /** Each group's connection for its waiting reads: a blocking read holds a connection until it ends. */
  private readonly waiting = new Map<string, RedisClient>();
  /** Groups with nothing read and not acknowledged by this process's consumer (its batches all acknowledged): their reads skip the read from 0. */
  private readonly caughtUp = new Set<string>();
  /** Groups whose next waiting read returns at once (their consumer is stopping). */
  private readonly interrupted = new Set<string>();
  /** Appends `once` of one tick, gathered: one script call for all of them. */
  private readonly onceBatches = new TickBatches<DomainEvent>((_, events) => this.appendOnce(events));
  /** When this process last dropped ids older than the dedupe window from `<stream>:seen`. */
  private seenTrimmedAt = 0;

  constructor(
    private readonly redis: ScriptedRedis,
    private readonly key: string,
    private readonly dedupeTtlMs: number,
    private readonly maxLength = 1_000_000,
    private readonly claimIdleMs = 30_000,
    private readonly replicaWaitMs = 0,
    /** Makes a connection for one group's waiting reads; without it, `read` does not wait. */
    private readonly blockingConnection?: () => RedisClient,
    /**
     * A tick's events as one entry; false: an entry each, as versions before this format appended them, which
     * their consumers need during a rolling upgrade (`EVENT_ENTRY_BATCHES`).
     */
    private readonly grouped = true,
  ) {}

  get blocks(): boolean {
    return this.blockingConnection !== undefined;
  }

  interrupt(group: string): void {
    // A read of the group about to wait returns at once instead; one waiting already fails with its connection.
    this.interrupted.add(group);
    this.waiting.get(group)?.disconnect();
    this.waiting.delete(group);
  }

  async append(events: DomainEvent[], opts: { once?: boolean } = {}): Promise<void> {
    if (events.length === 0) return;
    if (opts.once) return this.onceBatches.add(this.key, events);
    await this.appendEntries(events, false);
  }

  /**
   * Appends what every caller of the tick gave `once`, in one script call and
   * one stream entry a few hundred events: each id not appended within the
   * dedupe window, kept in the sorted set `<stream>:seen`, whose ids older
   * than the window go at most once a second.
   */
  private appendOnce(events: DomainEvent[]): Promise<void> {
    return this.appendEntries(events, true);
  }

  private async appendEntries(events: DomainEvent[], once: boolean): Promise<void> {
    const now = Date.now();
    const trim = once && now - this.seenTrimmedAt >= seenTrimEveryMs;
    if (trim) this.seenTrimmedAt = now;
    await this.write((pipeline) => {
      for (let i = 0; i < events.length; i += entryCapacity) {
        const chunk = events.slice(i, i + entryCapacity);
        pipeline.appendEvents(
          this.key,
          `${this.key}:seen`,
          `${this.key}:appended`,
          now,
          trim && i === 0 ? now - this.dedupeTtlMs : 0,
          this.maxLength,
          once ? 1 : 0,
          this.grouped ? 1 : 0,
          ...chunk.flatMap((event) => [event.id, JSON.stringify(event)]),
        );
      }
    });
  }

  private async write(commands: (pipeline: ScriptedPipeline) => void): Promise<void> {
    if (this.replicaWaitMs > 0) {
      await writeReplicated(this.redis, this.key, this.replicaWaitMs, commands);
      return;
    }
    const pipeline = this.redis.pipeline() as ScriptedPipeline;
    commands(pipeline);
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

  async read(group: string, consumer: string, count: number, waitMs = 0): Promise<ReadEvent[]> {
    await this.ensureGroup(group);
    const claimed = await this.claimAbandoned(group, consumer, count);
    if (claimed.length > 0) {
      this.caughtUp.delete(group);
      return claimed;
    }
    // Entries this consumer read before and never acknowledged come first; then new ones, waited for when asked.
    for (const from of this.caughtUp.has(group) ? ['>'] : ['0', '>']) {
      const waits = from === '>' && waitMs > 0 && this.blockingConnection !== undefined;
      if (waits && this.interrupted.delete(group)) return [];
      const connection = waits ? this.waitingConnection(group) : this.redis;
      const asked = entriesFor(count);
      const entries = await this.readEntries(connection, group, consumer, from, asked, waits ? waitMs : 0);
      if (entries.length === 0 && from === '0') this.caughtUp.add(group);
      if (entries.length === 0) continue;
      this.caughtUp.delete(group);
      const events = entries.flatMap(entryEvents);
      // A read that came back short took every new entry there was.
      return from === '0' || entries.length < asked ? events : this.readOn(group, consumer, count, asked, events);
    }
    return [];
  }

  /**
   * Tops a full read of new entries (`entries` of them, `events`) up toward `count` events: when they were small (a
   * quiet stream's, an event or two each) it asks again, without waiting, for as many entries as the events it lacks
   * take at the size of those it read. A few reads at most: the read's events stay about `count`.
   */
  private async readOn(
    group: string,
    consumer: string,
    count: number,
    entries: number,
    events: ReadEvent[],
  ): Promise<ReadEvent[]> {
    let full = true;
    for (let round = 0; full && round < topUpRounds && events.length < count; round++) {
      const want = Math.ceil((count - events.length) / (events.length / entries));
      const more = await this.readEntries(this.redis, group, consumer, '>', want, 0);
      entries += more.length;
      full = more.length === want;
      for (const entry of more) events.push(...entryEvents(entry));
    }
    return events;
  }

  private async readEntries(
    connection: RedisClient,
    group: string,
    consumer: string,
    from: string,
    entries: number,
    blockMs: number,
  ): Promise<StreamEntry[]> {
    const block = blockMs > 0 ? ['BLOCK', blockMs] : [];
    const result = (await connection.xreadgroup(
      'GROUP',
      group,
      consumer,
      'COUNT',
      entries,
      ...(block as ['BLOCK', number]),
      'STREAMS',
      this.key,
      from,
    )) as Array<[string, StreamEntry[]]> | null;
    return result?.[0]?.[1] ?? [];
  }

  private waitingConnection(group: string): RedisClient {
    let connection = this.waiting.get(group);
    if (!connection) {
      connection = this.blockingConnection!();
      this.waiting.set(group, connection);
    }
    return connection;
  }

  private async claimAbandoned(group: string, consumer: string, count: number): Promise<ReadEvent[]> {
    const now = Date.now();
    if (now - (this.lastClaim.get(group) ?? 0) < this.claimIdleMs / 2) return [];
    const [, entries] = (await this.redis.xautoclaim(
      this.key,
      group,
      consumer,
      this.claimIdleMs,
      '0-0',
      'COUNT',
      entriesFor(count),
    )) as [string, Array<StreamEntry | null>];
    // A full batch may have more behind it: look again on the next read.
    if (entries.length < entriesFor(count)) this.lastClaim.set(group, now);
    return entries.filter((e): e is StreamEntry => Array.isArray(e)).flatMap(entryEvents);
  }

  /** Acknowledges the entries that hold these events: a batch read holds each of its entries' events, all of them. */
  async ack(group: string, positions: string[]): Promise<void> {
    const ids = [...new Set(positions.map(entryIdOf))];
    if (ids.length > 0) await this.redis.xack(this.key, group, ...ids);
    this.caughtUp.add(group);
  }

  async lag(): Promise<GroupLag[]> {
    let groups: unknown[][];
    try {
      groups = (await this.redis.xinfo('GROUPS', this.key)) as unknown[][];
    } catch (err) {
      if (String(err).includes('no such key')) return [];
      throw err;
    }
    const infos = groups.map((flat) => {
      const field = (name: string) => flat[flat.indexOf(name) + 1];
      return {
        group: String(field('name')),
        pending: Number(field('pending') ?? 0),
        lastDelivered: String(field('last-delivered-id') ?? '0-0'),
        lag: field('lag') as number | null | undefined,
      };
    });
    // One round trip for every group: its oldest entry read and not acknowledged, its first not yet read; the stream's
    // last entry, and the server's clock (the ids' clock). A second for the oldest entries read and not acknowledged.
    const pipeline = this.redis.pipeline() as ScriptedPipeline;
    for (const g of infos) {
      pipeline.xpending(this.key, g.group);
      pipeline.xrange(this.key, `(${g.lastDelivered}`, '+', 'COUNT', 1);
    }
    pipeline.xrevrange(this.key, '+', '-', 'COUNT', 1);
    pipeline.time();
    const replies = await results(pipeline);
    const [seconds, micros] = replies.pop() as [string, string];
    const nowMs = Number(seconds) * 1000 + Number(micros) / 1000;
    const last = (replies.pop() as StreamEntry[] | null)?.[0];
    const oldestPending = infos.map((_, i) => (replies[2 * i] as PendingSummary | null)?.[1] ?? undefined);
    const pendingEntries = new Map<string, StreamEntry | undefined>();
    const ids = [...new Set(oldestPending.filter((id): id is string => id !== undefined))];
    if (ids.length > 0) {
      const read = this.redis.pipeline() as ScriptedPipeline;
      for (const id of ids) read.xrange(this.key, id, id);
      (await results(read)).forEach((reply, i) => pendingEntries.set(ids[i]!, (reply as StreamEntry[])[0]));
    }
    return Promise.all(
      infos.map(async (g, i) => {
        const pendingId = oldestPending[i];
        const oldest = pendingId ? pendingEntries.get(pendingId) : (replies[2 * i + 1] as StreamEntry[] | null)?.[0];
        const oldestId = pendingId ?? oldest?.[0];
        const age = oldestId ? Math.max(0, (nowMs - Number(oldestId.split('-')[0])) / 1000) : 0;
        if (!oldestId) return { group: g.group, events: 0, oldestAgeSeconds: 0 };
        const from = oldest && tally(oldest);
        const to = last && tally(last);
        // From the counters: every event since the oldest not handled (those of an entry a later read of another
        // consumer acknowledged first counted too). Entries of versions before carry none: one event each.
        const events = from && to ? Math.max(0, to.count - from.count) + from.events : await this.entriesBehind(g);
        return { group: g.group, events, oldestAgeSeconds: age };
      }),
    );
  }

  /** Entries read and not acknowledged, and those not read: Redis knows the count of the second only until an entry is deleted. */
  private async entriesBehind(g: { group: string; pending: number; lastDelivered: string; lag?: number | null }) {
    if (g.lag != null) return g.pending + g.lag;
    const unread = (await this.redis.xrange(this.key, `(${g.lastDelivered}`, '+', 'COUNT', unknownLagBound)).length;
    return g.pending + unread;
  }
}

type PendingSummary = [number, string | null, string | null, unknown];

async function results(pipeline: ScriptedPipeline): Promise<unknown[]> {
  return ((await pipeline.exec()) ?? []).map(([err, reply]) => {
    if (err) throw err;
    return reply;
  });
}

/** An entry's events, in order: each at the position `<entry id>#<index>` (an entry of a version before: its id). */
function entryEvents([id, fields]: StreamEntry): ReadEvent[] {
  const grouped = fields.indexOf('es');
  if (grouped < 0) return [{ position: id, event: JSON.parse(fields[fields.indexOf('e') + 1] ?? 'null') }];
  const events = JSON.parse(fields[grouped + 1]!) as DomainEvent[];
  return events.map((event, i) => ({ position: `${id}#${i}`, event }));
}

const entryIdOf = (position: string) => position.split('#', 1)[0]!;

/** The events an entry holds and the stream's counter after them; none for an entry of a version before. */
function tally([, fields]: StreamEntry): { events: number; count: number } | undefined {
  const n = fields.indexOf('n');
  const c = fields.indexOf('c');
  if (n < 0 || c < 0) return undefined;
  return { events: Number(fields[n + 1]), count: Number(fields[c + 1]) };
}

/** Entries one read asks for: an entry holds a tick's events, up to `entryCapacity`. */
const entriesFor = (events: number) => Math.max(1, Math.ceil(events / 16));

/** Events one append script call, so one stream entry, holds at most (Lua's `unpack` has a limit, and a long script holds the server). */
const entryCapacity = 256;
/** Reads after the first that one `read` of new entries makes at most to reach its count. */
const topUpRounds = 3;
/** How often a process drops the ids older than the dedupe window from the stream's `:seen` set. */
const seenTrimEveryMs = 1_000;

/** Entries counted past a group's last delivered one when Redis cannot say the lag. */
const unknownLagBound = 10_000;
