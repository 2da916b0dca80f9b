import { DirectoryFiles, type FileStore } from './file-store.ts';
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'libsql';
import { AppError } from '../errors.ts';
import { commitFirst, letWaitersGo } from '../runtime/ahead-of-bulk.ts';
import { DataDirLock } from './data-dir-lock.ts';
import type { Collection, Doc, IndexSpec, Store, StoredFormSpec } from './collection.ts';
import { legacyCollections, replayLegacyCollection, retireLegacyFiles } from './legacy-files.ts';
import { quote, text, type SqlValue } from './sql-filter.ts';
import { EmbeddedCollection } from './embedded-collection.ts';
import { createTable, type Connection, type RowReader, type Statement } from './embedded-schema.ts';
import { StoredForm } from './stored-form.ts';
import type { CountCacheOptions } from './count-cache.ts';
import {
  countedCommand,
  countFolded,
  countFoldedAtBound,
  everyCollection,
  type FoldedFrames,
} from './operation-count.ts';
import { countedExec, countedStatement } from './store-work.ts';
import { WalCheckpointer } from './wal-checkpointer.ts';
import { WalIndex } from './wal-index.mjs';
import { fileFailure, unavailable } from './transient-errors.ts';

export interface EmbeddedStoreOptions {
  /** How often the write-ahead log is fdatasync'd in the background; 0 syncs every commit before it resolves. */
  syncIntervalMs?: number;
  /** SQLite's page cache: with the statements' working memory, what the store holds in RAM whatever the data size. */
  cacheMb?: number;
  /** Which counts are kept and maintained by the writes (count-cache.ts). */
  countCache?: CountCacheOptions;
  /** The write-ahead log past this size is checkpointed and truncated at once after a commit (default 64 MiB). */
  walMaxBytes?: number;
  /** Told when the log is past `walMaxBytes` and a checkpoint could not fold all of it back. */
  onWalCheckpoint?: (report: WalCheckpointReport) => void;
  /** Told when the checkpoint worker failed a round (it tries again at the next one). */
  onWorkerError?: (message: string) => void;
}

/** A checkpoint forced by the write-ahead log's size bound that did not complete. */
export interface WalCheckpointReport {
  walBytes: number;
  walMaxBytes: number;
  /** Why SQLite could not fold the whole log back. */
  reason: string;
  /** Whether resetting the idle statements (a read left open) let a second checkpoint complete. */
  recovered: boolean;
}

/** The database file in DATA_DIR; SQLite keeps `store.sqlite-wal` beside it while open. */
export const storeFile = 'store.sqlite';
/** Prepared statements kept per store; SQL text is per filter shape, so a few dozen in practice. */
const maxStatements = 500;
/** Pages (4 KiB) of write-ahead log between two checkpoints (the worker's). */
const checkpointPages = 4_096;
const pageBytes = 4_096;
/**
 * How long a statement waits for a lock another connection holds: only the
 * checkpoint worker's connection ever holds one, for the length of a
 * checkpoint, and only the store's own forced checkpoint (the log past its
 * bound) waits for it.
 */
const busyTimeoutMs = 2_000;
/** How long a checkpoint past the log's bound waits for the checkpoint worker's own to end (one 16 MiB fold takes tens of ms). */
const checkpointLockWaitMs = 1_000;
/** What `checkpoint` answers while another connection holds the checkpoint lock. */
const checkpointLockHeld = 'busy (-1 of -1';
/** Paths open in this process: a second connection to the same file would not see the first one's lock. */
const openPaths = new Set<string>();

interface Batch {
  /** Work run just before the COMMIT, once per key. */
  last: Map<object, () => void>;
  done: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
  /** A statement of the turn could not reach the files: SQLite may have rolled the turn back, so no more writes join it. */
  failed?: unknown;
}

