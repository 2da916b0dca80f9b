import { WorkLane, type WorkClass } from './work-lane.ts';

/**
 * How long after another organization's interactive item a bulk key's items
 * are handed over one at a time. Longer than the gaps between one client's
 * requests, so a steady sender keeps it on.
 */
const sharingMs = 200;

/**
 * Runs work one key at a time, in the order it was posted, while different
 * keys run concurrently: what gives an actor its one-message-at-a-time
 * guarantee inside one process. Items of one key that wait next to each other
 * and that `together` pairs (the same kind of message, say) are handed over
 * at once, up to `maxBatch`: a burst costs one handling, not one each.
 * With `classOf`, a key whose next item is bulk or maintenance work (class 3
 * or 4, work-lane.ts) waits for a slice of the lane; interactive items are
 * taken at once, so they never wait behind another key's bulk work. While
 * another organization has interactive work (an item of its within the last
 * `sharingMs`), a bulk key's items are handed over one at a time: a burst of
 * a job's relay reports is then several short steps that another
 * organization's single send goes between, not one long one; a job alone
 * still gets its items together.
 */
export class Mailboxes<T> {
  /** Each running key's waiting items; a key is here exactly while it runs. */
  private readonly boxes = new Map<string, T[]>();
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];
  /** The organizations of the last two interactive items of different organizations, and when each was taken. */
  private readonly recent: Array<{ tenant: string; at: number }> = [];

  constructor(
    private readonly handle: (items: T[]) => Promise<void>,
    private readonly together: (first: T, next: T) => boolean,
    /** Waiting items handed over at once, at most (what an actor's batch handler is given). */
    private readonly maxBatch = 256,
    private readonly classOf: (item: T) => WorkClass = () => 1,
    /** Whose work an item is: deferred work takes turns by tenant within its class. */
    private readonly tenantOf: (item: T) => string = () => '',
    private readonly lane = new WorkLane(),
  ) {}

  post(key: string, item: T): void {
    this.inFlight++;
    const box = this.boxes.get(key);
    if (box) {
      box.push(item);
      return;
    }
    this.boxes.set(key, [item]);
    // The first take waits for the end of this turn, so what is posted in the same turn (one stream read) can go together.
    queueMicrotask(() => void this.drain(key));
  }

  private async drain(key: string): Promise<void> {
    const box = this.boxes.get(key)!;
    while (box.length > 0) {
      const head = box[0]!;
      const cls = this.classOf(head);
      let n = 0;
      // Taken when its turn comes, so what joined the key meanwhile goes in the same batch.
      const handled = () => {
        n = 1;
        const most = cls >= 3 && this.othersActive(this.tenantOf(box[0]!)) ? 1 : this.maxBatch;
        while (n < box.length && n < most && this.together(box[0]!, box[n]!)) n++;
        return this.handle(box.splice(0, n));
      };
      if (cls === 1) this.saw(this.tenantOf(head));
      try {
        await (cls >= 3 ? this.lane.run(cls, handled, this.tenantOf(head)) : handled());
      } catch {
        // The handler settles its own failures; nothing here may stop the key's queue.
      }
      this.inFlight -= n;
    }
    this.boxes.delete(key);
    if (this.inFlight === 0) this.wakeIdle();
  }

  /** An interactive item of `tenant` was taken now. */
  private saw(tenant: string): void {
    const at = performance.now();
    const [last] = this.recent;
    if (last?.tenant === tenant) last.at = at;
    else this.recent.splice(0, 2, { tenant, at }, ...(last ? [last] : []));
  }

  /** Whether an organization other than `tenant` had interactive work within the last `sharingMs`. */
  private othersActive(tenant: string): boolean {
    const since = performance.now() - sharingMs;
    return this.recent.some((r) => r.tenant !== tenant && r.at >= since);
  }

  /** The first waiting item of each key: the oldest of each key's queue. */
  *heads(): Iterable<T> {
    for (const box of this.boxes.values()) if (box.length > 0) yield box[0]!;
  }

  /** Items posted and not yet handled, running ones included. */
  get size(): number {
    return this.inFlight;
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }
}
