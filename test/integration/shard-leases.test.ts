import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/log.ts';
import { redisClient, type RedisTarget } from '../../src/runtime/redis-client.ts';
import { RedisKeys } from '../../src/runtime/redis-keys.ts';
import { withScripts, type ScriptedRedis } from '../../src/runtime/scripts.ts';
import { ShardLeases, type LeasedShard } from '../../src/runtime/shard-leases.ts';
import { deleteClusterPrefix, fileClusterSeeds } from '../support/redis-cluster.ts';
import { fileServiceUrl } from '../support/services.ts';
import { waitFor } from './runtime-contract.ts';

const redisUrl = await fileServiceUrl('REDIS_URL');
const seeds = await fileClusterSeeds();

/** What the holder saw: the shards it was given and the ones that left it, by stream. */
interface Holder {
  taken: string[];
  dropped: string[];
}

/** The leases of one worker over `shards` shards of one actor type, on `target`; stopped after the test. */
async function worker(
  t: TestContext,
  target: RedisTarget,
  keys: RedisKeys,
  node: string,
  shards: number,
  config = { leaseTtlMs: 1_000, shutdownGraceMs: 2_000 },
): Promise<{ leases: ShardLeases<LeasedShard>; seen: Holder; redis: ScriptedRedis }> {
  const redis = withScripts(redisClient(target, { lazyConnect: true }));
  await redis.connect();
  t.after(() => redis.disconnect());
  const seen: Holder = { taken: [], dropped: [] };
  const leases = new ShardLeases(redis, keys, node, config, createLogger('silent'), {
    shards: () => Array.from({ length: shards }, (_, index) => ({ type: 'counter', index })),
    stopping: () => false,
    open: (leased) => leased,
    taken: async (shard) => void seen.taken.push(shard.stream),
    dropped: (shard) => void seen.dropped.push(shard.stream),
  });
  return { leases, seen, redis };
}

function leaseSuite(name: string, target: RedisTarget | undefined, cleanup: (prefix: string) => Promise<void>): void {
  describe(`shard leases: ${name}`, { skip: target ? false : `${name} not configured` }, () => {
    const setup = (t: TestContext) => {
      const prefix = `leasetest-${Math.random().toString(36).slice(2, 10)}`;
      t.after(() => cleanup(prefix));
      return new RedisKeys(prefix, 'clusterNodes' in target!);
    };
    const holderOf = (redis: ScriptedRedis, keys: RedisKeys, index: number) =>
      redis.get(keys.shard('counter', index).lease);

    test('a lone worker takes every shard; a second one joining gets its fair share handed over', async (t) => {
      const keys = setup(t);
      const a = await worker(t, target!, keys, 'w-a', 4);
      await a.leases.heartbeat();
      await a.leases.rebalance();
      assert.equal(a.leases.owned.size, 4);
      assert.equal(a.seen.taken.length, 4, 'each shard readied once');
      for (let i = 0; i < 4; i++) assert.equal(await holderOf(a.redis, keys, i), 'w-a');

      const b = await worker(t, target!, keys, 'w-b', 4);
      await b.leases.heartbeat();
      await b.leases.rebalance();
      assert.equal(b.leases.owned.size, 0, 'nothing free while the first holds every lease');
      const before = [...a.leases.owned.values()];
      await a.leases.rebalance();
      assert.equal(a.leases.owned.size, 2, 'the first gives back what is above its share');
      const given = before.filter((s) => !a.leases.owned.has(s.stream));
      assert.deepEqual(a.seen.dropped.sort(), given.map((s) => s.stream).sort());
      for (const s of given) assert.equal(s.ownership.signal.aborted, true, 'ownership ends with the lease');
      await b.leases.rebalance();
      assert.deepEqual([...b.leases.owned.keys()].sort(), given.map((s) => s.stream).sort());
      for (const s of b.leases.owned.values()) assert.equal(await holderOf(b.redis, keys, s.index), 'w-b');
    });

    test('a lease another worker holds now is dropped at the next renewal, its ownership aborted', async (t) => {
      const keys = setup(t);
      const a = await worker(t, target!, keys, 'w-a', 2);
      await a.leases.heartbeat();
      await a.leases.rebalance();
      const [lost, kept] = [...a.leases.owned.values()];
      // The lease expired and another worker took it.
      await a.redis.set(lost!.lease, 'w-other', 'PX', 1_000);
      await a.leases.renew();
      assert.deepEqual([...a.leases.owned.keys()], [kept!.stream]);
      assert.deepEqual(a.seen.dropped, [lost!.stream]);
      assert.equal(lost!.ownership.signal.aborted, true);
      assert.equal(kept!.ownership.signal.aborted, false);
      assert.equal(await a.redis.get(lost!.lease), 'w-other', "the other worker's lease stays");
      assert.equal(Number(await a.redis.pttl(kept!.lease)) > 500, true, 'the kept lease renewed');
    });

    test('leaving gives every lease back and leaves the members; a lease held by another stays', async (t) => {
      const keys = setup(t);
      const a = await worker(t, target!, keys, 'w-a', 3);
      await a.leases.heartbeat();
      await a.leases.rebalance();
      const shards = [...a.leases.owned.values()];
      await a.redis.set(shards[0]!.lease, 'w-other', 'PX', 1_000);
      await a.leases.leave();
      assert.equal(a.leases.owned.size, 0);
      for (const s of shards) assert.equal(s.ownership.signal.aborted, true);
      assert.equal(await a.redis.get(shards[0]!.lease), 'w-other');
      for (const s of shards.slice(1)) assert.equal(await a.redis.get(s.lease), null);
      assert.equal(await a.redis.zscore(keys.members, 'w-a'), null);
    });

    test('a release waits for the in-flight entries, up to the shutdown grace', async (t) => {
      const keys = setup(t);
      const a = await worker(t, target!, keys, 'w-a', 2);
      await a.leases.heartbeat();
      await a.leases.rebalance();
      for (const s of a.leases.owned.values()) s.inFlight = 1;
      const b = await worker(t, target!, keys, 'w-b', 2);
      await b.leases.heartbeat();
      const releasing = a.leases.rebalance();
      await waitFor(() => [...a.leases.owned.values()].some((s) => s.draining), 2_000, 'a shard draining');
      const draining = [...a.leases.owned.values()].find((s) => s.draining)!;
      assert.equal(await holderOf(a.redis, keys, draining.index), 'w-a', 'held while its entries are in flight');
      assert.equal(draining.ownership.signal.aborted, false);
      draining.inFlight = 0;
      await releasing;
      assert.equal(draining.ownership.signal.aborted, true);
      assert.equal(await holderOf(a.redis, keys, draining.index), null);
      assert.equal(a.leases.owned.size, 1);
    });
  });
}

leaseSuite('redis', redisUrl ? { url: redisUrl } : undefined, async (prefix) => {
  const redis = new Redis(redisUrl!);
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});
leaseSuite('redis cluster', seeds ? { clusterNodes: seeds } : undefined, (prefix) =>
  deleteClusterPrefix(seeds!, prefix),
);