/**
 * The embedded default: SQLite (libsql's native build, a prebuilt binary) in
 * one file under `dataDir`. Each collection is a table of JSON documents with
 * a column per field that a declared index names, and those indexes as SQL
 * indexes; queries become SQL on them (see `sql-filter.ts`).
 *
 * Memory: SQLite's page cache (`cacheMb`) and the statements' working memory,
 * not the data.
 *
 * Durability: the writes of one turn of the event loop form one transaction
 * (group commit), and each resolves once it is committed: in the write-ahead
 * log, in the OS, so a process crash loses no acknowledged write. The log is
 * fdatasync'd in the background every `syncIntervalMs` (default 1 s; 0: at
 * every commit, before it resolves), so a power failure can lose about the
 * last interval of acknowledged writes; SQLite keeps the file consistent
 * either way. Reads see a write as soon as it is made, before its commit.
 *
 * The background sync and the checkpoints run on a worker thread with its own
 * connection (`WalCheckpointer`): this connection never checkpoints on its
 * own, so no commit waits for the two disk syncs of a checkpoint.
 */
export class EmbeddedStore implements Store, Connection {
  readonly kind = 'embedded' as const;
  /** One process, one connection: each update reads and writes its row in one synchronous step. */
  readonly updatesCompareAndSet = true;
  readonly path: string;
  private readonly db: Database.Database;
  private readonly lock: DataDirLock;
  private readonly statements = new Map<string, Statement>();
  private readonly collections = new Map<string, EmbeddedCollection<Doc>>();
  private readonly checkpointer: WalCheckpointer;
  private readonly walIndex: WalIndex;
  private batch: Batch | null = null;
  /** Takes this store's commit off what goes ahead of bulk work (ahead-of-bulk.ts). */
  private readonly leaveBulkLane: () => void;
  private closed = false;
  private readonly walMaxBytes: number;
  private readonly onWalCheckpoint: (report: WalCheckpointReport) => void;
  /** Transactions SQLite rolled back: what a collection kept in memory about their writes is stale. */
  rollbacks = 0;
  /** Frames of the log folded back into the file, by the worker and by this thread (the tail of each of the worker's rounds, or the whole log past its bound): the worker should do nearly all. */
  readonly walFolded: FoldedFrames = { worker: 0, eventLoop: 0, bound: 0 };
  readonly countCache: CountCacheOptions;
  private readonly dataDir: string;

  constructor(dataDir: string, opts: EmbeddedStoreOptions = {}) {
    this.dataDir = resolve(dataDir);
    this.countCache = opts.countCache ?? {};
    this.walMaxBytes = opts.walMaxBytes ?? 64 << 20;
    this.onWalCheckpoint = opts.onWalCheckpoint ?? (() => undefined);
    mkdirSync(dataDir, { recursive: true });
    this.path = join(resolve(dataDir), storeFile);
    this.walIndex = new WalIndex(this.path);
    if (openPaths.has(this.path)) throw new Error(`${this.path} is already open in this process`);
    this.lock = new DataDirLock(this.path);
    // The WebAssembly SQLite build used before locked with this directory, which a killed process left behind.
    rmSync(`${this.path}.lock`, { recursive: true, force: true });
    try {
      this.db = new Database(this.path);
    } catch (err) {
      this.lock.release();
      throw err;
    }
    openPaths.add(this.path);
    const syncIntervalMs = opts.syncIntervalMs ?? 1_000;
    try {
      countedExec(this.db, `PRAGMA busy_timeout = ${busyTimeoutMs}`);
      const mode = this.first('PRAGMA journal_mode = WAL') as { journal_mode?: string } | null;
      if (mode?.journal_mode !== 'wal')
        throw new Error(`${this.path}: SQLite refused WAL mode (${mode?.journal_mode})`);
      countedExec(this.db, `PRAGMA synchronous = ${syncIntervalMs > 0 ? 'NORMAL' : 'FULL'}`);
      countedExec(this.db, `PRAGMA cache_size = ${-Math.round((opts.cacheMb ?? 32) * 1024)}`);
      // A checkpoint (the log folded into the file, two disk syncs) is the worker's, never this connection's.
      countedExec(this.db, 'PRAGMA wal_autocheckpoint = 0');
      // The log file keeps its size when the log starts over (up to the bound), so commits write into blocks already there rather than growing the file again (which costs each commit more than twice as much); what it holds is read from the WAL index (`WalIndex`).
      countedExec(this.db, `PRAGMA journal_size_limit = ${this.walMaxBytes}`);
      countedExec(this.db, 'CREATE TABLE IF NOT EXISTS relaybox_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)');
      countedExec(
        this.db,
        'CREATE TABLE IF NOT EXISTS relaybox_multikey (collection TEXT NOT NULL, field TEXT NOT NULL, PRIMARY KEY (collection, field))',
      );
      countedExec(
        this.db,
        'CREATE TABLE IF NOT EXISTS relaybox_counts (collection TEXT NOT NULL, key BLOB NOT NULL, tenant TEXT NOT NULL, filter TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (collection, key))',
      );
      this.importLegacy(dataDir);
    } catch (err) {
      this.release();
      throw err;
    }
    this.checkpointer = new WalCheckpointer(this.path, {
      checkpointBytes: checkpointPages * pageBytes,
      syncIntervalMs,
      onError: opts.onWorkerError ?? (() => undefined),
    });
    // Before a bulk step the writes made so far are committed, so what waits on them goes first.
    this.leaveBulkLane = commitFirst(() => this.flush());
  }

