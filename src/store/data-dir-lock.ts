import { lstatSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import Database from 'libsql';

/**
 * How long a held lock is waited for before the start is refused: a killed
 * process's main thread is gone (a zombie) a little before its last thread,
 * and with it its descriptors (measured: a few ms on an idle machine, longer
 * with a thread in the middle of a disk sync).
 */
const releaseWaitMs = 3_000;
const releasePollMs = 20;

/**
 * One process at a time on a database file, by a lock the kernel lets go of
 * when the process dies (however it dies: kill -9 included, and before it is
 * a zombie).
 *
 * The lock is SQLite's own, on a small file beside the database
 * (`<file>.in-use`): the holder opens it in exclusive locking mode and writes
 * to it once, so it keeps an exclusive POSIX lock on that file for as long as
 * it runs. A second process (or a second store in this process) finds it busy.
 * The kernel drops a dead process's locks with its descriptors, so there is
 * nothing stale to clean up: no process id to check, none that a recycled id
 * could fake. The database itself cannot carry this lock: in WAL mode SQLite
 * lets a second process share the file, where the store assumes it is the
 * file's only writer (its kept counts and documents).
 */
export class DataDirLock {
  private db: Database.Database | null;
  readonly file: string;
  /** Says which process holds the lock, for the message to the one refused (never used to decide). */
  private readonly ownerFile: string;

  constructor(readonly path: string) {
    this.file = `${path}.in-use`;
    this.ownerFile = `${path}.owner`;
    // Anything but a regular file there (an earlier build kept a FIFO) is replaced.
    const existing = lstatSync(this.file, { throwIfNoEntry: false });
    if (existing && !existing.isFile()) rmSync(this.file, { force: true });
    const db = new Database(this.file);
    try {
      db.exec('PRAGMA busy_timeout = 0');
      db.exec('PRAGMA locking_mode = EXCLUSIVE');
      for (const until = Date.now() + releaseWaitMs; !take(db);) {
        if (Date.now() >= until) this.refuse();
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, releasePollMs); // synchronous: the store opens synchronously
      }
    } catch (err) {
      db.close();
      throw err;
    }
    this.db = db;
    writeFileSync(this.ownerFile, String(process.pid));
  }

  private refuse(): never {
    let pid = '';
    try {
      pid = readFileSync(this.ownerFile, 'utf8').trim();
    } catch {
      // written just after the lock is taken: not there yet
    }
    throw new Error(
      `${this.path} is in use by another running process${pid ? ` (process ${pid})` : ''}: stop it first`,
    );
  }

  release(): void {
    const db = this.db;
    if (!db) return;
    this.db = null;
    rmSync(this.ownerFile, { force: true });
    // Back to normal locking, the next read lets the lock go: close() alone may keep the file open until collected.
    db.exec('PRAGMA locking_mode = NORMAL');
    db.exec('SELECT count(*) FROM sqlite_master');
    db.close();
  }
}

/** One write in exclusive locking mode: the exclusive lock it takes is kept. False when another connection holds it. */
function take(db: Database.Database): boolean {
  try {
    db.exec('BEGIN EXCLUSIVE');
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return false;
    throw err;
  }
  db.exec('CREATE TABLE IF NOT EXISTS held (since TEXT)');
  db.exec('COMMIT');
  return true;
}
