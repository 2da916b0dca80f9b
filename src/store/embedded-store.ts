import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryCollection } from './memory-collection.ts';
import type { Collection, Doc, IndexSpec, Store } from './collection.ts';

type LogEntry = { op: 'put'; doc: Doc } | { op: 'del'; id: string };

/**
 * The embedded default: documents live in memory and each collection is
 * persisted under `dataDir` as a snapshot plus an append-only log of changes,
 * replayed at start. Changes made in one tick are appended in one write (group
 * commit); the log is folded into a fresh snapshot once it outgrows the data.
 */
export class EmbeddedStore implements Store {
  readonly kind = 'embedded' as const;
  private readonly collections = new Map<string, EmbeddedCollection>();
  private closed = false;

  constructor(private readonly dataDir: string) {
    mkdirSync(dataDir, { recursive: true });
  }

  collection<T extends Doc>(name: string, indexes: IndexSpec[] = []): Collection<T> {
    let col = this.collections.get(name);
    if (!col) {
      col = new EmbeddedCollection(name, join(this.dataDir, name), indexes);
      this.collections.set(name, col);
    }
    return col as unknown as Collection<T>;
  }

  async init(): Promise<void> {}

  async ping(): Promise<void> {
    if (this.closed) throw new Error('store closed');
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const col of this.collections.values()) col.close();
  }
}

class EmbeddedCollection extends MemoryCollection<Doc> {
  private readonly logPath: string;
  private readonly snapshotPath: string;
  private fd: number;
  private pending: string[] = [];
  private flushScheduled = false;
  private logEntries = 0;

  constructor(name: string, base: string, indexes: IndexSpec[]) {
    super(name, indexes);
    this.logPath = `${base}.log`;
    this.snapshotPath = `${base}.snapshot`;
    this.load();
    this.fd = openSync(this.logPath, 'a');
  }

  protected override persist(entry: LogEntry): void {
    this.pending.push(JSON.stringify(entry));
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.flushScheduled = false;
    if (this.pending.length === 0) return;
    writeSync(this.fd, this.pending.join('\n') + '\n');
    this.logEntries += this.pending.length;
    this.pending = [];
    if (this.logEntries > 1_000 && this.logEntries > 2 * this.size) this.compact();
  }

  /** Writes the live documents to a new snapshot, swaps it in by rename, then starts an empty log. */
  private compact(): void {
    const draft = `${this.snapshotPath}.tmp`;
    const fd = openSync(draft, 'w');
    for (const doc of this.all()) writeSync(fd, JSON.stringify(doc) + '\n');
    fsyncSync(fd);
    closeSync(fd);
    renameSync(draft, this.snapshotPath);
    closeSync(this.fd);
    this.fd = openSync(this.logPath, 'w');
    this.logEntries = 0;
  }

  private load(): void {
    if (existsSync(this.snapshotPath)) {
      for (const line of readFileSync(this.snapshotPath, 'utf8').split('\n')) if (line) this.restore(JSON.parse(line) as Doc);
    }
    if (existsSync(this.logPath)) {
      for (const line of readFileSync(this.logPath, 'utf8').split('\n')) {
        if (!line) continue;
        let entry: LogEntry;
        try {
          entry = JSON.parse(line) as LogEntry;
        } catch {
          continue; // a torn last line from a crash mid-write: everything before it stands
        }
        if (entry.op === 'put') this.restore(entry.doc);
        else this.forget(entry.id);
        this.logEntries++;
      }
    }
  }

  close(): void {
    this.flush();
    fsyncSync(this.fd);
    closeSync(this.fd);
  }
}