  /** A directory of the data dir, beside the database file. */
  files(bucket: string): FileStore {
    return new DirectoryFiles(join(this.dataDir, bucket));
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = [], form?: StoredFormSpec): Collection<T> {
    const col = this.table(name);
    if (form) col.form = new StoredForm(form);
    if (!this.closed) col.declare(indexes);
    return col as unknown as Collection<T>;
  }

  /** How the rows of collection `name` are read by SQL of its own (their JSON and the key columns that tell the rest). */
  rows(name: string): RowReader {
    return this.table(name).rows;
  }

  private table(name: string): EmbeddedCollection<Doc> {
    let col = this.collections.get(name);
    if (!col) {
      col = new EmbeddedCollection(this, name);
      this.collections.set(name, col);
    }
    return col;
  }

  async init(): Promise<void> {}

  async ping(): Promise<void> {
    this.assertOpen('store');
    this.first('SELECT 1');
  }

  /** Pending writes are committed; later calls are refused. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    this.leaveBulkLane();
    await this.checkpointer.stop();
    this.checkpoint(); // the whole log folded into the file, so the next start has none to read
    this.release();
  }

  /**
   * libsql 0.5 closes the file once the last statement object is garbage
   * collected, not at `close()`: nothing of it is used after this, and no
   * statement is left on a row (see `first`), so it holds no read meanwhile.
   */
  private release(): void {
    this.statements.clear();
    this.walIndex.close();
    if (this.db.open) this.db.close();
    openPaths.delete(this.path);
    this.lock.release();
  }

  assertOpen(what: string): void {
    if (this.closed) throw new AppError('service_unavailable', `the ${what} collection is closed`);
  }

  /** A prepared statement, kept for reuse (left to the garbage collector on eviction: never on a row, it holds nothing). */
  statement(sql: string): Statement {
    let stmt = this.statements.get(sql);
    if (stmt) {
      this.statements.delete(sql);
    } else {
      stmt = countedStatement(this.db, sql);
      if (this.statements.size >= maxStatements) this.statements.delete(this.statements.keys().next().value!);
    }
    this.statements.set(sql, stmt);
    return stmt;
  }

  /** Runs a write statement (libsql runs it to its end, a failed one included: it holds nothing after). */
  run(sql: string, params: SqlValue[]): void {
    this.statement(sql).run(params);
  }

