import { setTimeout as sleep } from 'node:timers/promises';
import { Gauge, register } from 'prom-client';
import type { Logger } from '../log.ts';
import type { RedisKeys, ShardKeys } from './redis-keys.ts';
import type { ScriptedRedis } from './scripts.ts';
import type { RuntimeConfig } from './types.ts';

/** What this worker keeps of a shard it holds the lease of. */
export interface LeasedShard {
  type: string;
  index: number;
  stream: string;
  lease: string;
  /** The shard is being given back: nothing new of it is read, and the release waits for `inFlight` to end. */
  draining: boolean;
  /** Entries of the shard being handled. */
  inFlight: number;
  /** Aborted when the shard leaves this worker (lease lost or released, or a stop): what its keys' handlers get as `ctx.owned`. */
  ownership: AbortController;
}

/** What the worker does when a shard comes to it or leaves it. */
export interface ShardHolder<S extends LeasedShard> {
  /** Every shard there is, of every actor type. */
  shards(): Array<{ type: string; index: number }>;
  /** Whether the worker is stopping: it takes no shard then. */
  stopping(): boolean;
  /** The worker's record of a shard whose lease was just taken. */
  open(leased: LeasedShard, keys: ShardKeys): S;
  /** Readies a shard just taken (already among the owned ones) for reading. */
  taken(shard: S): Promise<void>;
  /** The shard has left this worker, its ownership aborted: what the worker holds of its keys goes, before the lease does when it is given back. */
  dropped(shard: S): void;
}

/** Registered by the first lease set made: a process on the in-process transport has no shards and exports none (an alert on "no shard owned" must not fire there). */
const ownedShards = () =>
  (register.getSingleMetric('relaybox_runtime_owned_shards') as Gauge | undefined) ??
  new Gauge({
    name: 'relaybox_runtime_owned_shards',
    help: 'Shards this worker holds the lease of',
  });

/**
 * The shard leases of one worker: one worker reads a shard at a time, the
 * one whose node id its lease key holds (SET NX, released only by its holder,
 * `lease-release-1.lua`). The workers alive are a sorted set of node ids
 * scored by when their membership ends: a worker's heartbeat (every
 * `leaseRenewMs`, a third of `leaseTtlMs` by default) keeps it there, so what
 * keeps a worker's leases alive costs one transaction a heartbeat however
 * many shards it holds. A lease whose holder's membership has lapsed is taken
 * over by another worker (`lease-take-1.lua`); the holder, finding at its next
 * heartbeat that its membership had lapsed, lets go of every shard first.
 * On one server the heartbeat also reads the held lease keys (one MGET): one
 * that names another worker is let go at once. The lease keys themselves
 * carry a long time to live (`leaseKeyTtlMs`, for keys nobody releases),
 * renewed with a check that each still names this worker every
 * `leaseCheckMs` (the check on a cluster, where the keys are in different
 * slots). Each worker takes free shards up to its fair
 * share of them and gives back what is above it.
 */
export class ShardLeases<S extends LeasedShard> {
  /** The shards this worker holds the lease of, by stream: changed here only. */
  readonly owned = new Map<string, S>();
  private rebalancing = false;
  private readonly ownedShardsGauge = ownedShards();

  constructor(
    private readonly redis: ScriptedRedis,
    private readonly keys: RedisKeys,
    private readonly nodeId: string,
    private readonly config: Pick<RuntimeConfig, 'leaseTtlMs' | 'shutdownGraceMs'> &
      Partial<Pick<RuntimeConfig, 'leaseCheckMs'>>,
    private readonly log: Logger,
    private readonly holder: ShardHolder<S>,
  ) {}

  /** How long a lease key lives without a renewal: three checks' worth, and never less than a membership. */
  private get leaseKeyTtlMs(): number {
    return leaseKeyTtlMs(this.config);
  }

  /**
   * Keeps this worker among the live members for another lease time to live,
   * and drops members whose time ran out. When this worker's own membership
   * had lapsed (a pause longer than the time to live: other workers may have
   * taken its shards), it lets go of every shard it holds; the next rebalance
   * takes back those nobody took.
   */
  async heartbeat(): Promise<void> {
    const now = Date.now();
    // On one server the lease keys are read in the same transaction (one MGET): a lease that names another worker is let go at once.
    const held = this.keys.cluster ? [] : [...this.owned.values()];
    const transaction = this.redis
      .multi()
      .zscore(this.keys.members, this.nodeId)
      .zadd(this.keys.members, now + this.config.leaseTtlMs, this.nodeId)
      .zremrangebyscore(this.keys.members, '-inf', now);
    if (held.length > 0) transaction.mget(...held.map((s) => s.lease));
    const replies = await transaction.exec();
    const previous = replies?.[0]?.[1] as string | null | undefined;
    if (this.owned.size > 0 && (previous == null || Number(previous) < now)) {
      this.log.warn({ shards: this.owned.size }, 'membership lapsed; letting go of every shard');
      for (const shard of [...this.owned.values()]) this.lost(shard);
    }
    const holders = (replies?.[3]?.[1] as Array<string | null> | undefined) ?? [];
    held.forEach((shard, i) => {
      if (holders[i] === this.nodeId || this.owned.get(shard.stream) !== shard) return;
      this.lost(shard);
      this.log.warn({ stream: shard.stream }, 'shard lease lost');
    });
    this.ownedShardsGauge.set(this.owned.size);
  }

