import { Counter, Histogram, register } from 'prom-client';

/**
 * What one counted database command did, named after the port operation that
 * issued it (`scan_page`: one page of a scan; `transaction`: the embedded
 * store's group COMMIT).
 */
export type StoreOperation =
  | 'insertOne'
  | 'insertMany'
  | 'findOne'
  | 'find'
  | 'count'
  | 'scan_page'
  | 'updateOne'
  | 'updateMany'
  | 'deleteOne'
  | 'deleteMany'
  | 'bulkWrite'
  | 'aggregate'
  | 'transaction';

/** The collection label of a command that spans collections (the embedded store's COMMIT). */
export const everyCollection = '*';

function singleton<T>(name: string, make: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? make();
}

const operations = singleton(
  'relaybox_store_operations_total',
  () =>
    new Counter({
      name: 'relaybox_store_operations_total',
      help: 'Database commands issued by the store: MongoDB round trips, or SQLite statement batches and COMMITs, by collection and operation',
      labelNames: ['collection', 'operation'],
    }),
);

const durations = singleton(
  'relaybox_store_operation_duration_seconds',
  () =>
    new Histogram({
      name: 'relaybox_store_operation_duration_seconds',
      help: 'Time one database command took, from issuing it to its answer, by operation',
      labelNames: ['operation'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    }),
);

/** The labelled children, made once per collection and operation: collection names are a fixed set in the code. */
const children = new Map<string, { count: Counter.Internal; time: Histogram.Internal<'operation'> }>();

function child(collection: string, operation: StoreOperation) {
  const key = `${collection}\u0000${operation}`;
  let found = children.get(key);
  if (!found)
    children.set(key, (found = { count: operations.labels(collection, operation), time: durations.labels(operation) }));
  return found;
}

/**
 * Runs `command`, which issues exactly one database command (synchronous for
 * SQLite, a promise for MongoDB), and counts and times it, failed or not: a
 * command the server refused was still a round trip.
 */
export function countedCommand<R>(collection: string, operation: StoreOperation, command: () => R): R {
  const { count, time } = child(collection, operation);
  const started = performance.now();
  const done = () => {
    count.inc();
    time.observe((performance.now() - started) / 1000);
  };
  let result: R;
  try {
    result = command();
  } catch (err) {
    done();
    throw err;
  }
  if (result instanceof Promise) return result.finally(done) as R;
  done();
  return result;
}

const walFrames = singleton(
  'relaybox_store_wal_frames_checkpointed_total',
  () =>
    new Counter({
      name: 'relaybox_store_wal_frames_checkpointed_total',
      help: "Pages of the embedded store's write-ahead log folded back into its file, by who did it: the checkpoint worker, the event loop (those committed during the worker's round), or the event loop at once because the log passed STORE_WAL_MAX_MB (bound)",
      labelNames: ['by'],
    }),
);

/** What the embedded store's checkpoints folded back, in frames (pages), by who did it. */
export interface FoldedFrames {
  worker: number;
  eventLoop: number;
  /** At once on the event loop, the log having passed its bound: the worker did not keep it near its checkpoint size. */
  bound: number;
}

/** Counts one round of the embedded store's checkpoint: frames folded back by the worker, then by the event loop. */
export function countFolded(totals: FoldedFrames, worker: number, eventLoop: number): void {
  totals.worker += worker;
  totals.eventLoop += eventLoop;
  walFrames.labels('worker').inc(worker);
  walFrames.labels('event_loop').inc(eventLoop);
}

/** Counts the frames a checkpoint forced by the log's bound folded back. */
export function countFoldedAtBound(totals: FoldedFrames, frames: number): void {
  totals.bound += frames;
  walFrames.labels('bound').inc(frames);
}
