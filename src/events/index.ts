import type { ScriptedRedis } from '../runtime/scripts.ts';
import type { Store } from '../store/collection.ts';
import { cursorKeysCollection, EventCursors } from './event-cursor.ts';
import { EventLog, eventLogCollection } from './event-log.ts';
import type { EventStream } from './event-stream.ts';
import { eventRoutes } from './events.routes.ts';
import { RedisEventStream } from './redis-event-stream.ts';
import { StoreEventStream } from './store-event-stream.ts';

export interface EventStreamOptions {
  /** On Redis: the process's command connection, the stream's key, and how long an append waits for a replica (on a cluster; 0 = it does not). */
  redis?: { connection: ScriptedRedis; key: string; replicaWaitMs: number } | undefined;
  /** How long an event id appended `once` is remembered (Redis). */
  dedupeTtlMs: number;
  /** How long an entry a consumer read and never acknowledged waits before another consumer of its group takes it (Redis). */
  claimIdleMs?: number | undefined;
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
    );
  return new StoreEventStream(store);
}

/** The organization's event history (`GET /api/v1/events`), wired: its routes, the log the event-log consumer writes, and the cursor keys every list signs its cursors with. Declared before the store's init. */
export function createEventLog(store: Store, retentionDays: number) {
  const cursors = new EventCursors(cursorKeysCollection(store));
  const log = new EventLog(eventLogCollection(store), retentionDays, cursors);
  return { log, routes: eventRoutes(log), cursors };
}