  private lost(shard: S): void {
    if (this.owned.get(shard.stream) !== shard) return;
    // Another worker may own it now: stop reading it; what is in flight finishes and is acknowledged (at-least-once).
    this.owned.delete(shard.stream);
    shard.ownership.abort();
    this.holder.dropped(shard);
  }

  /** The heartbeat, and each held lease checked to still name this worker and renewed: one that names another is let go. */
  async renew(): Promise<void> {
    await this.heartbeat();
    await Promise.all(
      [...this.owned.values()].map(async (shard) => {
        const renewed = await this.redis.leaseRenew(shard.lease, this.nodeId, this.leaseKeyTtlMs);
        if (renewed === 0 && this.owned.get(shard.stream) === shard) {
          this.lost(shard);
          this.log.warn({ stream: shard.stream }, 'shard lease lost');
        }
      }),
    );
    this.ownedShardsGauge.set(this.owned.size);
  }

  /** Takes free shards up to this worker's fair share and gives back what is above it. */
  async rebalance(): Promise<void> {
    if (this.rebalancing || this.holder.stopping()) return;
    this.rebalancing = true;
    try {
      const shards = this.holder.shards();
      const members = new Set(await this.redis.zrangebyscore(this.keys.members, Date.now(), '+inf'));
      const share = Math.ceil(shards.length / Math.max(1, members.size));
      if (this.owned.size > share) {
        const extra = [...this.owned.values()].slice(0, this.owned.size - share);
        await Promise.all(extra.map((s) => this.release(s)));
        return;
      }
      if (this.owned.size >= share) return;
      const others = shards.filter((s) => !this.owned.has(this.keys.shard(s.type, s.index).stream));
      // Only shards that are free, or whose holder's membership lapsed (or is this worker, from before a lapse), can be had.
      const holders = await this.holdersOf(others.map((s) => this.keys.shard(s.type, s.index).lease));
      const free = others
        .map((s, i) => ({ ...s, holder: holders[i] ?? null }))
        .filter((s) => s.holder === null || s.holder === this.nodeId || !members.has(s.holder))
        .sort(() => Math.random() - 0.5);
      for (const candidate of free) {
        if (this.owned.size >= share || this.holder.stopping()) break;
        await this.tryAcquire(candidate.type, candidate.index, candidate.holder);
      }
    } finally {
      this.rebalancing = false;
      this.ownedShardsGauge.set(this.owned.size);
    }
  }

  /** The node ids the lease keys name: one MGET on a server, one GET per key on a cluster (the keys are in different slots). */
  private async holdersOf(leases: string[]): Promise<Array<string | null>> {
    if (leases.length === 0) return [];
    if (!this.keys.cluster) return this.redis.mget(...leases);
    return Promise.all(leases.map((lease) => this.redis.get(lease)));
  }

  private async tryAcquire(type: string, index: number, holder: string | null): Promise<void> {
    const keys = this.keys.shard(type, index);
    const { stream, lease } = keys;
    const got =
      holder === null
        ? (await this.redis.set(lease, this.nodeId, 'PX', this.leaseKeyTtlMs, 'NX')) === 'OK'
        : (await this.redis.leaseTake(lease, holder, this.nodeId, this.leaseKeyTtlMs)) === 1;
    if (!got) return;
    if (holder !== null && holder !== this.nodeId) this.log.info({ stream, from: holder }, 'took over a lapsed lease');
    const shard = this.holder.open(
      { type, index, stream, lease, draining: false, inFlight: 0, ownership: new AbortController() },
      keys,
    );
    this.owned.set(stream, shard);
    await this.holder.taken(shard);
  }

  private async release(shard: S): Promise<void> {
    shard.draining = true;
    const deadline = Date.now() + this.config.shutdownGraceMs;
    while (shard.inFlight > 0 && Date.now() < deadline) await sleep(10);
    this.owned.delete(shard.stream);
    // Before the lease goes: nothing this worker still holds for the shard's keys starts once another worker may own them.
    shard.ownership.abort();
    this.holder.dropped(shard);
    await this.redis.leaseRelease(shard.lease, this.nodeId);
    this.log.debug({ stream: shard.stream }, 'shard released');
  }

  /** At a stop: every shard's ownership ends, its lease is given back, and this worker leaves the members. Failures are left to the leases' time to live. */
  async leave(): Promise<void> {
    for (const s of this.owned.values()) s.ownership.abort();
    await Promise.all(
      [...this.owned.values()].map((s) => this.redis.leaseRelease(s.lease, this.nodeId).catch(() => 0)),
    );
    this.owned.clear();
    await this.redis.zrem(this.keys.members, this.nodeId).catch(() => 0);
    this.ownedShardsGauge.set(0);
  }
}

/** A lease key's time to live: three lease checks' worth (a check renews it), and never less than three memberships. */
export function leaseKeyTtlMs(
  config: Pick<RuntimeConfig, 'leaseTtlMs'> & Partial<Pick<RuntimeConfig, 'leaseCheckMs'>>,
): number {
  return Math.max(3 * config.leaseTtlMs, 3 * (config.leaseCheckMs ?? config.leaseTtlMs));
}
