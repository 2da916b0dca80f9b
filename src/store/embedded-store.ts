import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AppError } from '../errors.ts';
import { CollectionLog } from './embedded-log.ts';
import { MemoryCollection, type Change } from './memory-collection.ts';
import type { Collection, Doc, IndexSpec, Store } from './collection.ts';

export interface EmbeddedStoreOptions {
  /** How often the logs are fdatasync'd in the background; 0 syncs every group commit before it resolves. */
  syncIntervalMs?: number;
}

/**
 * The embedded default: documents live in memory and each collection is
 * persisted under `dataDir` as a snapshot plus an append-only log of changes,
 * replayed at start (see `CollectionLog`).
 *
 * Durability: a write resolves only once its change is in the log file
 * (writeSync), so a process crash loses no acknowledged write. The changes of
 * one tick go out in one write and their callers resolve together (group
 * commit). The logs are fdatasync'd in the background at most every
 * `syncIntervalMs` (default 1 s), so a machine or power failure can lose about
 * the last second of acknowledged writes. Reads may see a change a tick before
 * it reaches the log.
 *
 * A log that outgrows its data is folded into a fresh snapshot in the
 * background, in chunks, while appends go on in a second log file.
 */
export class EmbeddedStore implements Store {
  readonly kind = 'embedded' as const;
  private readonly collections = new Map<string, EmbeddedCollection>();
  private readonly syncIntervalMs: number;
  private readonly syncTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly dataDir: string, opts: EmbeddedStoreOptions = {}) {
    mkdirSync(dataDir, { recursive: true });
    this.syncIntervalMs = opts.syncIntervalMs ?? 1_000;
    if (this.syncIntervalMs > 0) {
      this.syncTimer = setInterval(() => {
        for (const col of this.collections.values()) col.syncInBackground();
      }, this.syncIntervalMs);
      this.syncTimer.unref();
    }
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    let col = this.collections.get(name);
    if (!col) {
      col = new EmbeddedCollection(name, join(this.dataDir, name), indexes, this.syncIntervalMs <= 0);
      this.collections.set(name, col);
    }
    return col as unknown as Collection<T>;
  }

  async init(): Promise<void> {}

  async ping(): Promise<void> {
    if (this.closed) throw new Error('store closed');
  }

  /** Folds every collection's log into its snapshot now (a running compaction is joined, not repeated). */
  async compact(): Promise<void> {
    await Promise.all([...this.collections.values()].map((col) => col.compact()));
  }

  /** Writes still pending are written and synced; a running compaction is abandoned and finished at the next start. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.syncTimer);
    await Promise.all([...this.collections.values()].map((col) => col.close()));
  }
}

interface Batch {
  lines: string[];
  done: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
}

class EmbeddedCollection extends MemoryCollection<Doc> {
  private readonly log: CollectionLog;
  private batch: Batch | null = null;
  private compaction: Promise<void> | null = null;
  /** After a failed compaction, the log size at which to try again. */
  private compactAgainAt = 0;
  private closed = false;
  private closing: Promise<void> | null = null;
  /** A write or sync that failed: memory may now be ahead of the disk, so no further write is accepted. */
  private failure: unknown = null;

  constructor(name: string, base: string, indexes: IndexSpec[], syncEveryWrite: boolean) {
    super(name, indexes);
    this.log = new CollectionLog(base, syncEveryWrite);
    this.log.load((change) => (change.op === 'put' ? this.restore(change.doc) : this.forget(change.id)));
    if (this.log.onNext) setImmediate(() => void this.compact()); // an interrupted compaction is owed
  }

  protected override persist(change: Change): void {
    if (this.closed) throw new AppError('service_unavailable', `the ${this.name} collection is closed`);
    if (this.failure) throw new AppError('service_unavailable', `the ${this.name} collection cannot be written`, { cause: this.failure });
    const line = JSON.stringify(change);
    if (!this.batch) this.batch = this.openBatch();
    this.batch.lines.push(line);
  }

  protected override committed(): Promise<void> {
    return this.batch?.done ?? Promise.resolve();
  }

  private openBatch(): Batch {
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    done.catch(() => undefined); // every writer awaits it; this only keeps an unawaited failure from crashing the process
    setImmediate(() => this.flush());
    return { lines: [], done, resolve, reject };
  }

  /** Group commit: one write for every change of the tick, then all their callers resolve. */
  private flush(): void {
    const batch = this.batch;
    if (!batch) return;
    this.batch = null;
    try {
      this.log.append(batch.lines);
    } catch (err) {
      this.failure = err;
      batch.reject(new AppError('service_unavailable', `the ${this.name} collection cannot be written`, { cause: err }));
      return;
    }
    batch.resolve();
    const entries = this.log.entries;
    if (entries > 1_000 && entries > 2 * this.size && entries >= this.compactAgainAt) void this.compact();
  }

  syncInBackground(): void {
    if (this.closed || this.failure) return;
    this.log.sync().catch((err: unknown) => {
      this.failure = err;
    });
  }

  /** One compaction at a time; a failed one leaves appends in `.log.next` and is tried again later. */
  compact(): Promise<void> {
    if (this.compaction) return this.compaction;
    if (this.closed) return Promise.resolve();
    // Stored documents are never changed in place, so this list is a point-in-time copy.
    const docs = Array.from(this.all());
    this.compaction = this.log
      .compact(docs, () => this.closed)
      .then(
        () => undefined,
        () => {
          this.compactAgainAt = this.log.entries + Math.max(1_000, this.size);
        },
      )
      .finally(() => {
        this.compaction = null;
      });
    return this.compaction;
  }

  close(): Promise<void> {
    if (!this.closing) {
      this.closed = true;
      this.closing = this.shutdown();
    }
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.flush();
    await this.compaction;
    await this.log.close();
  }
}
