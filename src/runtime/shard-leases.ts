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
 * one whose node id its lease key holds (SET NX with a time to live, renewed
 * and released only by its holder, `lease-renew-1.lua`, `lease-release-1.lua`).
 * The workers alive are a sorted set of node ids scored by when their
 * membership ends, and each takes free shards up to its fair share of them
 * and gives back what is above it. A worker that stops renewing loses its
 * leases when they expire, and another takes them.
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
    private readonly config: Pick<RuntimeConfig, 'leaseTtlMs' | 'shutdownGraceMs'>,
    private readonly log: Logger,
    private readonly holder: ShardHolder<S>,
  ) {}

  /** Keeps this worker among the live members for another lease time to live, and drops members whose time ran out. */
  async heartbeat(): Promise<void> {
    const now = Date.now();
    await this.redis
      .multi()
      .zadd(this.keys.members, now + this.config.leaseTtlMs, this.nodeId)
      .zremrangebyscore(this.keys.members, '-inf', now)
      .exec();
  }

  async renew(): Promise<void> {
    await this.heartbeat();
    for (const shard of [...this.owned.values()]) {
      const renewed = await this.redis.leaseRenew(shard.lease, this.nodeId, this.config.leaseTtlMs);
      if (renewed === 0 && this.owned.get(shard.stream) === shard) {
        // Another worker may own it now: stop reading it; what is in flight finishes and is acknowledged (at-least-once).
        this.owned.delete(shard.stream);
        shard.ownership.abort();
        this.holder.dropped(shard);
        this.log.warn({ stream: shard.stream }, 'shard lease lost');
      }
    }
    this.ownedShardsGauge.set(this.owned.size);
  }

  /** Takes free shards up to this worker's fair share and gives back what is above it. */
  async rebalance(): Promise<void> {
    if (this.rebalancing || this.holder.stopping()) return;
    this.rebalancing = true;
    try {
      const shards = this.holder.shards();
      const live = Math.max(1, await this.redis.zcount(this.keys.members, Date.now(), '+inf'));
      const share = Math.ceil(shards.length / live);
      if (this.owned.size > share) {
        const extra = [...this.owned.values()].slice(0, this.owned.size - share);
        await Promise.all(extra.map((s) => this.release(s)));
        return;
      }
      const free = shards
        .filter((s) => !this.owned.has(this.keys.shard(s.type, s.index).stream))
        .sort(() => Math.random() - 0.5);
      for (const candidate of free) {
        if (this.owned.size >= share || this.holder.stopping()) break;
        await this.tryAcquire(candidate.type, candidate.index);
      }
    } finally {
      this.rebalancing = false;
      this.ownedShardsGauge.set(this.owned.size);
    }
  }

  private async tryAcquire(type: string, index: number): Promise<void> {
    const keys = this.keys.shard(type, index);
    const { stream, lease } = keys;
    const got = await this.redis.set(lease, this.nodeId, 'PX', this.config.leaseTtlMs, 'NX');
    if (got !== 'OK') return;
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
