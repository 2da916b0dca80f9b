import { newId } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Collection } from '../store/collection.ts';
import { chunks as slices } from '../chunks.ts';
import { chunkOf, requestLogRetentionMs, type RequestChunkDoc, type RequestEntry } from './request-chunks.ts';

/**
 * A chunk is written once it holds this many entries, 1 s after its first
 * entry, or 200 ms after its last one when no newer came (a burst is written
 * as soon as it ends): so a request is listed within about a second, and
 * under load one insert carries hundreds of requests (300 concurrent sends
 * are one or two rows, where a row per request would double the rows of a send).
 */
export const chunkEntries = 500;
export const chunkMaxDelayMs = 1000;
const chunkIdleMs = 200;

/** Each organization's cap and retention are applied after its writes at most this often, so the cap holds within 10 s of requests. */
const pruneEveryMs = 10_000;
/** Organizations that made no request for a while still lose their old entries: every hour (a timer far below the longest Node timer). */
const sweepEveryMs = 3_600_000;
/**
 * Entries held until the store has them (waiting for their chunk, or in a
 * write not yet answered), all organizations together: while the store does
 * not answer, newer requests are not recorded beyond this (about 10 MB).
 */
export const maxHeldEntries = 50_000;
/** Ids per delete: one `$in` list stays a small command. */
const deleteChunk = 500;

export interface RequestRecorderOptions {
  /** The most entries an organization keeps; its oldest chunks go first. */
  maxEntries: number;
  /** The wall clock (epoch ms): the time entries are stamped with and retention is counted from. */
  now?: () => number;
}

interface Waiting {
  entries: RequestEntry[];
}

/**
 * Keeps each organization's answered requests in memory and writes them in
 * chunks (`RequestChunkDoc`): one document per organization and process for
 * up to a second or 500 requests. Then bounds what is kept: entries older
 * than 7 days are deleted, and an organization past `maxEntries` loses its
 * oldest chunks. Best effort: a chunk the store refuses is dropped, and
 * logged, rather than holding requests up.
 */
export class RequestRecorder {
  private waiting = new Map<string, Waiting>();
  private waitingCount = 0;
  /** Entries recorded and not yet written or dropped: waiting, and in writes under way. */
  private heldCount = 0;
  private firstAt = 0;
  private lastAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly sweeper: NodeJS.Timeout;
  private writing: Promise<void> = Promise.resolve();
  /** Organizations this process wrote for, and when each was last pruned (0: never). */
  private readonly prunedAt = new Map<string, number>();
  /** When this process last wrote a chunk of each organization: swept until their entries are past retention. */
  private readonly writtenAt = new Map<string, number>();
  private dropped = 0;
  /** The sweep under way, if any: one at a time. */
  private sweep$: Promise<void> | undefined;
  readonly now: () => number;

  constructor(
    private readonly chunks: Collection<RequestChunkDoc>,
    private readonly opts: RequestRecorderOptions,
    private readonly log: Logger,
  ) {
    this.now = opts.now ?? Date.now;
    this.sweeper = setInterval(() => {
      this.sweep$ ??= this.sweep().finally(() => (this.sweep$ = undefined));
    }, sweepEveryMs);
    this.sweeper.unref();
  }

  record(tenantId: string, entry: RequestEntry): void {
    if (this.heldCount >= maxHeldEntries) {
      if (this.dropped++ === 0)
        this.log.warn({ tenantId }, 'request log: too many requests waiting for the store; dropping');
      return;
    }
    this.heldCount++;
    let waiting = this.waiting.get(tenantId);
    if (!waiting) this.waiting.set(tenantId, (waiting = { entries: [] }));
    waiting.entries.push(entry);
    this.waitingCount++;
    const now = performance.now();
    if (this.waitingCount === 1) this.firstAt = now;
    this.lastAt = now;
    if (waiting.entries.length >= chunkEntries) this.write([[tenantId, waiting]]);
    else this.timer ??= setTimeout(() => this.due(), chunkIdleMs);
  }

