import { MongoClient, type CommandStartedEvent, type Db } from 'mongodb';
import type { Collection, Doc, IndexSpec, Store, StoredFormSpec } from './collection.ts';
import type { FileStore } from './file-store.ts';
import { GridFsFiles } from './gridfs-files.ts';
import { MongoCollection, type ServerQuirks } from './mongo-collection.ts';

/**
 * How writes are acknowledged (`majority`: once most of the replica set holds
 * them, so a failover does not take an answered write back) and whether the
 * driver retries one after a network error or an election (MongoDB applies
 * the retry at most once). Defaults in config.ts.
 */
export interface MongoWrites {
  writeConcern: 'majority' | number;
  retryWrites: boolean;
}

/** Which paths the store's writes and id-list reads take: the server's (`detected`: FerretDB 1.x's workarounds there) or MongoDB's on any server. */
export type MongoPaths = 'detected' | 'mongodb';

/** What the driver will do, read back from its database handle: the settings as they took effect. */
export interface MongoConsistency {
  writeConcern: 'majority' | number | undefined;
  retryWrites: boolean;
  readPreference: string;
}

/** A server the driver stopped reaching (`to` is `Unknown`, with why) or reaches again after that. */
export interface ServerChange {
  address: string;
  from: string;
  to: string;
  error: string | null;
}

/** A check of a server by the driver that did not end in time, and whether its monitor was started again. */
export interface WedgedCheck {
  address: string;
  outstandingMs: number;
  restarted: boolean;
}

/** An awaited check ends within the heartbeat (10 s) and the connect limit (3 s) after it: twice that is wedged. */
const wedgedCheckMs = 26_000;

type Monitor = { close(): void; connect(): void };

/** Closes and starts again the driver's monitor of one server; false when this driver version has none where looked. */
function restartMonitor(client: MongoClient, address: string): boolean {
  const topology = (client as unknown as { topology?: { s?: { servers?: Map<string, { monitor?: Monitor | null }> } } })
    .topology;
  const monitor = topology?.s?.servers?.get(address)?.monitor;
  if (!monitor || typeof monitor.close !== 'function' || typeof monitor.connect !== 'function') return false;
  monitor.close();
  monitor.connect();
  return true;
}

/** MongoDB 6+ through the official driver; also FerretDB 1.x, so no transactions, change streams, $lookup or TTL indexes. */
export class MongoStore implements Store {
  readonly kind = 'mongodb' as const;
  private readonly client: MongoClient;
  private readonly db: Db;
  private readonly declared = new Map<string, IndexSpec[]>();
  /** What the server is: FerretDB says so in `buildInfo` (known at `init`, before any read). */
  private readonly server: ServerQuirks = {
    scansIdLists: false,
    writesOneStatementEach: false,
    updatesReadThenWrite: false,
    groupsWithoutMin: false,
  };
  /** Looks for server checks of the driver's that never end (`watchChecks`). */
  private checkWatch: NodeJS.Timeout | undefined;
  /** Commands the driver sent, by `collection.command`, when made with `observeCommands`. */
  private readonly observed: Map<string, number> | undefined;
  private readonly paths: MongoPaths;

  /**
   * Reads go to the primary whatever the connection string says: a send's
   * status, a key just created, a cursor just written are read right after
   * the write, and a secondary may not have it yet.
   *
   * `observeCommands` turns the driver's command monitoring on and counts
   * every command it starts (`observedCommands`): for the tests that count
   * round trips. Without it the driver builds no monitoring events at all.
   * `onServerChange` hears each server the driver stops reaching (its type
   * turns `Unknown`), with the error that made it so, and reaches again
   * (not its first answer).
   */
  constructor(
    url: string,
    dbName: string | undefined,
    private readonly pingTimeoutMs: number,
    writes: MongoWrites,
    opts: {
      observeCommands?: boolean;
      /**
       * `mongodb` takes MongoDB's paths (bulk writes as one command, id lists
       * by `$in`, compare-and-set updates) whatever the server says it is: for
       * counting MongoDB's round trips on a wire double that accepts them.
       * Otherwise (`detected`) FerretDB 1.x takes its workaround paths.
       */
      paths?: MongoPaths;
      onServerChange?: (change: ServerChange) => void;
      onWedgedCheck?: (wedged: WedgedCheck) => void;
      /** How long a check of a server may run before it is taken as wedged (tests shorten it). */
      wedgedCheckMs?: number;
    } = {},
  ) {
    this.client = new MongoClient(url, {
      serverSelectionTimeoutMS: 3_000,
      connectTimeoutMS: 3_000,
      maxPoolSize: 50,
      writeConcern: { w: writes.writeConcern },
      retryWrites: writes.retryWrites,
      readPreference: 'primary',
      monitorCommands: opts.observeCommands === true,
    });
    this.db = this.client.db(dbName);
    this.paths = opts.paths ?? 'detected';
    this.watchChecks(opts.wedgedCheckMs ?? wedgedCheckMs, opts.onWedgedCheck);
    const onServerChange = opts.onServerChange;
    const lost = new Set<string>();
    if (onServerChange)
      this.client.on('serverDescriptionChanged', ({ address, previousDescription: was, newDescription: now }) => {
        if (now.type === 'Unknown' ? was.type === 'Unknown' : !lost.delete(address)) return;
        if (now.type === 'Unknown') lost.add(address);
        onServerChange({ address, from: was.type, to: now.type, error: now.error?.message ?? null });
      });
    if (opts.observeCommands) {
      const observed = (this.observed = new Map());
      this.client.on('commandStarted', (event) => {
        const key = `${commandTarget(event)}.${event.commandName}`;
        observed.set(key, (observed.get(key) ?? 0) + 1);
      });
    }
  }

