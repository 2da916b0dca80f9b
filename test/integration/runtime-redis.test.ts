import { Redis } from 'ioredis';
import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import type { RuntimeConfig } from '../../src/runtime/types.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ActorDefinition } from '../../src/runtime/types.ts';
import { createLogger } from '../../src/log.ts';
import { redisConnection } from '../../src/runtime/redis-connection.ts';
import { RedisTransport } from '../../src/runtime/redis-transport.ts';
import { fileServiceUrl, serviceUrl } from '../support/services.ts';
import {
  cleaningUp,
  counterProtocol,
  runtimeContract,
  shelfActors,
  testRuntimeConfig,
  waitFor,
} from './runtime-contract.ts';
import { defineActor } from '../../src/runtime/actor.ts';

export const redisUrl = await fileServiceUrl('REDIS_URL');

export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
}

if (redisUrl) {
  const url = redisUrl;
  runtimeContract('redis', async (cfg) => {
    return cleaningUp(
      new RedisTransport(url, cfg, `node-${Math.random().toString(36).slice(2, 8)}`, createLogger('silent')),
      () => deletePrefix(url, cfg.keyPrefix),
    );
  });
} else {
  test('runtime contract: redis', async (t) => {
    await serviceUrl(t, 'REDIS_URL');
  });
}

