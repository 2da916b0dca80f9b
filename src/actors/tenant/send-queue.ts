import type { QueueItem } from './protocol.ts';

/** The priority bands the queue's age is reported by (bounded metric labels): the default 0, then thirds of 1 to 100. */
export const priorityBands = [
  { band: '0', from: 0, to: 0 },
  { band: '1-33', from: 1, to: 33 },
  { band: '34-66', from: 34, to: 66 },
  { band: '67-100', from: 67, to: 100 },
] as const;

const levels = 101;
/** The source every single send shares. */
const singleSends = '';
/** A FIFO's consumed head is dropped once it is this long and at least half the array. */
const compactAfter = 1_024;

/** First in, first out, cheap at the head: taking from the front moves an index, not the array. */
class Fifo {
  items: QueueItem[] = [];
  head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  pushFront(item: QueueItem): void {
    if (this.head > 0) this.items[--this.head] = item;
    else this.items.unshift(item);
  }

  /** Appends in the order of `queuedAt`: a message paged in from the store goes before younger ones already waiting. */
  insert(item: QueueItem): void {
    const at = item.queuedAt ?? Infinity;
    let i = this.items.length;
    while (i > this.head && (this.items[i - 1]!.queuedAt ?? 0) > at) i--;
    if (i === this.items.length) this.items.push(item);
    else this.items.splice(i, 0, item);
  }

  /** Removes the items at these absolute positions (ascending). */
  remove(positions: number[]): void {
    if (positions.length === 0) return;
    const prefix = positions.every((p, i) => p === this.head + i);
    if (prefix) {
      this.head += positions.length;
      if (this.head >= compactAfter && this.head * 2 >= this.items.length) {
        this.items = this.items.slice(this.head);
        this.head = 0;
      }
      return;
    }
    const gone = new Set(positions);
    this.items = this.items.filter((_, i) => i >= this.head && !gone.has(i));
    this.head = 0;
  }
}

/** One priority level: a FIFO per source, served in turn. */
interface Level {
  sources: Map<string, Fifo>;
  /** The source served last: the next scan starts after it. */
  last: string | undefined;
}

/** The key of a message's sender line in the queue: its number, or '' for any relay. */
export function lineKey(fromNumber: string | null): string {
  return fromNumber ?? '';
}

/**
 * A tenant's send queue: higher priority first. Within a priority, the
 * sources (each bulk job, each group send, and all single sends together)
 * take turns, one message each, first in first out within a source: a single
 * send waits behind at most one message of each job, not behind whole jobs.
 *
 * Only each sender line's head is held: at most `headSize` messages of a
 * line, its first in queue order. The rest stay in the store, where the line
 * is marked `paged` with the highest priority they may have, and are read
 * back (queue-pager.ts) as its head runs low. Turns between sources are taken
 * among the messages held.
 */
export class SendQueue {
  private readonly levels: Level[] = Array.from({ length: levels }, () => ({ sources: new Map(), last: undefined }));
  private readonly ids = new Map<string, QueueItem>();
  /** Messages held per sender line (`lineKey`). */
  private readonly held = new Map<string, number>();
  /** Sender lines with queued messages in the store that are not held: the highest priority those may have. */
  readonly paged = new Map<string, number>();
  /** Queued messages in the store and not held, as far as this queue can tell (an estimate: see `waiting`). */
  private stored = 0;
  /** `stored` is still the activation's count less the messages of it held since: when it reaches 0, the store has none not held. */
  private exact = false;
  /** Messages taken since the last `forgetTaken`: still queued in the store until their relay claims them, never paged in again before. */
  private readonly taken = new Set<string>();
  /** Sender lines paged from the top since the activation (`pageUnseen`). */
  private readonly seen = new Set<string>();

  constructor(readonly headSize = Infinity) {}

  /** Messages held in memory. */
  get size(): number {
    return this.ids.size;
  }

  /** Messages waiting: those held, and an estimate of those in the store beyond the heads (exact while nothing is paged). */
  get waiting(): number {
    return this.ids.size + (this.paged.size > 0 ? this.stored : 0);
  }

  /** Messages held of a sender line. */
  heldOf(line: string): number {
    return this.held.get(line) ?? 0;
  }

  /** The store holds queued messages of `line` up to `priority` that are not held (`count` of them, when known). */
  page(line: string, priority: number, count = 0): void {
    this.paged.set(line, Math.max(this.paged.get(line) ?? -1, clamp(priority)));
    this.stored += count;
    this.exact = false;
  }