  /** Every command the driver has started so far, by `collection.command` (`*` for one on no collection); only when made with `observeCommands`. */
  observedCommands(): Map<string, number> {
    if (!this.observed) throw new Error('this MongoStore was not made with observeCommands');
    return new Map(this.observed);
  }

  /** What `init` found the server to be: which workaround paths the collections take (all false on MongoDB). */
  get quirks(): Readonly<ServerQuirks> {
    return { ...this.server };
  }

  get updatesCompareAndSet(): boolean {
    return !this.server.updatesReadThenWrite;
  }

  consistency(): MongoConsistency {
    return {
      writeConcern: this.db.writeConcern?.w as MongoConsistency['writeConcern'],
      retryWrites: this.client.options.retryWrites,
      readPreference: this.db.readPreference.mode,
    };
  }

  /** The indexes each collection declared, as `init` creates them (port field `id` is `_id` there too). */
  declaredIndexes(): ReadonlyMap<string, readonly IndexSpec[]> {
    return this.declared;
  }

  files(bucket: string): FileStore {
    return new GridFsFiles(this.db, bucket);
  }

  /** Documents are stored whole: a form (`StoredFormSpec`) is the embedded store's. */
  collection<T extends Doc>(name: string, indexes: IndexSpec[] = [], _form?: StoredFormSpec): Collection<T> {
    this.declared.set(name, [...(this.declared.get(name) ?? []), ...indexes]);
    return new MongoCollection<T>(name, this.db, this.server);
  }

  async init(): Promise<void> {
    await this.client.connect();
    const info = await this.db.admin().command({ buildInfo: 1 });
    const ferretdb = typeof info.ferretdbVersion === 'string';
    const workarounds = ferretdb && this.paths === 'detected';
    this.server.scansIdLists = workarounds;
    this.server.writesOneStatementEach = workarounds;
    this.server.updatesReadThenWrite = workarounds;
    // Not a path but what the server can answer: FerretDB's `$group` has no `$min` whatever paths are taken.
    this.server.groupsWithoutMin = ferretdb;
    for (const [name, indexes] of this.declared) {
      for (const index of indexes) {
        const keys = Object.fromEntries(Object.entries(index.keys).map(([k, v]) => [k === 'id' ? '_id' : k, v]));
        await this.db.collection(name).createIndex(keys, { unique: index.unique ?? false });
      }
    }
  }

  async ping(): Promise<void> {
    await this.db.command({ ping: 1 }, { timeoutMS: this.pingTimeoutMs });
  }

  /**
   * The driver checks each server on a connection of its own. When that
   * connection closes while a check is being written or before its answer is
   * listened for, the check never ends (the driver waits for a `drain` or a
   * reply a destroyed socket will never give), and the driver never checks
   * that server again: once it has marked the server unknown, the process
   * stays without a store until restarted. Every check ends within
   * `heartbeatFrequencyMS` plus the connect time limit, so one outstanding
   * for `wedgedMs` is wedged: its monitor is closed and started again (the
   * driver's own `close` and `connect`, reached through its topology, which
   * its public API does not expose), and reported.
   */
  private watchChecks(wedgedMs: number, onWedged: ((wedged: WedgedCheck) => void) | undefined): void {
    const started = new Map<string, number>();
    const ended = ({ connectionId }: { connectionId: string }) => started.delete(connectionId);
    this.client.on('serverHeartbeatStarted', ({ connectionId }) => started.set(connectionId, Date.now()));
    this.client.on('serverHeartbeatSucceeded', ended);
    this.client.on('serverHeartbeatFailed', ended);
    this.checkWatch = setInterval(
      () => {
        for (const [address, at] of started) {
          const outstandingMs = Date.now() - at;
          if (outstandingMs < wedgedMs) continue;
          started.delete(address);
          onWedged?.({ address, outstandingMs, restarted: restartMonitor(this.client, address) });
        }
      },
      Math.min(1_000, wedgedMs),
    );
    this.checkWatch.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.checkWatch);
    await this.client.close();
  }

  /** Test helper: drops this store's database. */
  async dropDatabase(): Promise<void> {
    await this.db.dropDatabase();
  }
}

/** The collection a command is on: the command's own field names it (`getMore` its `collection`); `*` for one on none (`ping`, `buildInfo`). */
function commandTarget(event: CommandStartedEvent): string {
  const named = event.command[event.commandName];
  if (typeof named === 'string') return named;
  return typeof event.command.collection === 'string' ? event.command.collection : '*';
}