  private due(): void {
    this.timer = undefined;
    if (this.waitingCount === 0) return;
    const now = performance.now();
    const left = Math.min(this.firstAt + chunkMaxDelayMs, this.lastAt + chunkIdleMs) - now;
    if (left > 0) this.timer = setTimeout(() => this.due(), left);
    else this.write([...this.waiting]);
  }

  /** Writes the organizations' waiting entries, each as one chunk, in one turn (one group commit on the embedded store). */
  private write(batch: Array<[string, Waiting]>): void {
    const docs: RequestChunkDoc[] = [];
    for (const [tenantId, waiting] of batch) {
      this.waiting.delete(tenantId);
      this.waitingCount -= waiting.entries.length;
      docs.push(chunkOf(newId('rqc'), tenantId, waiting.entries));
    }
    if (this.waitingCount === 0) this.firstAt = 0;
    const written = Promise.all(docs.map((doc) => this.insert(doc)));
    this.writing = Promise.all([this.writing, written]).then(() => undefined);
  }

  private async insert(doc: RequestChunkDoc): Promise<void> {
    const { tenantId } = doc;
    try {
      await this.chunks.insertOne({ tenantId }, doc);
    } catch (err) {
      this.log.warn(
        { err, tenantId, entries: doc.count },
        'request log: could not write a chunk; its entries are dropped',
      );
      return;
    } finally {
      this.heldCount -= doc.count;
    }
    this.writtenAt.set(tenantId, this.now());
    const pruned = this.prunedAt.get(tenantId) ?? 0;
    if (pruned !== 0 && performance.now() - pruned < pruneEveryMs) return;
    this.prunedAt.set(tenantId, performance.now());
    await this.prune(tenantId).catch((err: unknown) =>
      this.log.warn({ err, tenantId }, 'request log: could not remove old entries; a later write tries again'),
    );
  }

  /** Entries held until the store has them, and entries not recorded because too many were held. */
  get held(): { entries: number; dropped: number } {
    return { entries: this.heldCount, dropped: this.dropped };
  }

  /**
   * Deletes the organization's entries older than the retention, then its
   * oldest chunks while it holds more than `maxEntries` (counted from each
   * chunk's `count`, grouped by the store: no chunk is read to count).
   * Answers how many chunks it deleted.
   */
  async prune(tenantId: string): Promise<number> {
    const scope = { tenantId };
    let deleted = await this.chunks.deleteMany(scope, { endsAt: { $lt: this.now() - requestLogRetentionMs } });
    const groups = await this.chunks.countBy(scope, {}, ['count']);
    let excess = groups.reduce((sum, g) => sum + Number(g.values[0] ?? 0) * g.count, 0) - this.opts.maxEntries;
    if (excess <= 0) return deleted;
    const oldest: string[] = [];
    for await (const page of this.chunks.scan(scope, {}, { sort: { endsAt: 1 }, pageSize: 100 })) {
      for (const chunk of page) {
        if (excess <= 0) break;
        oldest.push(chunk.id);
        excess -= chunk.count;
      }
      if (excess <= 0) break;
    }
    for (const ids of slices(oldest, deleteChunk)) deleted += await this.chunks.deleteMany(scope, { id: { $in: ids } });
    return deleted;
  }

  /** Prunes every organization this process wrote for, and forgets those whose last chunk is past retention. */
  async sweep(): Promise<void> {
    for (const [tenantId, at] of [...this.writtenAt]) {
      try {
        await this.prune(tenantId);
        if (at < this.now() - requestLogRetentionMs) {
          this.writtenAt.delete(tenantId);
          this.prunedAt.delete(tenantId);
        }
      } catch (err) {
        this.log.warn({ err, tenantId }, 'request log: could not remove old entries; the next sweep tries again');
      }
    }
  }

  /** Resolves once the timer's sweep under way, if any, is done. */
  async sweeping(): Promise<void> {
    await this.sweep$;
  }

  /** Writes what is waiting now and resolves once every chunk started is written (or dropped). */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.waitingCount > 0) this.write([...this.waiting]);
    await this.writing;
  }

  /** Writes what is waiting and stops the sweeps: before the store closes. */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await this.flush();
  }
}
