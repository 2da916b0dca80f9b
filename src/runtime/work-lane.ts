import { afterInteractive } from './ahead-of-bulk.ts';
import { shareWeightOf } from './share-weights.ts';

/**
 * What a piece of work is for, in the order the runtime serves it:
 * 1 interactive (a single send's accept and hand-out, relay reports on
 * them), 2 events and webhooks, 3 bulk (a job's fan-out and drain), 4
 * maintenance (sweeps, rollups, retention). An actor message is interactive
 * unless its sender says otherwise (`EmitOptions.workClass`); on Redis the
 * class travels in the envelope, so the worker that reads it serves it so.
 */
export type WorkClass = 1 | 2 | 3 | 4;

export const workClass = { interactive: 1, events: 2, bulk: 3, maintenance: 4 } as const satisfies Record<
  string,
  WorkClass
>;

/**
 * Bulk work started per turn of the event loop, at most (its synchronous
 * part, measured). On the embedded default every store write runs in the
 * caller's turn, so a turn is as long as the work started in it: a
 * 10,000-recipient job's drain, started as it came, made turns of 20 to 360
 * ms, and a single send, which needs a few turns from its request to its
 * relay, waited 60 to 360 ms. About 2 ms keeps a turn short and still leaves
 * the loop to the job whenever nothing else waits.
 */
export const bulkSliceMs = 2;

/**
 * Deferred handlers under way at once. A handler's work after its first
 * await (the rest of a claim, a status batch's events once its write is
 * committed) is not in any slice; one at a time bounds it to one handler's
 * step per turn. Measured on bench:fairness (embedded, the CPU time spent
 * between a single send's request and its send frame): 79 → 40 ms at the
 * median with one, the job's CPU time within 5 %.
 */
export const bulkRunning = 1;

/**
 * Deferred handlers under way at once on a worker of the Redis transport.
 * There a handler's store writes are round trips to a remote database that
 * leave the event loop free, so one at a time would leave the worker idle
 * between them: the lane still orders what starts (classes, turns by
 * organization), and bounds how much is under way.
 */
export const remoteBulkRunning = 32;

/**
 * Runs deferred work (classes 3 and 4) in slices of about `sliceMs`, lower
 * classes first, one slice per turn of the event loop (`setImmediate`): what
 * arrives in between (a request, a relay's report, interactive actor
 * messages, which never wait here) runs before the next slice. Within a
 * class, tenants take turns (`TenantRing`): one organization's job waits
 * behind another's for one step at a time, not for the whole of it. Before a
 * slice, interactive work waiting for the turn goes first (ahead-of-bulk.ts):
 * a write request waiting out its read is let go, the writes made since the
 * last commit are committed, and if there was any of either the slice waits
 * one more turn, so their continuations (an answer, a hand-out to a relay)
 * run before the bulk step. It waits again while there is more, for about a
 * slice at most: a single send's few turns (its group commit, its commit,
 * its claim's commit) all go ahead, and bulk work still gets a slice at
 * least every other slice's time.
 */
export class WorkLane {
  private readonly waiting = new Map<WorkClass, TenantRing>();
  private scheduled = false;
  private running = 0;

  constructor(
    private readonly sliceMs = bulkSliceMs,
    private readonly maxRunning = bulkRunning,
    private readonly weightOf: (tenant: string) => number = shareWeightOf,
  ) {}

  /** Starts `work` in a later slice, in `tenant`'s turn of its class; settles as its promise does. */
  run<R>(cls: WorkClass, work: () => Promise<R>, tenant = ''): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      let ring = this.waiting.get(cls);
      if (!ring) this.waiting.set(cls, (ring = new TenantRing()));
      ring.push(tenant, () => {
        this.running++;
        const done = () => {
          this.running--;
          this.schedule();
        };
        try {
          work().then(resolve, reject).finally(done);
        } catch (err) {
          done();
          reject(err);
        }
      });
      this.schedule();
    });
  }

  /** Work waiting for a slice. */
  get size(): number {
    let n = 0;
    for (const ring of this.waiting.values()) n += ring.size;
    return n;
  }

  private schedule(): void {
    if (this.scheduled || this.size === 0 || this.running >= this.maxRunning) return;
    this.scheduled = true;
    setImmediate(() => void this.slice());
  }

  private async slice(): Promise<void> {
    // Still scheduled meanwhile: one slice at a time.
    await afterInteractive(this.sliceMs);
    this.scheduled = false;
    const until = performance.now() + this.sliceMs;
    do {
      if (this.running >= this.maxRunning) break;
      const next = this.next();
      if (!next) break;
      next();
    } while (performance.now() < until);
    this.schedule();
  }

  private next(): (() => void) | undefined {
    for (const cls of [...this.waiting.keys()].sort()) {
      const ring = this.waiting.get(cls)!;
      const work = ring.shift(this.weightOf);
      if (ring.size === 0) this.waiting.delete(cls);
      if (work) return work;
    }
    return undefined;
  }
}

/**
 * One class's waiting work, by tenant, served by weighted round robin: the
 * tenant at the head takes as many items in a row as its weight, then goes
 * to the back of the ring (as does one that runs out of work and comes back
 * with more). Equal weights alternate item by item, whatever each queued.
 */
export class TenantRing {
  /** Each tenant's queue; the map's order is the ring's, its first entry the head. */
  private readonly queues = new Map<string, Array<() => void>>();
  private head: string | undefined;
  private left = 0;
  size = 0;

  push(tenant: string, work: () => void): void {
    const queue = this.queues.get(tenant);
    if (queue) queue.push(work);
    else this.queues.set(tenant, [work]);
    this.size++;
  }

  shift(weightOf: (tenant: string) => number): (() => void) | undefined {
    const first = this.queues.entries().next();
    if (first.done) return undefined;
    const [tenant, queue] = first.value;
    if (this.head !== tenant) {
      this.head = tenant;
      this.left = weightOf(tenant);
    }
    const work = queue.shift()!;
    this.size--;
    this.left--;
    if (queue.length === 0 || this.left <= 0) {
      this.queues.delete(tenant);
      if (queue.length > 0) this.queues.set(tenant, queue);
      this.head = undefined;
    }
    return work;
  }
}

/**
 * Runs `step` over `items` a piece at a time, each piece sized so that the
 * step's synchronous part (all of an embedded store write; the request only,
 * against a remote database) takes about `sliceMs`, with a turn of the event
 * loop between two pieces: a job's thousands of documents are written as
 * short steps that other work runs between, not as one long one. Against a
 * remote database the pieces grow to `maxPiece` at once.
 */
export async function inSteps<T>(
  items: T[],
  step: (piece: T[]) => Promise<unknown>,
  opts: { firstPiece?: number; maxPiece?: number; sliceMs?: number } = {},
): Promise<void> {
  const { firstPiece = 50, maxPiece = 1_000, sliceMs = bulkSliceMs } = opts;
  let size = Math.min(firstPiece, maxPiece);
  for (let i = 0; i < items.length;) {
    const piece = items.slice(i, i + size);
    i += piece.length;
    const started = performance.now();
    const done = step(piece);
    const took = performance.now() - started;
    await done;
    // Half again at most per step, so one slow piece (a page fault, a collection) does not shrink the next to nothing.
    size = Math.max(1, Math.min(maxPiece, Math.round(size * 1.5), Math.round((size * sliceMs) / Math.max(took, 0.01))));
    if (i < items.length) await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
