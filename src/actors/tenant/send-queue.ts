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

/**
 * A tenant's send queue: higher priority first. Within a priority, the
 * sources (each bulk job, each group send, and all single sends together)
 * take turns, one message each, first in first out within a source: a single
 * send waits behind at most one message of each job, not behind whole jobs.
 */
export class SendQueue {
  private readonly levels: Level[] = Array.from({ length: levels }, () => ({ sources: new Map(), last: undefined }));
  private readonly ids = new Map<string, QueueItem>();

  get size(): number {
    return this.ids.size;
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

  push(item: QueueItem): void {
    if (this.ids.has(item.id)) return;
    this.ids.set(item.id, item);
    item.queuedAt ??= Date.now();
    this.fifo(item).items.push(item);
  }

  /** Back to the head of its source: a message handed back by a relay goes before younger ones. */
  pushFront(item: QueueItem): void {
    if (this.ids.has(item.id)) return;
    this.ids.set(item.id, item);
    item.queuedAt ??= Date.now();
    this.fifo(item).pushFront(item);
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
   */
  take(pick: (item: QueueItem) => boolean | 'stop', scanLimit = 10_000): QueueItem[] {
    const taken: QueueItem[] = [];
    let scanned = 0;
    let stopped = false;
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
          scanned++;
          const verdict = pick(item);
          if (verdict === 'stop') {
            stopped = true;
            break;
          }
          if (verdict) {
            taken.push(item);
            this.ids.delete(item.id);
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
