import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Cluster } from 'ioredis';
import { createLogger } from '../../src/log.ts';
import { RedisBroadcast } from '../../src/runtime/broadcast.ts';
import { RedisRateLimiter } from '../../src/runtime/rate-limiter.ts';
import { RedisKeys } from '../../src/runtime/redis-keys.ts';
import { RedisTransport } from '../../src/runtime/redis-transport.ts';
import { writeReplicated } from '../../src/runtime/replicated-write.ts';
import type { ScriptedRedis } from '../../src/runtime/scripts.ts';
import { deleteClusterPrefix, fileClusterSeeds } from '../support/redis-cluster.ts';
import { serviceUrl } from '../support/services.ts';
import { cleaningUp, counterProtocol, runtimeContract, testRuntimeConfig, waitFor } from './runtime-contract.ts';
import { defineActor } from '../../src/runtime/actor.ts';

const seeds = await fileClusterSeeds();

if (seeds) {
  const clusterNodes = seeds;
  runtimeContract('redis cluster', async (cfg) => {
    return cleaningUp(
      new RedisTransport(
        { clusterNodes },
        cfg,
        `node-${Math.random().toString(36).slice(2, 8)}`,
        createLogger('silent'),
      ),
      () => deleteClusterPrefix(clusterNodes, cfg.keyPrefix),
    );
  });
} else {
  test('runtime contract: redis cluster', async (t) => {
    await serviceUrl(t, 'REDIS_CLUSTER_NODES');
  });
}

