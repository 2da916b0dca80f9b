// @ts-check
// Plain JavaScript, not TypeScript: a worker thread does not get the TypeScript loader under every way the service is started (tsx's CLI gives it none).
import { closeSync, fdatasyncSync, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { WalIndex } from './wal-index.mjs';

const Database = createRequire(import.meta.url)('libsql');

/**
 * The store's disk work that would otherwise stall the event loop, on its own
 * thread and its own connection to the file: the checkpoint (the log folded
 * back into the database, two disk syncs) once the log passes
 * `checkpointBytes`, and the fdatasync of the log every `syncIntervalMs` when
 * something was committed since the last one. A PASSIVE checkpoint never
 * waits for the writer or a reader: what a read still needs stays in the log
 * until the next round. The log starts over from its beginning (cut back to
 * `journal_size_limit`) only once all of it is folded back, which the frames
 * the writer adds during this checkpoint prevent: the store folds those few
 * back itself after its next commit (see `EmbeddedStore.boundWal`).
 *
 * workerData: see `WalWorkerData` in wal-checkpointer.ts.
 */
const { path, checkpointBytes, syncIntervalMs, pollMs, counters } =
  /** @type {import('./wal-checkpointer.ts').WalWorkerData} */ (workerData);
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const wal = `${path}-wal`;
const shared = new Int32Array(counters); // [commits by the store, checkpoints by this worker]
const db = new Database(path);
const log = new WalIndex(path);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
/** Passes at most per round, and the frames (about 1 MiB) left for the store to fold back that end them. */
const catchUpPasses = 4;
const tailFrames = 256;
let restUntil = 0;
let synced = Atomics.load(shared, 0);
let syncedAt = Date.now();

function tick() {
  const walBytes = log.bytes();
  if (walBytes >= checkpointBytes && Date.now() >= restUntil) {
    // Each pass folds back what was committed during the one before, a shorter stretch each time, so what the store folds back itself after its next commit (on the event loop) is small.
    let folded = false;
    for (let pass = 0; pass < catchUpPasses; pass++) {
      const {
        busy,
        log: frames,
        checkpointed,
      } = /** @type {{ busy: number, log: number, checkpointed: number }} */ (checkpoint.get());
      // Busy: the store is checkpointing itself (past its bound, or the tail of this worker's last round). Only a round that folded the log back is counted, or the store would take a stale count for one and fold back the whole log on the event loop.
      if (busy) break;
      folded = true;
      if (frames - checkpointed <= tailFrames) break;
    }
    if (folded) {
      Atomics.add(shared, 1, 1);
      // A round's tail is the store's to fold back after its next commit: a pass of this worker meanwhile would only make that busy.
      restUntil = Date.now() + pollMs;
    }
  }
  const seen = Atomics.load(shared, 0);
  if (syncIntervalMs > 0 && seen !== synced && Date.now() - syncedAt >= syncIntervalMs) {
    syncFile(wal);
    synced = seen;
    syncedAt = Date.now();
  }
}

/** Any descriptor of a file syncs the file. @param {string} file */
function syncFile(file) {
  let fd;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return; // checkpointed away
    throw err;
  }
  try {
    fdatasyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

const timer = setInterval(() => {
  try {
    tick();
  } catch (err) {
    port.postMessage({ error: /** @type {Error} */ (err).message }); // tried again next round
  }
}, pollMs);

port.on('message', (/** @type {{ stop?: boolean }} */ msg) => {
  if (!msg.stop) return;
  clearInterval(timer);
  try {
    tick();
  } finally {
    log.close();
    db.close();
    port.close();
  }
});