describe('redis transport: durability and shard ownership', () => {
  const log = createLogger('silent');
  const make = (cfg: RuntimeConfig, node: string) => new RedisTransport(redisUrl!, cfg, node, log);
  /** Counter actors that note each tick's id, and when it ran in `at`. */
  const counting = (seen: string[], at?: Map<string, number>): ActorDefinition[] => [
    defineActor(counterProtocol, {
      handlers: {
        tick: (ctx) => {
          seen.push(ctx.id);
          at?.set(ctx.id, Date.now());
        },
        add: () => {},
        echo: () => {},
        stall: () => {},
        explode: () => {},
        note: () => {},
      },
    }),
  ];

  /** A connection to read the test's keys, which are deleted after it. */
  const ownKeys = (t: TestContext, cfg: RuntimeConfig) => {
    t.after(() => deletePrefix(redisUrl!, cfg.keyPrefix));
    const redis = new Redis(redisUrl!);
    t.after(() => redis.disconnect());
    return redis;
  };

  test('a timer set before a worker restart fires once after it', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig();
    t.after(() => deletePrefix(redisUrl!, cfg.keyPrefix));
    const seen: string[] = [];
    const first = make(cfg, 'w-before');
    await first.start(counting(seen), { consume: true });
    const id = await first.send('counter', 'k', { kind: 'tick' }, { delayMs: 800 });
    await first.stop();
    assert.equal(seen.length, 0, 'not fired while the first worker ran');
    const second = make(cfg, 'w-after');
    await second.start(counting(seen), { consume: true });
    t.after(() => second.stop());
    await waitFor(() => seen.includes(id), 5_000, 'timer fired after restart');
    await sleep(300);
    assert.deepEqual(seen, [id]);
  });

  test("a delayed send keeps its due time (epoch ms) as its score in the shard's timer set: 33 days ahead it waits there, and it is delivered once the clock reaches it", async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    // The clock is moved on below by rewriting the scores behind the worker's back: only its sweep of the timers sees that.
    const cfg = testRuntimeConfig({ defaultShards: 1, timerPollMs: 20 });
    const redis = ownKeys(t, cfg);
    const seen: string[] = [];
    const rt = make(cfg, 'w-far');
    await rt.start(counting(seen), { consume: true });
    t.after(() => rt.stop());
    const delayMs = 33 * 24 * 3600 * 1000;
    const sentFrom = Date.now();
    // A plain send is a ZADD; one sent once by id (what a handler's timers are) goes through the enqueue-once script.
    const plain = await rt.send('counter', 'far', { kind: 'tick' }, { delayMs });
    const once = await rt.send('counter', 'far', { kind: 'tick' }, { delayMs, onceId: `far-${Math.random()}` });
    const sentTo = Date.now();
    const timers = rt.keys.shard('counter', 0).timers;
    const stored = await redis.zrange(timers, '0', '-1', 'WITHSCORES');
    const dueAt = new Map<string, number>();
    for (let i = 0; i < stored.length; i += 2) dueAt.set(JSON.parse(stored[i]!).id, Number(stored[i + 1]));
    for (const id of [plain, once]) {
      const at = dueAt.get(id)!;
      assert.ok(at >= sentFrom + delayMs && at <= sentTo + delayMs, `${id} due ${at - sentFrom} ms after the send`);
    }
    // Many polls of the due timers (every 20 ms here): neither moves to the stream before its score.
    await sleep(600);
    assert.deepEqual(seen, []);
    assert.equal(await redis.zcard(timers), 2);
    for (const member of await redis.zrange(timers, '0', '-1'))
      await redis.zadd(timers, 'XX', String(Date.now()), member);
    await waitFor(() => seen.length === 2, 5_000, 'both delivered once due');
    assert.deepEqual(seen.sort(), [plain, once].sort());
    assert.equal(await redis.zcard(timers), 0);
  });

  test("a delayed send from another process wakes the shard's owner at its due time, an earlier one moving the wake-up closer; nothing sweeps the timers meanwhile", async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 1 });
    assert.ok(cfg.timerPollMs >= 60_000, 'the backstop sweep is out of the way');
    ownKeys(t, cfg);
    const seen = new Map<string, number>();
    const owner = make(cfg, 'w-owner');
    await owner.start(counting([], seen), { consume: true });
    t.after(() => owner.stop());
    const front = make(cfg, 'w-front');
    await front.start(counting([]), { consume: false });
    t.after(() => front.stop());
    const sent = Date.now();
    const later = await front.send('counter', 'k', { kind: 'tick' }, { delayMs: 1_500 });
    // Earlier than the shard's earliest timer: the owner's wake-up moves closer (sent once by id: the enqueue-once script).
    const sooner = await front.send(
      'counter',
      'k',
      { kind: 'tick' },
      { delayMs: 300, onceId: `soon-${Math.random()}` },
    );
    await waitFor(() => seen.has(sooner), 2_000, 'the sooner timer delivered');
    const soonerAfter = seen.get(sooner)! - sent;
    assert.ok(soonerAfter >= 300 && soonerAfter < 1_000, `the sooner timer ran ${soonerAfter} ms after its send`);
    assert.equal(seen.has(later), false, 'the later timer waits for its own time');
    await waitFor(() => seen.has(later), 3_000, 'the later timer delivered');
    const laterAfter = seen.get(later)! - sent;
    assert.ok(laterAfter >= 1_500 && laterAfter < 2_300, `the later timer ran ${laterAfter} ms after its send`);
  });

  test("a frontend's query goes to the worker holding its key's shard and is answered there at once, not behind the shard's stream; with no worker it waits its turn", async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 1 });
    const redis = ownKeys(t, cfg);
    const front = make(cfg, 'q-front');
    await front.start(shelfActors(), { consume: false });
    t.after(() => front.stop());
    // No worker holds the shard: the query is enqueued, and answered once one takes it.
    const first = front.ask<{ puts: number; readOnly: boolean }>('shelf', 'k', { kind: 'count' }, 10_000);
    await sleep(100);
    const worker = make(cfg, 'q-worker');
    await worker.start(shelfActors(), { consume: true });
    t.after(() => worker.stop());
    assert.deepEqual(await first, { puts: 0, readOnly: false });
    assert.equal(await redis.get(`${cfg.keyPrefix}:lease:shelf:0`), 'q-worker');
    for (let i = 0; i < 40; i++) await front.send('shelf', 'k', { kind: 'put', pauseMs: 50 });
    await waitFor(async () => (await front.ask<{ puts: number }>('shelf', 'k', { kind: 'count' })).puts >= 1);
    // Two seconds of puts wait in the stream and the mailbox: in order, the count would be 40.
    const early = await front.ask<{ puts: number; readOnly: boolean }>('shelf', 'k', { kind: 'count' });
    assert.equal(early.readOnly, true, "answered from the worker's activated state");
    assert.ok(early.puts < 40, `answered before the backlog drained (${early.puts} of 40 puts handled)`);
    await waitFor(async () => (await front.ask<{ puts: number }>('shelf', 'k', { kind: 'count' })).puts === 40);
  });

  test('two workers split the shards; graceful stop hands them over at once', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 8 });
    const redis = ownKeys(t, cfg);
    const owners = async () => {
      const values = await Promise.all(
        Array.from({ length: 8 }, (_, i) => redis.get(`${cfg.keyPrefix}:lease:counter:${i}`)),
      );
      const byOwner: Record<string, number> = {};
      for (const v of values) if (v) byOwner[v] = (byOwner[v] ?? 0) + 1;
      return byOwner;
    };
    const a = make(cfg, 'w-a');
    const b = make(cfg, 'w-b');
    await a.start(counting([]), { consume: true });
    await b.start(counting([]), { consume: true });
    await waitFor(
      async () => {
        const o = await owners();
        return o['w-a'] === 4 && o['w-b'] === 4;
      },
      10_000,
      'four shards each',
    );
    await a.stop();
    assert.equal((await owners())['w-a'], undefined, 'leases released on stop');
    await waitFor(async () => (await owners())['w-b'] === 8, 5_000, 'the survivor takes every shard');
    await b.stop();
  });

  test('a transport on the shared connection leaves it open when it stops; one on its own closes it', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig();
    t.after(() => deletePrefix(redisUrl!, cfg.keyPrefix));
    const shared = redisConnection(redisUrl, cfg);
    t.after(() => shared.client.quit());
    const onShared = new RedisTransport(shared, cfg, 'w-shared', log);
    await onShared.start(counting([]), { consume: false });
    assert.equal(onShared.connection, shared.client, 'it sends on the connection it was given');
    await onShared.stop();
    assert.equal(await shared.client.ping(), 'PONG', 'the shared connection outlives the transport');
    const onItsOwn = make(cfg, 'w-own');
    await onItsOwn.start(counting([]), { consume: false });
    await onItsOwn.stop();
    await waitFor(() => onItsOwn.connection.status === 'end', 2_000, 'its own connection closed with it');
  });

  test('entries a dead worker read but never acknowledged are handled by the next owner', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 1, leaseTtlMs: 600, leaseRenewMs: 100 });
    t.after(() => deletePrefix(redisUrl!, cfg.keyPrefix));
    const stuck: ActorDefinition[] = [
      defineActor(counterProtocol, {
        handlers: {
          tick: () => new Promise(() => {}),
          add: () => {},
          echo: () => {},
          stall: () => {},
          explode: () => {},
          note: () => {},
        },
      }),
    ];
    const dying = make(cfg, 'w-dying');
    await dying.start(stuck, { consume: true });
    const id = await dying.send('counter', 'k', { kind: 'tick' });
    await sleep(300); // read, never finished
    // A crash: the worker stops renewing and never acknowledges; its connections just go.
    const crashed = dying as unknown as {
      stopping: boolean;
      loops: NodeJS.Timeout[];
      cmd: Redis;
      reader: Redis;
      sub: Redis;
    };
    crashed.stopping = true;
    t.after(() => {
      for (const timer of crashed.loops) clearInterval(timer);
      for (const conn of [crashed.cmd, crashed.reader, crashed.sub]) conn.disconnect();
    });
    const seen: string[] = [];
    const heir = make(cfg, 'w-heir');
    await heir.start(counting(seen), { consume: true });
    t.after(() => heir.stop());
    await waitFor(() => seen.includes(id), 5_000, 'redelivered to the heir');
  });

  test('an entry another worker read after the shard moved to this one is claimed and handled by its owner', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 1, leaseCheckMs: 200 });
    const redis = ownKeys(t, cfg);
    const seen: string[] = [];
    const owner = make(cfg, 'w-owner');
    await owner.start(counting(seen), { consume: true });
    t.after(() => owner.stop());
    const warm = await owner.send('counter', 'k', { kind: 'tick' });
    await waitFor(() => seen.includes(warm), 5_000, 'the owner reads its shard');
    const streams = [];
    for (const key of await redis.keys(`${cfg.keyPrefix}*counter*`))
      if ((await redis.type(key)) === 'stream') streams.push(key);
    assert.equal(streams.length, 1, streams.join(', '));
    const stream = streams[0]!;
    const env = { id: 'am_orphan', type: 'counter', key: 'k', msg: { kind: 'tick' }, sentAt: Date.now() };
    // Appended and read at once by another worker, as a blocking read already waiting when the lease moved reads it.
    await redis
      .multi()
      .xadd(stream, '*', 'e', JSON.stringify(env))
      .xreadgroup('GROUP', 'workers', 'w-gone', 'COUNT', 1, 'STREAMS', stream, '>')
      .exec();
    const pending = (await redis.xpending(stream, 'workers', '-', '+', 10)) as Array<[string, string, number, number]>;
    assert.deepEqual(
      pending.map(([, consumer]) => consumer),
      ['w-gone'],
      "the entry waits in the other worker's pending list",
    );
    await waitFor(() => seen.includes('am_orphan'), 5_000, 'claimed and handled by the owner');
    await waitFor(async () => (await redis.xlen(stream)) === 0, 5_000, 'acknowledged and deleted');
  });

  /**
   * A worker of one shard whose `stall` handlers wait until `open` (started
   * on `keys` keys at once), with its acknowledgement script calls counted.
   */
  async function gatedWorker(t: TestContext, node: string, keys: number) {
    const cfg = testRuntimeConfig({ defaultShards: 1 });
    const redis = ownKeys(t, cfg);
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let started = 0;
    const worker = make(cfg, node);
    await worker.start(
      [
        defineActor(counterProtocol, {
          handlers: {
            stall: async () => {
              started++;
              await gate;
            },
            tick: () => {},
            add: () => {},
            echo: () => {},
            explode: () => {},
            note: () => {},
          },
        }),
      ],
      { consume: true },
    );
    const acks: string[][] = [];
    const cmd = worker.connection;
    const ack = cmd.ack;
    // The client's pipelines (auto-pipelining) copy the function and call it on themselves: only the caller's call counts.
    cmd.ack = function (this: unknown, stream, group, ...ids) {
      if (this === cmd) acks.push(ids);
      return ack.call(this, stream, group, ...ids);
    };
    // One key each: as many handlers running at once, each its own mailbox batch.
    for (let i = 0; i < keys; i++) await worker.send('counter', `k${i}`, { kind: 'stall', ms: 0 });
    await waitFor(() => started === keys, 5_000, `${keys} handlers running`);
    const stream = `${cfg.keyPrefix}:counter:0`;
    const pending = async () => ((await redis.xpending(stream, 'workers')) as [number])[0];
    return { worker, open, acks, left: () => redis.xlen(stream), pending };
  }

  test('the entries of one shard whose handlers end together are acknowledged and deleted in one script call', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const { worker, open, acks, left, pending } = await gatedWorker(t, 'w-acks', 6);
    t.after(() => worker.stop());
    open();
    await waitFor(async () => (await left()) === 0, 5_000, 'every entry deleted');
    assert.equal(acks.length, 1, `acknowledgement calls: ${JSON.stringify(acks)}`);
    assert.equal(acks[0]!.length, 6);
    assert.equal(await pending(), 0, 'nothing left pending');
  });

  test('a stop while handlers run acknowledges what they finish before the connection closes', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const { worker, open, acks, left, pending } = await gatedWorker(t, 'w-stop', 5);
    const stopped = worker.stop();
    await sleep(100);
    open();
    await stopped;
    assert.equal(acks.flat().length, 5, 'all five acknowledged');
    assert.equal(await left(), 0, 'and deleted');
    assert.equal(await pending(), 0, 'nothing left pending');
  });
});
