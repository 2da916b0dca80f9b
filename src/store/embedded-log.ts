import { closeSync, existsSync, fdatasync, fdatasyncSync, openSync, readFileSync, truncateSync, unlinkSync, writeSync } from 'node:fs';
import { open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Doc } from './collection.ts';
import type { Change } from './memory-collection.ts';

/** A snapshot is written in chunks of about this size, yielding to the event loop between them. */
const chunkDocs = 2_000;
const chunkBytes = 1 << 20;

/** One append-only file of JSON lines, written synchronously and fdatasync'd on demand. */
class LogFile {
  private readonly fd: number;
  private dirty = false;
  private syncing: Promise<void> | null = null;

  constructor(public path: string, flags: 'a' | 'w', public entries = 0) {
    this.fd = openSync(path, flags);
  }

  append(lines: string[]): void {
    const bytes = Buffer.from(lines.join('\n') + '\n');
    for (let at = 0; at < bytes.length; ) at += writeSync(this.fd, bytes, at, bytes.length - at);
    this.dirty = true;
    this.entries += lines.length;
  }

  syncNow(): void {
    fdatasyncSync(this.fd);
    this.dirty = false;
  }

  /** fdatasync on the thread pool; one at a time. */
  sync(): Promise<void> {
    if (this.syncing) return this.syncing;
    if (!this.dirty) return Promise.resolve();
    this.dirty = false;
    this.syncing = new Promise<void>((resolve, reject) => {
      fdatasync(this.fd, (err) => {
        this.syncing = null;
        if (err) reject(err);
        else resolve();
      });
    });
    return this.syncing;
  }

  /** Syncs what was written, then closes; the descriptor is never closed under a running fdatasync. */
  async close(): Promise<void> {
    try {
      while (this.syncing || this.dirty) await this.sync();
    } finally {
      await this.syncing?.catch(() => undefined);
      closeSync(this.fd);
    }
  }
}

/**
 * The files of one collection: `<base>.snapshot` (one document per line),
 * `<base>.log` (one change per line) and, while a compaction runs or after one
 * was interrupted, `<base>.log.next`, which then takes the appends.
 *
 * Loading replays the snapshot, then `.log`, then `.log.next`. Replaying a log
 * on top of a snapshot that already contains it changes nothing, because the
 * last operation per id wins: whatever a log did to an id, its last line for
 * that id leaves it as the snapshot has it (or a later log line sets it). So
 * a crash between any two steps of a compaction loses nothing.
 */
export class CollectionLog {
  private readonly logPath: string;
  private readonly nextPath: string;
  private readonly snapshotPath: string;
  private readonly draftPath: string;
  private current!: LogFile;
  /** The log a compaction switched away from, being synced and closed. */
  private retiring: Promise<void> | null = null;

  constructor(base: string, private readonly syncEveryWrite: boolean) {
    this.logPath = `${base}.log`;
    this.nextPath = `${base}.log.next`;
    this.snapshotPath = `${base}.snapshot`;
    this.draftPath = `${base}.snapshot.tmp`;
  }

  /** Appends go to `.log.next` until a compaction finishes: one was interrupted, or one is running. */
  get onNext(): boolean {
    return this.current.path === this.nextPath;
  }

  /** Changes in the file that takes the appends. */
  get entries(): number {
    return this.current.entries;
  }

  /** Replays everything on disk into `apply` and opens the file appends go to. */
  load(apply: (change: Change) => void): void {
    if (existsSync(this.draftPath)) unlinkSync(this.draftPath);
    if (existsSync(this.snapshotPath)) {
      for (const line of readFileSync(this.snapshotPath, 'utf8').split('\n')) if (line) apply({ op: 'put', doc: JSON.parse(line) as Doc });
    }
    const interrupted = existsSync(this.nextPath);
    const logEntries = replay(this.logPath, apply, !interrupted);
    if (!interrupted) {
      this.current = new LogFile(this.logPath, 'a', logEntries);
      return;
    }
    this.current = new LogFile(this.nextPath, 'a', replay(this.nextPath, apply, true));
  }

  /** One group commit: when this returns the lines are in the file (a process crash keeps them). */
  append(lines: string[]): void {
    this.current.append(lines);
    if (this.syncEveryWrite) this.current.syncNow();
  }

  sync(): Promise<void> {
    return this.current.sync();
  }

  /**
   * Folds `docs` into a fresh snapshot without stalling the event loop.
   * `docs` must be taken in the same synchronous step as this call: from here
   * on, changes go to `.log.next`. Resolves false when `abandon` stopped it;
   * the files are then left as after a crash, which the next load finishes.
   */
  async compact(docs: Doc[], abandon: () => boolean): Promise<boolean> {
    if (!this.onNext) {
      const retired = this.current;
      this.current = new LogFile(this.nextPath, 'w');
      // Its changes are all in the snapshot written below; a failed sync of it matters only if that snapshot never lands.
      this.retiring = retired.close().catch(() => undefined);
    }
    try {
      if (!(await writeSnapshot(this.draftPath, docs, abandon))) return false;
      await rename(this.draftPath, this.snapshotPath);
      await syncDir(this.snapshotPath);
      await rename(this.nextPath, this.logPath);
      this.current.path = this.logPath;
      await syncDir(this.logPath);
      return true;
    } catch (err) {
      await unlink(this.draftPath).catch(() => undefined);
      throw err;
    } finally {
      await this.retiring;
    }
  }

  async close(): Promise<void> {
    await this.retiring;
    await this.current.close();
  }
}

/** Applies each change in a log; returns how many. A torn last line (a crash mid-write) is cut off when `repair`, as it is where appends resume. */
function replay(path: string, apply: (change: Change) => void, repair: boolean): number {
  if (!existsSync(path)) return 0;
  let bytes = readFileSync(path);
  const end = bytes.lastIndexOf(0x0a) + 1;
  if (repair && end < bytes.length) {
    truncateSync(path, end);
    bytes = bytes.subarray(0, end);
  }
  let count = 0;
  for (const line of bytes.toString('utf8').split('\n')) {
    if (!line) continue;
    let change: Change;
    try {
      change = JSON.parse(line) as Change;
    } catch {
      continue; // a torn line from a crash mid-write: everything before it stands
    }
    apply(change);
    count++;
  }
  return count;
}

async function writeSnapshot(path: string, docs: Doc[], abandon: () => boolean): Promise<boolean> {
  const handle = await open(path, 'w');
  let complete = false;
  try {
    let position = 0;
    for (let start = 0; start < docs.length; ) {
      if (abandon()) return false;
      const lines: string[] = [];
      let size = 0;
      for (; start < docs.length && lines.length < chunkDocs && size < chunkBytes; start++) {
        const line = JSON.stringify(docs[start]);
        lines.push(line);
        size += line.length;
      }
      position += await writeAll(handle, Buffer.from(lines.join('\n') + '\n'), position);
    }
    await handle.datasync();
    complete = true;
    return true;
  } finally {
    await handle.close();
    if (!complete) await unlink(path).catch(() => undefined);
  }
}

async function writeAll(handle: FileHandle, bytes: Buffer, position: number): Promise<number> {
  for (let at = 0; at < bytes.length; ) at += (await handle.write(bytes, at, bytes.length - at, position + at)).bytesWritten;
  return bytes.length;
}

/** Makes a rename in the file's directory durable; not every platform can sync a directory. */
async function syncDir(file: string): Promise<void> {
  let dir: FileHandle | undefined;
  try {
    dir = await open(dirname(file), 'r');
    await dir.sync();
  } catch {
    // best effort
  } finally {
    await dir?.close().catch(() => undefined);
  }
}
