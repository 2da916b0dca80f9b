import { Worker } from 'node:worker_threads';

/** What `wal-checkpoint-worker.mjs` is started with. */
export interface WalWorkerData {
  path: string;
  checkpointBytes: number;
  /** 0: the store syncs every commit itself, the worker never does. */
  syncIntervalMs: number;
  pollMs: number;
  /** Two Int32s: commits so far (counted by the store), checkpoints so far (counted by the worker). */
  counters: SharedArrayBuffer;
}

/**
 * How often the worker looks at the log: at 45,000 inserts a second (about
 * 45 MB of log) a 16 MiB checkpoint is due every third of a second, so a
 * round every 50 ms lets the log pass its checkpoint size by a few MiB at most.
 */
const pollMs = 50;

/** The worker thread that checkpoints and syncs the store's write-ahead log (see `wal-checkpoint-worker.mjs`). */
export class WalCheckpointer {
  private readonly worker: Worker;
  /** [commits, worker checkpoints]: atomics, so a commit costs no message. */
  private readonly counters = new Int32Array(new SharedArrayBuffer(8));
  private checkpointsSeen = 0;
  private readonly exited: Promise<void>;

  constructor(
    path: string,
    opts: { checkpointBytes: number; syncIntervalMs: number; onError: (message: string) => void },
  ) {
    const workerData: WalWorkerData = {
      path,
      checkpointBytes: opts.checkpointBytes,
      syncIntervalMs: opts.syncIntervalMs,
      pollMs,
      counters: this.counters.buffer as SharedArrayBuffer,
    };
    this.worker = new Worker(new URL('./wal-checkpoint-worker.mjs', import.meta.url), { workerData });
    this.worker.unref();
    this.worker.on('message', (msg: { error?: string }) => msg.error && opts.onError(msg.error));
    this.exited = new Promise((resolve) => {
      this.worker.once('exit', () => resolve());
      this.worker.once('error', (err) => opts.onError(err.message));
    });
  }

  /** Counts a commit, so the next background sync knows the log has something new. */
  committed(): void {
    Atomics.add(this.counters, 0, 1);
  }

  /** Whether the worker completed a checkpoint since the last call. */
  checkpointed(): boolean {
    const seen = Atomics.load(this.counters, 1);
    if (seen === this.checkpointsSeen) return false;
    this.checkpointsSeen = seen;
    return true;
  }

  /** A last round (the log synced if needed), then the worker's connection is closed and the thread ends. */
  async stop(): Promise<void> {
    this.worker.ref(); // awaited: the process stays up until the worker is done
    this.worker.postMessage({ stop: true });
    await this.exited;
  }
}