  /** The store's messages of `line` not held go down to `priority` now (the head was read that far). */
  repage(line: string, priority: number): void {
    this.paged.set(line, clamp(priority));
  }

  /**
   * A sender line this queue has not read from the store yet (every line
   * after an activation: the relays' numbers as they join, any relay's line
   * at once) is paged from the top. The first after an activation brings the
   * store's `count` of queued messages; while the messages held since cover
   * that count exactly, no line is paged.
   */
  pageUnseen(line: string, count = 0): void {
    if (this.seen.has(line)) return;
    this.seen.add(line);
    if (this.seen.size === 1) {
      this.stored = count;
      this.exact = true;
    }
    // The activation's count all held: nothing of any line waits in the store.
    if (this.exact && this.stored === 0) return;
    this.paged.set(line, levels - 1);
  }

  /** Every line read before is looked at again from the top (a message a lost actor message left behind is found). */
  pageSeen(): void {
    for (const line of this.seen) this.page(line, levels - 1);
  }

  /** The store has no more of `line` than what is held. */
  unpage(line: string): void {
    this.paged.delete(line);
    if (this.paged.size === 0) this.stored = 0;
  }

  /** Whether a message read from the store is held or was just handed out. */
  knows(id: string): boolean {
    return this.ids.has(id) || this.taken.has(id);
  }

  /** Messages handed out before now are claimed or back in the store by now (called on every sweep). */
  forgetTaken(): void {
    this.taken.clear();
  }

