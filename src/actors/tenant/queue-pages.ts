import type { MessageDoc } from '../../messages/message-store.ts';
import { afterKeys, type Collection, type Filter } from '../../store/collection.ts';
import { queueItemOf, type QueueItem } from './protocol.ts';
import { SendQueue } from './send-queue.ts';

/** A message's place in its part's store order: its `createdAt`, then its id. */
export interface Position {
  at: number;
  id: string;
}

/**
 * The queued messages of one sender line (`fromNumber`, null for any relay),
 * priority and source (a bulk job, a group send, or the single sends): those
 * held in memory, and those the store holds beyond the frontier, counted.
 */
export interface QueuePart {
  priority: number;
  fromNumber: string | null;
  source: string | undefined;
  /** Held in memory (the window). */
  held: number;
  /** Counted in the store beyond the frontier, not in memory. */
  behind: number;
  /** The store may hold messages of this part beyond the frontier: the next page is read from there. */
  tail: boolean;
  /** The last message held or read, in store order; every queued one up to it is held, in flight or in a retry's backoff. */
  frontier?: Position;
  /**
   * When the count `behind` started with was taken (epoch ms): a message
   * accepted before it and arriving beyond the frontier may be in that count
   * already, so it is not counted again (a page reads it from the store).
   */
  countedAt: number;
  reading: boolean;
}

/** A page of a part: its due messages, where it ended, and whether it was full (more may follow). */
export interface QueuePage {
  items: QueueItem[];
  last?: Position;
  full: boolean;
}

const partKey = (priority: number, fromNumber: string | null, source: string | undefined) =>
  `${priority}\u0000${fromNumber ?? ''}\u0000${source ?? ''}`;

function before(a: Position, b: Position): boolean {
  return a.at < b.at || (a.at === b.at && a.id <= b.id);
}

const positionOf = (item: QueueItem): Position | undefined =>
  item.acceptedAt === undefined ? undefined : { at: item.acceptedAt, id: item.id };

/**
 * A tenant's send queue with only each part's head in memory: at most
 * `windowSize` messages per sender line, priority and source (`SendQueue`
 * orders what is held), the rest counted and left in the store, read a page
 * at a time in store order (`createdAt`, id) from the part's frontier when
 * its window runs low. So the queue's order is the store's order within a
 * part, and a message is never read twice nor skipped: everything up to the
 * frontier is held (or in flight), everything after it comes from a page or
 * arrives with its acceptance and is held when its part has no tail.
 */
export class PagedQueue {
  private readonly window = new SendQueue();
  private readonly parts = new Map<string, QueuePart>();
  private behindTotal = 0;

  constructor(readonly windowSize: number) {}

  /** Every queued message it counts: held, and counted in the store. */
  get size(): number {
    return this.window.size + this.behindTotal;
  }

  /** The messages held in memory. */
  get held(): number {
    return this.window.size;
  }

  has(id: string): boolean {
    return this.window.has(id);
  }

  get(id: string): QueueItem | undefined {
    return this.window.get(id);
  }

  /** Every message held in memory, in no particular order. */
  all(): IterableIterator<QueueItem> {
    return this.window.all();
  }

  /** Each part's counts. */
  partitions(): IterableIterator<QueuePart> {
    return this.parts.values();
  }

  /** The oldest held per priority band: each part's head is held, and it is the part's oldest. */
  oldestByBand(): Array<number | undefined> {
    return this.window.oldestByBand();
  }

  push(item: QueueItem): void {
    this.arrive(item, false);
  }

  /** Back to the head of its source (a message handed back by a relay). */
  pushFront(item: QueueItem): void {
    this.arrive(item, true);
  }

  private arrive(item: QueueItem, front: boolean): void {
    if (this.window.has(item.id)) return;
    const part = this.part(item.priority, item.fromNumber, item.source);
    const at = positionOf(item);
    // Without a position (a sender of an earlier version), held: a page finds it held and skips it.
    const within = at === undefined || (part.frontier !== undefined && before(at, part.frontier));
    if (within || (!part.tail && part.held < this.windowSize)) {
      this.hold(part, item, front);
      if (!within) part.frontier = at;
      return;
    }
    // Beyond what the window holds: left in the store, where a page finds it.
    part.tail = true;
    if (at!.at >= part.countedAt) this.count(part, 1);
  }

  private hold(part: QueuePart, item: QueueItem, front: boolean): void {
    if (front) this.window.pushFront(item);
    else this.window.push(item);
    part.held++;
  }

  private count(part: QueuePart, n: number): void {
    const next = Math.max(0, part.behind + n);
    this.behindTotal += next - part.behind;
    part.behind = next;
  }

