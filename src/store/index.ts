import type { Logger } from '../log.ts';
import type { Store } from './collection.ts';
import { EmbeddedStore } from './embedded-store.ts';
import { MongoStore, type MongoPaths, type MongoWrites } from './mongo-store.ts';

export type { Store } from './collection.ts';

/** MongoDB when a URL is given, otherwise the embedded SQLite store in dataDir. */
export function createStore(
  opts: {
    mongoUrl: string | undefined;
    dataDir: string;
    dbName?: string;
    syncIntervalMs?: number;
    cacheMb?: number;
    walMaxMb?: number;
    pingTimeoutMs: number;
    mongoWrites: MongoWrites;
    /** MongoDB only: count every command the driver sends (see `MongoStore.observedCommands`). */
    observeCommands?: boolean;
    /** MongoDB only: `mongodb` takes MongoDB's paths on any wire server (see `MongoStore`). */
    mongoPaths?: MongoPaths;
    /** MongoDB only: how long a check of a server by the driver may run before it is taken as wedged. */
    wedgedCheckMs?: number;
  },
  log: Logger,
): Store {
  if (opts.mongoUrl) {
    const store = new MongoStore(opts.mongoUrl, opts.dbName, opts.pingTimeoutMs, opts.mongoWrites, {
      observeCommands: opts.observeCommands ?? false,
      paths: opts.mongoPaths ?? 'detected',
      ...(opts.wedgedCheckMs === undefined ? {} : { wedgedCheckMs: opts.wedgedCheckMs }),
      // A server lost is a warning, and so is its return: a filtered log shows both.
      onServerChange: (change) =>
        log.warn(
          { component: 'store', ...change },
          change.to === 'Unknown' ? 'the MongoDB server is not reached' : 'the MongoDB server answers again',
        ),
      onWedgedCheck: (wedged) =>
        log.warn(
          { component: 'store', ...wedged },
          wedged.restarted
            ? "the MongoDB driver's check of a server never ended; its monitor was started again"
            : "the MongoDB driver's check of a server never ended, and this driver's monitor could not be reached: restart the process",
        ),
    });
    log.debug({ component: 'store', ...store.consistency() }, 'using MongoDB');
    return store;
  }
  return new EmbeddedStore(opts.dataDir, {
    ...(opts.syncIntervalMs === undefined ? {} : { syncIntervalMs: opts.syncIntervalMs }),
    ...(opts.cacheMb === undefined ? {} : { cacheMb: opts.cacheMb }),
    ...(opts.walMaxMb === undefined ? {} : { walMaxBytes: opts.walMaxMb * 2 ** 20 }),
    onWalCheckpoint: (report) =>
      log.warn(
        { component: 'store', ...report },
        report.recovered
          ? 'the write-ahead log passed its bound because a read was left open; resetting the statements let the checkpoint complete'
          : 'the write-ahead log is past its bound and cannot be checkpointed: it will grow until the store is restarted',
      ),
    onWorkerError: (message) =>
      log.warn(
        { component: 'store', err: message },
        'the write-ahead log worker failed a round; it tries again at the next',
      ),
  });
}