  /**
   * The first row. libsql's `get` resets the statement after its row (a
   * statement left on a row holds a read open, and no checkpoint can then
   * fold the write-ahead log back: it grows with every write). Its `iterate`
   * does not: see `EmbeddedCollection.select`.
   */
  first(sql: string, params: SqlValue[] = []): Record<string, SqlValue> | null {
    return (this.statement(sql).get(params) as Record<string, SqlValue> | undefined) ?? null;
  }

  exec(sql: string): void {
    countedExec(this.db, sql);
  }

  /** Runs `work` inside this turn's transaction, opening it (and scheduling its commit) if needed. */
  write<R>(what: string, work: () => R): R {
    this.assertOpen(what);
    const failed = this.batch?.failed;
    if (failed) throw unavailable(what, 'the store could not write to its files; try again shortly', failed);
    try {
      if (!this.batch) this.batch = this.begin();
      return work();
    } catch (err) {
      // A statement that could not reach the files: a 503, counted, not a 500; the rest of the turn fails with it.
      if (!fileFailure(err)) throw err;
      if (this.batch) this.batch.failed = err;
      throw unavailable(what, 'the store could not write to its files; try again shortly', err);
    }
  }

  /** Runs `work` once in this turn's transaction just before its COMMIT, however often it is asked for with the same `key`. */
  beforeCommit(key: object, work: () => void): void {
    this.write('store', () => this.batch!.last.set(key, work));
  }

  /** Settles once everything written so far is committed. */
  committed(): Promise<void> {
    return this.batch?.done ?? Promise.resolve();
  }

  private begin(): Batch {
    countedExec(this.db, 'BEGIN');
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    done.catch(() => undefined); // every writer awaits it; this only keeps an unawaited failure from crashing the process
    setImmediate(() => this.flush());
    return { last: new Map(), done, resolve, reject };
  }

  /** Group commit: one COMMIT for every write of the turn, then all their callers resolve; false if there were none. */
  private flush(): boolean {
    const batch = this.batch;
    if (!batch) return false;
    // What waits for a turn (a request waiting out its read) goes on before the writers of this commit, a job's among them.
    letWaitersGo();
    this.batch = null;
    try {
      if (!this.db.inTransaction) throw new Error('the transaction was rolled back by SQLite');
      // Part of a failed call's writes may be in the turn: none of the turn is kept.
      if (batch.failed) throw batch.failed;
      countedCommand(everyCollection, 'transaction', () => {
        for (const work of batch.last.values()) work();
        countedExec(this.db, 'COMMIT');
      });
    } catch (err) {
      if (this.db.inTransaction) countedExec(this.db, 'ROLLBACK');
      this.rollbacks++;
      // A full disk or a failing volume: every write of the turn is answered 503, and the store-unavailable alert counts it.
      batch.reject(unavailable('transaction', 'the store could not commit', err));
      return true;
    }
    this.checkpointer.committed();
    batch.resolve();
    this.boundWal();
    return true;
  }

