import type { Logger } from '../log.ts';
import type { Collection, Scope, Store, WriteOp } from '../store/collection.ts';

/**
 * Per-organization message statistics kept as rollups: one document per
 * (organization, interval, bucket start, dimension) holding the bucket's
 * counts and latency histograms, incremented by the writes that count
 * (`RollupTally`, one upsert per key per batch) and read by key range, so a
 * statistics query never reads the messages.
 */
export const rollupIntervals = { '1m': 60_000, '1h': 3_600_000, '1d': 86_400_000 } as const;
export type RollupInterval = keyof typeof rollupIntervals;

/** What is counted, and where: accepted (stored by a send or a bulk job), sent, delivered, read, failed (after the last attempt) and received (inbound). */
export const rollupOutcomes = ['accepted', 'sent', 'delivered', 'read', 'failed', 'received'] as const;
export type RollupOutcome = (typeof rollupOutcomes)[number];

/** The latencies kept, from acceptance: to sent and to delivered. */
export const rollupLatencies = ['sent', 'delivered'] as const;
export type RollupLatency = (typeof rollupLatencies)[number];

/**
 * How long each interval's buckets are kept: minute buckets 48 h (a 1 m
 * chart spans at most 25 h), hour buckets 90 days, day buckets for good.
 */
export const rollupRetentionMs: Record<RollupInterval, number | null> = {
  '1m': 48 * 3_600_000,
  '1h': 90 * 86_400_000,
  '1d': null,
};

/** An organization's old buckets are removed at most this often (per process), by the writes that add new ones. */
const pruneEveryMs = 3_600_000;

/**
 * Latency histogram bins: log-spaced, 8 a doubling (each bin's upper bound
 * 2^(1/8), about 9 %, above its lower one), from 1 ms. A percentile is
 * answered as its bin's upper bound, rounded to the millisecond: never below
 * the true value (a whole number of ms), at most 9 % above it before the
 * rounding. Only bins holding a sample are stored.
 */
const binsPerDoubling = 8;

export function latencyBin(ms: number): number {
  return ms <= 1 ? 0 : Math.ceil(Math.log2(ms) * binsPerDoubling);
}

export function binUpperMs(bin: number): number {
  return Math.round(2 ** (bin / binsPerDoubling));
}

export interface Percentiles {
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

const none: Percentiles = { p50: null, p95: null, p99: null };

/** The 50th, 95th and 99th percentiles of a histogram of bin (`b<n>`) → samples, in one pass over its sorted bins; nulls when it holds none. */
export function percentilesOf(histogram: Record<string, number> | undefined): Percentiles {
  if (!histogram) return none;
  const bins: Array<[number, number]> = [];
  let total = 0;
  for (const key in histogram) {
    const n = histogram[key]!;
    if (n > 0) {
      bins.push([Number(key.slice(1)), n]);
      total += n;
    }
  }
  if (total === 0) return none;
  bins.sort((a, b) => a[0] - b[0]);
  const ranks = [0.5, 0.95, 0.99].map((q) => Math.max(1, Math.ceil(q * total)));
  const found: number[] = [];
  let seen = 0;
  for (const [bin, n] of bins) {
    seen += n;
    while (found.length < ranks.length && seen >= ranks[found.length]!) found.push(binUpperMs(bin));
  }
  return { p50: found[0]!, p95: found[1]!, p99: found[2]! };
}

export interface RollupDoc {
  [field: string]: unknown;
  /** `<tenantId>|<interval>|<start>|<dimension>`: ids are unique across tenants. */
  id: string;
  tenantId: string;
  interval: RollupInterval;
  /** `all`, `n:<E.164 number>` or `r:<relay id>` */
  dim: string;
  /** The bucket's start (ISO 8601 UTC), a multiple of its interval. */
  start: string;
  accepted?: number;
  sent?: number;
  delivered?: number;
  read?: number;
  failed?: number;
  received?: number;
  /** Per latency, bin (`b<n>`) → samples. */
  latency?: Partial<Record<RollupLatency, Record<string, number>>>;
}

export function rollupCollection(store: Store): Collection<RollupDoc> {
  return store.collection<RollupDoc>('message_rollups', [
    // A chart's range: one dimension of one interval, by start.
    { keys: { tenantId: 1, interval: 1, dim: 1, start: 1 } },
    // Retention: an interval's buckets before a time, every dimension.
    { keys: { tenantId: 1, interval: 1, start: 1 } },
  ]);
}

/** Where a counted message belongs besides the organization's total: the sender number and the relay, when known. */
export interface RollupDims {
  phoneNumber?: string | null;
  relayId?: string | null;
}

export const dimOf = (d: RollupDims): string =>
  d.phoneNumber ? `n:${d.phoneNumber}` : d.relayId ? `r:${d.relayId}` : 'all';

function dimsOf(d: RollupDims): string[] {
  const dims = ['all'];
  if (d.phoneNumber) dims.push(`n:${d.phoneNumber}`);
  if (d.relayId) dims.push(`r:${d.relayId}`);
  return dims;
}

export const bucketStart = (ms: number, interval: RollupInterval): number =>
  Math.floor(ms / rollupIntervals[interval]) * rollupIntervals[interval];

const rollupIntervalNames = Object.keys(rollupIntervals) as RollupInterval[];
/** Each interval's last bucket, formatted: a busy tally asks for the same few starts over and over. */
const lastBuckets = new Map<RollupInterval, { ms: number; iso: string }>();

function bucketIso(atMs: number, interval: RollupInterval): string {
  const ms = bucketStart(atMs, interval);
  const last = lastBuckets.get(interval);
  if (last?.ms === ms) return last.iso;
  const iso = new Date(ms).toISOString();
  lastBuckets.set(interval, { ms, iso });
  return iso;
}

/**
 * What a batch of writes counts, aggregated in memory by rollup key: each
 * outcome goes to every interval and dimension it belongs to, so a batch of
 * any size is one upsert per key it touched.
 */
export class RollupTally {
  private readonly keys = new Map<
    string,
    Map<string, { interval: RollupInterval; dim: string; start: string; inc: Record<string, number> }>
  >();