  private part(priority: number, fromNumber: string | null, source: string | undefined): QueuePart {
    const key = partKey(priority, fromNumber, source);
    let part = this.parts.get(key);
    if (!part) {
      part = { priority, fromNumber, source, held: 0, behind: 0, tail: false, countedAt: 0, reading: false };
      this.parts.set(key, part);
    }
    return part;
  }

  /** The store's count of a part's queued messages (the recovery's): all in the store, none read yet. */
  seed(priority: number, fromNumber: string | null, source: string | undefined, count: number, at: number): void {
    const part = this.part(priority, fromNumber, source);
    this.count(part, count);
    part.tail = part.behind > 0;
    part.countedAt = at;
  }

  /** The parts whose window has run down to half with more in the store, not being read already. */
  wanting(): QueuePart[] {
    return [...this.parts.values()].filter((p) => p.tail && !p.reading && p.held <= this.windowSize / 2);
  }

  /** A page read for `part` (its `reading` set while it was read): held, the frontier moved to its end. */
  applyPage(part: QueuePart, page: QueuePage): void {
    part.reading = false;
    let fresh = 0;
    for (const item of page.items) {
      if (this.window.has(item.id)) continue;
      this.hold(part, item, false);
      fresh++;
    }
    if (page.last) part.frontier = page.last;
    if (page.full) {
      this.count(part, -fresh);
      return;
    }
    // Read to its end: nothing of the part is left in the store beyond the frontier.
    this.count(part, -part.behind);
    part.tail = false;
  }

  /**
   * Taken as `SendQueue.take` takes (queue order), each part's count kept.
   * Once a part's window is empty while the store holds more of it, the
   * scan stops before the next lower priority: nothing goes ahead of that
   * part's next page (the dispatcher reads it, then takes again).
   */
  take(pick: (item: QueueItem) => boolean | 'stop', scanLimit?: number): QueueItem[] {
    let floor = -1;
    for (const part of this.parts.values()) if (part.tail && part.held === 0) floor = Math.max(floor, part.priority);
    const emptied: string[] = [];
    const taken = this.window.take((item) => {
      if (item.priority < floor) return 'stop';
      const verdict = pick(item);
      if (verdict !== true) return verdict;
      const key = partKey(item.priority, item.fromNumber, item.source);
      const part = this.parts.get(key);
      if (part && --part.held <= 0) {
        emptied.push(key);
        if (part.tail) floor = Math.max(floor, part.priority);
      }
      return true;
    }, scanLimit);
    for (const key of emptied) {
      const part = this.parts.get(key);
      if (part && part.held <= 0 && part.behind === 0 && !part.tail && !part.reading) this.parts.delete(key);
    }
    return taken;
  }

  /** A closed source's messages are never handed out: what the store holds of it is no longer counted nor read. */
  dropSource(source: string): void {
    for (const part of this.parts.values()) {
      if (part.source !== source) continue;
      this.count(part, -part.behind);
      part.tail = false;
    }
  }

  clear(): void {
    this.window.clear();
    this.parts.clear();
    this.behindTotal = 0;
  }
}

/** A part's own messages: its source's, or the single sends (neither a job's nor a group send's). */
function sourceFilter(source: string | undefined): Filter {
  if (source === undefined) return { jobId: null, parentId: null };
  return source.startsWith('job_') ? { jobId: source } : { parentId: source, jobId: null };
}

/**
 * The next page of a part, in store order from its frontier: one indexed
 * query (tenantId, status, fromNumber, priority, createdAt, id). A message
 * in a retry's backoff is passed over (its retry puts it back, behind the frontier).
 */
export async function readPage(
  messages: Collection<MessageDoc>,
  tenantId: string,
  part: QueuePart,
  limit: number,
): Promise<QueuePage> {
  const filter: Filter = {
    status: 'queued',
    fanout: { $ne: true },
    fromNumber: part.fromNumber,
    priority: part.priority,
    ...sourceFilter(part.source),
  };
  if (part.frontier) {
    const at = new Date(part.frontier.at).toISOString();
    filter.createdAt = { $gte: at };
    Object.assign(filter, afterKeys({ createdAt: 1, id: 1 }, [at, part.frontier.id]));
  }
  const docs = await messages.find({ tenantId }, filter, { sort: { createdAt: 1, id: 1 }, limit });
  const now = Date.now();
  const last = docs.at(-1);
  return {
    items: docs
      .filter((m) => !m.nextAttemptAt || Date.parse(m.nextAttemptAt) <= now)
      .map((m) => queueItemOf(m, 'accepted')),
    ...(last ? { last: { at: Date.parse(last.createdAt), id: last.id } } : {}),
    full: docs.length >= limit,
  };
}