  /**
   * Keeps the write-ahead log under `walMaxBytes`. The worker's checkpoint
   * cannot fold the log back while a read is open, and the log then grows
   * with every write until the disk is full. Right after a COMMIT no read of
   * this store is under way (every read runs synchronously and ends its
   * statement), so a log over the bound is checkpointed and truncated here;
   * if that cannot complete, a statement was left on a row: it is reported,
   * every cached reading statement reset (libsql has no reset: a `get` takes
   * one more row and then resets), and the checkpoint tried again.
   */
  private boundWal(): void {
    // A stat per commit (about a microsecond) is small beside the commit's own writes to the log.
    const walBytes = this.walIndex.bytes();
    // Read at every commit: a round of the worker is news until the next commit only (the log may have started over since).
    const workerFolded = this.checkpointer.checkpointed();
    if (workerFolded && walBytes >= checkpointPages * pageBytes && walBytes <= this.walMaxBytes) {
      // The worker folded back all but what was committed while it ran: folding that tail here lets the next commit start the log over.
      const byWorker = this.walIndex.backfilled();
      const row = this.first('PRAGMA wal_checkpoint(PASSIVE)') as { busy: number; checkpointed: number };
      if (row.busy === 0 && row.checkpointed >= byWorker)
        countFolded(this.walFolded, byWorker, row.checkpointed - byWorker);
      return;
    }
    if (walBytes <= this.walMaxBytes) return;
    const unfolded = Math.max(0, this.walIndex.frames() - this.walIndex.backfilled());
    const reason = this.checkpointBeside();
    if (reason === null) return countFoldedAtBound(this.walFolded, unfolded);
    for (const stmt of this.statements.values()) {
      try {
        if (stmt.reader) stmt.get();
      } catch {
        // a statement that fails to run again holds nothing either
      }
    }
    this.onWalCheckpoint({
      walBytes,
      walMaxBytes: this.walMaxBytes,
      reason,
      recovered: this.checkpointBeside() === null,
    });
  }

  /**
   * A TRUNCATE checkpoint that waits (briefly, on this rare path past the
   * bound) for the worker's own checkpoint to end: SQLite answers busy at once
   * while another connection holds the checkpoint lock ("-1 of -1 frames").
   */
  private checkpointBeside(): string | null {
    let reason = this.checkpoint();
    for (
      const until = Date.now() + checkpointLockWaitMs;
      reason !== null && reason.startsWith(checkpointLockHeld) && Date.now() < until;
    ) {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
      reason = this.checkpoint();
    }
    return reason;
  }

  /** A checkpoint of the whole log (TRUNCATE: cut to nothing): null when it completed, else why not. */
  private checkpoint(mode: 'TRUNCATE' | 'PASSIVE' = 'TRUNCATE'): string | null {
    try {
      const row = this.first(`PRAGMA wal_checkpoint(${mode})`) as { busy: number; log: number; checkpointed: number };
      if (row.busy === 0 && row.log === row.checkpointed) return null;
      return `busy (${row.checkpointed} of ${row.log} frames checkpointed)`;
    } catch (err) {
      return (err as Error).message; // "database table is locked": a statement of this connection is still on a row
    }
  }

  /**
   * A DATA_DIR written by the store that kept documents in memory is imported
   * in one transaction on the first start, then its files are moved aside (a
   * crash in between imports nothing twice: the mark is in the same commit).
   */
  private importLegacy(dataDir: string): void {
    const names = legacyCollections(dataDir);
    if (names.length === 0) return;
    const imported = this.first("SELECT value FROM relaybox_meta WHERE key = 'legacy_import'");
    if (!imported) {
      countedExec(this.db, 'BEGIN');
      try {
        for (const name of names) {
          createTable(this, name);
          // Each change straight into SQLite, in the old store's order: its files are never held in memory whole.
          const put = this.statement(
            `INSERT INTO ${quote(name)} (id, tenant, doc) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, doc = excluded.doc`,
          );
          const del = this.statement(`DELETE FROM ${quote(name)} WHERE id = ?`);
          replayLegacyCollection(dataDir, name, (change) =>
            change.op === 'put'
              ? put.run([text(change.doc.id), text(change.doc.tenantId), StoredForm.whole.encode(change.doc)])
              : del.run([text(change.id)]),
          );
        }
        this.statement("INSERT INTO relaybox_meta (key, value) VALUES ('legacy_import', ?)").run([
          new Date().toISOString(),
        ]);
        countedExec(this.db, 'COMMIT');
      } catch (err) {
        if (this.db.inTransaction) countedExec(this.db, 'ROLLBACK');
        throw new Error(
          `could not import the previous store's files in ${dataDir}; they are untouched: ${(err as Error).message}`,
          { cause: err },
        );
      }
    }
    retireLegacyFiles(dataDir, names);
  }
}