  get size(): number {
    return this.keys.size;
  }

  /**
   * One message reached `outcome` at `atMs` (when it is stored); `latencyMs` from its acceptance, for sent and
   * delivered. `count` messages at once, when they share all of it (a bulk job's, accepted together).
   */
  add(tenantId: string, outcome: RollupOutcome, atMs: number, dims: RollupDims, latencyMs?: number, count = 1): void {
    let tenant = this.keys.get(tenantId);
    if (!tenant) this.keys.set(tenantId, (tenant = new Map()));
    const latency =
      latencyMs !== undefined && Number.isFinite(latencyMs) && (outcome === 'sent' || outcome === 'delivered')
        ? `latency.${outcome}.b${latencyBin(Math.max(0, latencyMs))}`
        : undefined;
    for (const interval of rollupIntervalNames) {
      const start = bucketIso(atMs, interval);
      for (const dim of dimsOf(dims)) {
        const id = `${tenantId}|${interval}|${start}|${dim}`;
        let key = tenant.get(id);
        if (!key) tenant.set(id, (key = { interval, dim, start, inc: {} }));
        key.inc[outcome] = (key.inc[outcome] ?? 0) + count;
        if (latency) key.inc[latency] = (key.inc[latency] ?? 0) + count;
      }
    }
  }

  /** Adds what `other` counted. */
  merge(other: RollupTally): void {
    for (const [tenantId, keys] of other.keys) {
      let tenant = this.keys.get(tenantId);
      if (!tenant) this.keys.set(tenantId, (tenant = new Map()));
      for (const [id, k] of keys) {
        const mine = tenant.get(id);
        if (!mine) tenant.set(id, { ...k, inc: { ...k.inc } });
        else for (const [field, n] of Object.entries(k.inc)) mine.inc[field] = (mine.inc[field] ?? 0) + n;
      }
    }
  }

  /** Each organization's upserts. */
  writes(): Array<{ tenantId: string; ops: WriteOp[] }> {
    return [...this.keys].map(([tenantId, keys]) => ({
      tenantId,
      ops: [...keys].map(([id, k]) => ({
        updateOne: {
          filter: { id },
          update: { $inc: k.inc, $setOnInsert: { interval: k.interval, dim: k.dim, start: k.start } },
          upsert: true,
        },
      })),
    }));
  }
}

export interface StatsQuery {
  fromMs: number;
  toMs: number;
  interval: RollupInterval;
  phoneNumber?: string;
  relayId?: string;
}

export interface StatsBucket {
  start: string;
  accepted: number;
  sent: number;
  delivered: number;
  read: number;
  failed: number;
  received: number;
  latency: Record<RollupLatency, Percentiles>;
}

/** At most this many buckets a query (a day of minutes, and a margin). */
export const maxStatsBuckets = 1_500;

/** The organization's message rollups: written with the changes they count, read by range, old buckets pruned. */
export class MessageRollups {
  private readonly prunedAt = new Map<string, number>();
  /** What is counted while a write is in flight (coalescing), for the next one. */
  private queued: RollupTally | null = null;
  private inFlight: Promise<void> = Promise.resolve();