describe(
  'redis cluster: key layout, pub/sub and the single-node guard',
  { skip: seeds ? false : 'REDIS_CLUSTER_NODES not set' },
  () => {
    const log = createLogger('silent');

    test("a shard's keys share one slot, and a type's shards spread over the masters", async (t) => {
      const cluster = new Cluster(seeds!);
      t.after(() => cluster.disconnect());
      const keys = new RedisKeys('rt', true);
      const slotOf = async (key: string) => Number(await cluster.call('CLUSTER', 'KEYSLOT', key));
      for (let i = 0; i < 16; i++) {
        const shard = keys.shard('tenant', i);
        const slots = new Set(
          await Promise.all(
            [shard.stream, shard.timers, shard.lease, shard.deadLetters, shard.sent('m-1')].map(slotOf),
          ),
        );
        assert.equal(slots.size, 1, `shard ${i}: ${[...slots].join(', ')}`);
      }
      assert.equal(
        new Set(await Promise.all([keys.events, `${keys.events}:seen`, `${keys.events}:seen:e-1`].map(slotOf))).size,
        1,
        'the event stream, its appended ids and the markers older versions wrote',
      );
      const ranges = (await cluster.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
      const masterOf = (slot: number) => ranges.find(([from, to]) => slot >= from && slot <= to)?.[2].join(':');
      const masters = new Set(
        await Promise.all(
          Array.from({ length: 16 }, async (_, i) => masterOf(await slotOf(keys.shard('tenant', i).stream))),
        ),
      );
      assert.equal(masters.size, 3, `the 16 shards of a type land on ${[...masters].join(', ')}`);
    });

    test('REDIS_URL pointed at a cluster node is refused with an error that names REDIS_CLUSTER_NODES', async () => {
      const seed = seeds![0]!;
      const transport = new RedisTransport(`redis://${seed.host}:${seed.port}`, testRuntimeConfig(), 'w-wrong', log);
      await assert.rejects(
        transport.start(
          [
            defineActor(counterProtocol, {
              handlers: {
                tick: () => {},
                add: () => {},
                echo: () => {},
                stall: () => {},
                explode: () => {},
                note: () => {},
              },
            }),
          ],
          { consume: false },
        ),
        /REDIS_CLUSTER_NODES/,
      );
      await transport.stop();
    });

    test('a broadcast reaches every process and counts each confirmation (sharded channels)', async (t) => {
      const prefix = `bctest-${Math.random().toString(36).slice(2, 8)}`;
      const nodes = ['a', 'b', 'c'].map((n) => new RedisBroadcast({ clusterNodes: seeds! }, prefix, n, 2_000, log));
      t.after(() => Promise.all(nodes.map((b) => b.close())));
      const heard: string[] = [];
      await Promise.all(
        nodes.map((b, i) => b.subscribe('keys', (payload) => void heard.push(`${i}:${JSON.stringify(payload)}`))),
      );
      const confirmed = await nodes[0]!.publish('keys', { revoked: 'k1' });
      assert.equal(confirmed, 3);
      assert.deepEqual(heard.sort(), ['0:{"revoked":"k1"}', '1:{"revoked":"k1"}', '2:{"revoked":"k1"}']);
    });

    test('the rate limiter shares one budget across frontends', async (t) => {
      const prefix = `rltest-${Math.random().toString(36).slice(2, 8)}`;
      const one = new Cluster(seeds!);
      const two = new Cluster(seeds!);
      t.after(async () => {
        one.disconnect();
        two.disconnect();
        await deleteClusterPrefix(seeds!, prefix);
      });
      const a = new RedisRateLimiter(one, prefix);
      const b = new RedisRateLimiter(two, prefix);
      const policy = { perMinute: 60, burst: 3 };
      const allowed = [];
      for (const limiter of [a, b, a, b]) allowed.push((await limiter.take('org-1', policy)).allowed);
      assert.deepEqual(allowed, [true, true, true, false]);
    });

    test('an ask is answered to the asking node over sharded pub/sub', async (t) => {
      const cfg = testRuntimeConfig();
      t.after(() => deleteClusterPrefix(seeds!, cfg.keyPrefix));
      const echo = [
        defineActor(counterProtocol, {
          handlers: {
            tick: () => {},
            add: () => {},
            echo: (_ctx, msg) => msg.value,
            stall: () => {},
            explode: () => {},
            note: () => {},
          },
        }),
      ];
      const worker = new RedisTransport({ clusterNodes: seeds! }, cfg, 'w-worker', log);
      const frontend = new RedisTransport({ clusterNodes: seeds! }, cfg, 'w-frontend', log);
      await worker.start(echo, { consume: true });
      await frontend.start(echo, { consume: false });
      t.after(async () => {
        await frontend.stop();
        await worker.stop();
      });
      assert.equal(await frontend.ask('counter', 'k', { kind: 'echo', value: 'hello' }), 'hello');
      const received: unknown[] = [];
      worker.onNodeMessage((payload) => received.push(payload));
      await frontend.publishToNode('w-worker', { frame: 1 });
      await waitFor(() => received.length === 1, 5_000, 'the addressed message');
      assert.deepEqual(received, [{ frame: 1 }]);
    });

    test('the writes of one turn to one master share one WAIT; each write gets its own replies', async (t) => {
      const cluster = new Cluster(seeds!);
      const keys = Array.from({ length: 12 }, (_, i) => `rt-wait-${process.pid}-${Date.now()}:{k${i}}`);
      t.after(async () => {
        await Promise.all(keys.map((k) => cluster.del(k)));
        cluster.disconnect();
      });
      await cluster.ping();
      const masters = cluster.nodes('master');
      const waits = async () => {
        let calls = 0;
        for (const node of masters)
          calls += Number(/cmdstat_wait:calls=(\d+)/.exec(await node.info('commandstats'))?.[1] ?? 0);
        return calls;
      };
      const slotOf = async (key: string) => Number(await cluster.call('CLUSTER', 'KEYSLOT', key));
      const mastersOfKeys = new Set(await Promise.all(keys.map(async (k) => cluster.slots[await slotOf(k)]![0])));
      assert.ok(mastersOfKeys.size >= 2, `the keys land on ${[...mastersOfKeys].join(', ')}`);
      const redis = cluster as unknown as ScriptedRedis;

      let before = await waits();
      const together = await Promise.all(keys.map((k) => writeReplicated(redis, k, 1_000, (p) => p.incr(k))));
      assert.deepEqual(
        together,
        keys.map(() => [1]),
      );
      assert.equal((await waits()) - before, mastersOfKeys.size, 'one WAIT for each master the turn wrote to');

      before = await waits();
      for (const k of keys.slice(0, 3))
        assert.deepEqual(await writeReplicated(redis, k, 1_000, (p) => p.incr(k).incr(k)), [2, 3]);
      assert.equal((await waits()) - before, 3, 'a write alone in its turn has its own WAIT');

      // A write whose commands cannot be made fails alone; the others of its turn go.
      const broken = writeReplicated(redis, keys[4]!, 1_000, () => {
        throw new Error('no such write');
      });
      const sound = writeReplicated(redis, keys[5]!, 1_000, (p) => p.incr(keys[5]!));
      await assert.rejects(broken, /no such write/);
      assert.deepEqual(await sound, [2]);
    });
  },
);
