import { RedisTransport, type RuntimeConfig, type Transport } from '../runtime/index.ts';
import type { Store } from '../store/collection.ts';
import { cursorKeysCollection, EventCursors } from './event-cursor.ts';
import { EventLog, eventLogCollection } from './event-log.ts';
import type { EventStream } from './event-stream.ts';
import { eventRoutes } from './events.routes.ts';
import { RedisEventStream } from './redis-event-stream.ts';
import { StoreEventStream } from './store-event-stream.ts';

/** The durable event stream: a Redis stream beside the actors, or documents in the embedded store. */
export function createEventStream(
  runtime: Transport,
  store: Store,
  config: RuntimeConfig,
  claimIdleMs?: number,
): EventStream {
  if (runtime instanceof RedisTransport)
    return new RedisEventStream(
      runtime.connection,
      runtime.keys.events,
      config.dedupeTtlMs,
      undefined,
      claimIdleMs,
      runtime.replicaWaitMs,
    );
  return new StoreEventStream(store);
}

/** The organization's event history (`GET /api/v1/events`), wired: its routes, the log the event-log consumer writes, and the cursor keys every list signs its cursors with. Declared before the store's init. */
export function createEventLog(store: Store, retentionDays: number) {
  const cursors = new EventCursors(cursorKeysCollection(store));
  const log = new EventLog(eventLogCollection(store), retentionDays, cursors);
  return { log, routes: eventRoutes(log), cursors };
}
