import { spawnSync } from 'node:child_process';
import { closeSync, constants, lstatSync, openSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';

/** A claim file older than this was left by a process killed in the instant between its check and its hold. */
const staleClaimMs = 10_000;
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
 * a zombie), whatever SQLite build opens the file.
 *
 * The lock is a FIFO beside the database (`<file>.in-use`) that the holder
 * keeps open for reading. Opening a FIFO for writing without blocking fails
 * (ENXIO) exactly when no process has it open for reading, so whether a live
 * process holds the directory is one `open`; the descriptors of a process
 * that died are closed by the kernel, so there is nothing stale to clean up
 * (no process id to check, none that a recycled id could fake). Node has no
 * flock or fcntl, and SQLite's own locks let a second process share the file
 * in WAL mode, where the store assumes it is the file's only writer (its kept
 * counts and documents).
 *
 * Two processes starting at the same instant both find no holder; a claim
 * file created exclusively decides which one takes the lock, and the other
 * then finds the holder.
 */
export class DataDirLock {
  private fd: number | null = null;
  readonly fifo: string;
  /** Says which process holds the lock, for the message to the one refused (never used to decide). */
  private readonly ownerFile: string;

  constructor(readonly path: string) {
    this.fifo = `${path}.in-use`;
    this.ownerFile = `${path}.owner`;
    makeFifo(this.fifo);
    this.refuseIfHeld(releaseWaitMs);
    const claim = `${path}.claim`;
    takeClaim(claim);
    try {
      this.refuseIfHeld(0); // another process took it between the first look and the claim
      this.fd = openSync(this.fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    } finally {
      rmSync(claim, { force: true });
    }
    writeFileSync(this.ownerFile, String(process.pid));
  }

  private refuseIfHeld(waitMs: number): void {
    for (const until = Date.now() + waitMs; held(this.fifo); ) {
      if (Date.now() < until) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, releasePollMs); // synchronous: the store opens synchronously
        continue;
      }
      this.refuse();
    }
  }

  private refuse(): never {
    let pid = '';
    try {
      pid = readFileSync(this.ownerFile, 'utf8').trim();
    } catch {
      // written just after the lock is taken: not there yet
    }
    throw new Error(`${this.path} is in use by another running process${pid ? ` (process ${pid})` : ''}: stop it first`);
  }

  release(): void {
    if (this.fd === null) return;
    rmSync(this.ownerFile, { force: true });
    closeSync(this.fd);
    this.fd = null;
  }
}

/** Whether a process has the FIFO open for reading. */
function held(fifo: string): boolean {
  let fd: number;
  try {
    fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENXIO') return false;
    throw err;
  }
  closeSync(fd);
  return true;
}

function makeFifo(fifo: string): void {
  const existing = lstatSync(fifo, { throwIfNoEntry: false });
  if (existing?.isFIFO()) return;
  if (existing) unlinkSync(fifo);
  const made = spawnSync('mkfifo', ['-m', '600', fifo], { encoding: 'utf8' });
  // Another process starting at the same instant may have made it first.
  if (!statSync(fifo, { throwIfNoEntry: false })?.isFIFO()) throw new Error(`could not create the lock ${fifo} with mkfifo: ${made.error?.message ?? made.stderr.trim()}`);
}

function takeClaim(claim: string): void {
  for (let attempt = 0; ; attempt++) {
    try {
      closeSync(openSync(claim, 'wx'));
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const age = Date.now() - (statSync(claim, { throwIfNoEntry: false })?.mtimeMs ?? 0);
    if (attempt > 0 || age < staleClaimMs) throw new Error(`${claim} shows another process starting on this directory right now: try again`);
    rmSync(claim, { force: true });
  }
}
