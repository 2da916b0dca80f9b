import { redisClient, type RedisTarget } from '../runtime/redis-client.ts';
import type { ScriptedRedis } from '../runtime/scripts.ts';
import type { Store } from '../store/collection.ts';
import { cursorKeysCollection, EventCursors } from './event-cursor.ts';
import { EventLog, eventLogCollection, type EventHistory } from './event-log.ts';
import type { EventStream, ReadEvent } from './event-stream.ts';
import { eventRoutes } from './events.routes.ts';
import { RedisEventStream } from './redis-event-stream.ts';
import { StoreEventStream } from './store-event-stream.ts';
import { eventCollection, type Subjects } from './stored-events.ts';
import { CarriedEvents } from './carried-events.ts';
import { StreamHistory } from './stream-history.ts';

export interface EventStreamOptions {
  /** On Redis: the process's command connection, the stream's key, and how long an append waits for a replica (on a cluster; 0 = it does not). */
  redis?: { connection: ScriptedRedis; target?: RedisTarget; key: string; replicaWaitMs: number } | undefined;
  /** How long an event id appended `once` is remembered (Redis). */
  dedupeTtlMs: number;
  /** How long an entry a consumer read and never acknowledged waits before another consumer of its group takes it (Redis). */
  claimIdleMs?: number | undefined;
  /** A tick's events as one stream entry (Redis; the default); false: an entry each, as versions before. */
  entryBatches?: boolean | undefined;
  /** How long an organization's events are kept (GET /api/v1/events), and the messages their events name. */
  history: { retentionDays: number; subjects: Subjects };
}

/** The durable event stream: a Redis stream beside the actors, or documents in the embedded store. */
export function createEventStream(store: Store, opts: EventStreamOptions): EventStream {
  const { redis } = opts;
  if (redis)
    return new RedisEventStream(
      redis.connection,
      redis.key,
      opts.dedupeTtlMs,
      undefined,
      opts.claimIdleMs,
      redis.replicaWaitMs,
      // Consumers wait for appends on connections of their own (one per group) rather than read again and again.
      redis.target && (() => redisClient(redis.target!, { maxRetriesPerRequest: null })),
      opts.entryBatches ?? true,
    );
  // Kept in the store, the stream's rows are each organization's history too.
  return new StoreEventStream(store, undefined, opts.history);
}

/**
 * The organization's event history (`GET /api/v1/events`), wired: its
 * routes, the cursor keys every list signs its cursors with, and `record`
 * where a consumer group copies the stream into a log of its own (a Redis
 * stream); a stream kept in the store is read as it is. Declared before the
 * store's init.
 */
export function createEventLog(
  store: Store,
  stream: EventStream,
  history: { retentionDays: number; subjects: Subjects },
): {
  log: EventHistory;
  routes: ReturnType<typeof eventRoutes>;
  cursors: EventCursors;
  record?: (batch: ReadEvent[]) => Promise<void>;
} {
  const cursors = new EventCursors(cursorKeysCollection(store));
  if (stream instanceof StoreEventStream) {
    const log = new StreamHistory(
      eventCollection(store),
      history.subjects,
      history.retentionDays,
      cursors,
      CarriedEvents.of(store, history.subjects.name),
    );
    return { log, routes: eventRoutes(log), cursors };
  }
  const log = new EventLog(eventLogCollection(store), history.retentionDays, cursors);
  return { log, routes: eventRoutes(log), cursors, record: (batch) => log.record(batch) };
}