  /** A message read from the store into its line's head, in queue order. */
  pageIn(item: QueueItem): void {
    if (this.ids.has(item.id)) return;
    this.hold(item);
    this.fifo(item).insert(item);
    this.stored = Math.max(0, this.stored - 1);
    this.exact = false;
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  get(id: string): QueueItem | undefined {
    return this.ids.get(id);
  }

  /** Every waiting message, in no particular order. */
  all(): IterableIterator<QueueItem> {
    return this.ids.values();
  }

  /**
   * A message queued now. Its line's head full, it stays in the store unless it
   * outranks the head's last message, which goes back to the store instead.
   * `counted`: the store's count this queue started from included it (it was
   * stored before the activation that counted).
   */
  push(item: QueueItem, counted = false): void {
    if (this.ids.has(item.id)) return;
    const line = lineKey(item.fromNumber);
    if (this.heldOf(line) >= this.headSize) {
      const last = this.lastOf(line);
      if (!last || last.priority >= clamp(item.priority)) return this.page(line, item.priority, counted ? 0 : 1);
      this.drop(last);
      this.page(line, last.priority, 1);
    }
    if (counted) this.stored = Math.max(0, this.stored - 1);
    // Every message the activation counted is held: no line need be read from the store (a send's activation reads nothing).
    if (counted && this.exact && this.stored === 0) this.paged.clear();
    this.hold(item);
    item.queuedAt ??= Date.now();
    this.fifo(item).items.push(item);
  }

  /** Back to the head of its source: a message handed back by a relay goes before younger ones (held whatever the head's size: as many as the credits that took them). */
  pushFront(item: QueueItem): void {
    if (this.ids.has(item.id)) return;
    this.hold(item);
    item.queuedAt ??= Date.now();
    this.fifo(item).pushFront(item);
  }

  private hold(item: QueueItem): void {
    this.ids.set(item.id, item);
    this.taken.delete(item.id);
    const line = lineKey(item.fromNumber);
    this.held.set(line, this.heldOf(line) + 1);
  }

  private release(item: QueueItem): void {
    this.ids.delete(item.id);
    const line = lineKey(item.fromNumber);
    const n = this.heldOf(line) - 1;
    if (n > 0) this.held.set(line, n);
    else this.held.delete(line);
  }

  /** The line's last held message in queue order: the youngest of its lowest priority. */
  private lastOf(line: string): QueueItem | undefined {
    for (const level of this.levels) {
      let last: QueueItem | undefined;
      for (const fifo of level.sources.values()) {
        for (let i = fifo.items.length - 1; i >= fifo.head; i--) {
          const item = fifo.items[i]!;
          if (lineKey(item.fromNumber) !== line) continue;
          if (!last || (item.queuedAt ?? 0) > (last.queuedAt ?? 0)) last = item;
          break;
        }
      }
      if (last) return last;
    }
    return undefined;
  }

  /** Removes one held message (back to the store). */
  private drop(item: QueueItem): void {
    const level = this.levels[clamp(item.priority)]!;
    const source = item.source ?? singleSends;
    const fifo = level.sources.get(source)!;
    fifo.remove([fifo.items.indexOf(item, fifo.head)]);
    if (fifo.length === 0) level.sources.delete(source);
    this.release(item);
  }

  /** For each of `priorityBands`, when its oldest waiting message was queued (epoch ms), or undefined when none waits. */
  oldestByBand(): Array<number | undefined> {
    return priorityBands.map(({ from, to }) => {
      let oldest: number | undefined;
      for (let p = from; p <= to; p++) {
        // Each source's FIFO is in queue order, so its head is its oldest (a handed-back message goes to the head, older still).
        for (const fifo of this.levels[p]!.sources.values()) {
          const at = fifo.items[fifo.head]?.queuedAt;
          if (at !== undefined && (oldest === undefined || at < oldest)) oldest = at;
        }
      }
      return oldest;
    });
  }

  private fifo(item: QueueItem): Fifo {
    const level = this.levels[clamp(item.priority)]!;
    const source = item.source ?? singleSends;
    let fifo = level.sources.get(source);
    if (!fifo) level.sources.set(source, (fifo = new Fifo()));
    return fifo;
  }

  /**
   * Removes and returns, in queue order, the messages `pick` accepts; `pick`
   * returns 'stop' to end the scan. At most `scanLimit` messages are looked at.
   * Queue order: priority, then the sources in turn, then first in first out.
   * A paged line whose head runs out ends the scan at its paged priority: what
   * comes next is in the store (queue-pager.ts reads it, and the pump takes again).
   */
  take(pick: (item: QueueItem) => boolean | 'stop', scanLimit = 10_000): QueueItem[] {
    const taken: QueueItem[] = [];
    let scanned = 0;
    let stopped = false;
    let stopBelow = -1;
    for (const [line, priority] of this.paged) if (this.heldOf(line) === 0) stopBelow = Math.max(stopBelow, priority);
    for (let p = levels - 1; p >= 0 && !stopped && scanned < scanLimit; p--) {
      const level = this.levels[p]!;
      if (level.sources.size === 0) continue;
      const order = turnOrder(level);
      const cursor = new Map(order.map((source) => [source, level.sources.get(source)!.head]));
      const removed = new Map<string, number[]>(order.map((source) => [source, []]));
      let active = order;
      while (active.length > 0 && !stopped && scanned < scanLimit) {
        const stillActive: string[] = [];
        for (const source of active) {
          if (scanned >= scanLimit) break;
          const fifo = level.sources.get(source)!;
          const at = cursor.get(source)!;
          const item = fifo.items[at]!;
          if (p < stopBelow) {
            stopped = true;
            break;
          }
          scanned++;
          const verdict = pick(item);
          if (verdict === 'stop') {
            stopped = true;
            break;
          }
          if (verdict) {
            taken.push(item);
            this.release(item);
            if (this.paged.size > 0) this.taken.add(item.id);
            const line = lineKey(item.fromNumber);
            if (this.heldOf(line) === 0 && this.paged.has(line)) stopBelow = Math.max(stopBelow, this.paged.get(line)!);
            removed.get(source)!.push(at);
            level.last = source;
          }
          cursor.set(source, at + 1);
          if (at + 1 < fifo.items.length) stillActive.push(source);
        }
        active = stillActive;
      }
      for (const [source, positions] of removed) {
        const fifo = level.sources.get(source)!;
        fifo.remove(positions);
        if (fifo.length === 0) level.sources.delete(source);
      }
    }
    return taken;
  }

  clear(): void {
    for (const level of this.levels) {
      level.sources.clear();
      level.last = undefined;
    }
    this.ids.clear();
    this.held.clear();
    this.paged.clear();
    this.taken.clear();
    this.seen.clear();
    this.stored = 0;
    this.exact = false;
  }
}

/** The level's sources, starting with the one after the source served last. */
function turnOrder(level: Level): string[] {
  const sources = [...level.sources.keys()];
  const after = level.last === undefined ? -1 : sources.indexOf(level.last);
  if (after < 0) return sources;
  return [...sources.slice(after + 1), ...sources.slice(0, after + 1)];
}

function clamp(priority: number): number {
  return Math.min(levels - 1, Math.max(0, Math.trunc(priority)));
}