  /**
   * `coalesce` (a remote store): one write in flight at a time, what is
   * counted meanwhile merged into the next, and the caller does not wait for
   * it (`settled` does), so the statistics add no round trip to the send
   * path or a status batch. Under load that makes fewer, larger writes; and
   * on a MongoDB wire server that updates by reading and writing back
   * (FerretDB 1.24 kept 13 of 20 concurrent `$inc`s on one document), no two
   * writes of this process race on a bucket. The embedded store writes
   * synchronously, in the caller's transaction: it never needs it.
   */
  constructor(
    private readonly rollups: Collection<RollupDoc>,
    private readonly log: Logger,
    private readonly opts: { coalesce: boolean } = { coalesce: false },
  ) {}

  /**
   * Writes what a batch counted: one bulk write per organization, each key
   * one upsert. Called in the same synchronous run as the write it counts, so
   * on the embedded store both are one transaction (and this settles with
   * its commit); on a remote store it is one bulk write after the batch's,
   * merged with what other batches counted meanwhile, never one per message.
   */
  write(tally: RollupTally): Promise<void> {
    if (tally.size === 0) return Promise.resolve();
    if (!this.opts.coalesce) return this.writeNow(tally);
    if (this.queued) {
      this.queued.merge(tally);
      return Promise.resolve();
    }
    const next = (this.queued = new RollupTally());
    next.merge(tally);
    this.inFlight = this.inFlight.then(() => {
      this.queued = null;
      return this.writeNow(next);
    });
    return Promise.resolve();
  }

  /** Settles once everything counted so far is written (or logged as lost): a stopping process waits for it before its store closes. */
  settled(): Promise<void> {
    return this.inFlight;
  }

  /**
   * A failed write loses its counts and is logged, never thrown: the
   * statistics never fail the send or the status change they count (a send
   * answered with an error would be sent again).
   */
  private async writeNow(tally: RollupTally): Promise<void> {
    await Promise.all(
      tally.writes().map(async ({ tenantId, ops }) => {
        const scope: Scope = { tenantId };
        try {
          const { conflicts } = await this.rollups.bulkWrite(scope, ops);
          // An upsert that lost the race to create its bucket: the bucket exists now, so the update matches.
          if (conflicts.length > 0)
            await this.rollups.bulkWrite(
              scope,
              conflicts.map((i) => ops[i]!),
            );
        } catch (err) {
          this.log.warn(
            { err, tenantId, buckets: ops.length },
            'message statistics of a batch are lost: their write failed',
          );
          return;
        }
        this.pruneLater(tenantId);
      }),
    );
  }

  /** The buckets of `[floor(from), to)`, zero-filled, oldest first. */
  async read(tenantId: string, q: StatsQuery): Promise<StatsBucket[]> {
    const step = rollupIntervals[q.interval];
    const first = bucketStart(q.fromMs, q.interval);
    const count = Math.ceil((q.toMs - first) / step);
    const dim = dimOf(q);
    const docs = await this.rollups.find(
      { tenantId },
      {
        interval: q.interval,
        dim,
        start: { $gte: new Date(first).toISOString(), $lt: new Date(q.toMs).toISOString() },
      },
      { sort: { start: 1 }, limit: maxStatsBuckets },
    );
    const byStart = new Map(docs.map((d) => [d.start, d]));
    const buckets: StatsBucket[] = [];
    for (let i = 0; i < count; i++) {
      const start = new Date(first + i * step).toISOString();
      const doc = byStart.get(start);
      buckets.push({
        start,
        accepted: doc?.accepted ?? 0,
        sent: doc?.sent ?? 0,
        delivered: doc?.delivered ?? 0,
        read: doc?.read ?? 0,
        failed: doc?.failed ?? 0,
        received: doc?.received ?? 0,
        latency: { sent: percentilesOf(doc?.latency?.sent), delivered: percentilesOf(doc?.latency?.delivered) },
      });
    }
    return buckets;
  }

  /** Removes the organization's buckets past their interval's retention; answers how many. */
  async prune(tenantId: string, nowMs = Date.now()): Promise<number> {
    this.prunedAt.set(tenantId, nowMs);
    let removed = 0;
    for (const [interval, keepMs] of Object.entries(rollupRetentionMs)) {
      if (keepMs === null) continue;
      removed += await this.rollups.deleteMany(
        { tenantId },
        { interval, start: { $lt: new Date(nowMs - keepMs).toISOString() } },
      );
    }
    return removed;
  }

  private pruneLater(tenantId: string): void {
    const now = Date.now();
    if (now - (this.prunedAt.get(tenantId) ?? 0) < pruneEveryMs) return;
    this.prunedAt.set(tenantId, now);
    setImmediate(
      () =>
        void this.prune(tenantId, now).catch((err: unknown) => {
          this.prunedAt.delete(tenantId);
          this.log.warn({ err, tenantId }, 'could not remove old statistics buckets; the next write tries again');
        }),
    );
  }
}
