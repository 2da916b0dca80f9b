import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { domainEvent, type DomainEvent } from '../../src/events/event-stream.ts';
import { RedisEventStream } from '../../src/events/redis-event-stream.ts';
import { withScripts, type ScriptedPipeline, type ScriptedRedis } from '../../src/runtime/scripts.ts';
import { fileClusterSeeds } from '../support/redis-cluster.ts';
import { fileServiceUrl } from '../support/services.ts';

const redisUrl = await fileServiceUrl('REDIS_URL');
const seeds = await fileClusterSeeds();

interface Opened {
  stream: RedisEventStream;
  redis: ScriptedRedis;
  key: string;
  /** Script calls that appended events `once`, so far. */
  appendCalls(): number;
}

/** The event stream on a key of its own (tagged on a cluster, whose appends wait for a replica), counting its append script calls. */
async function open(
  t: TestContext,
  backend: 'redis' | 'cluster',
  dedupeTtlMs = 60_000,
  grouped = true,
): Promise<Opened> {
  const redis = withScripts(backend === 'cluster' ? new Cluster(seeds!) : new Redis(redisUrl!));
  const name = `append-once-${process.pid}-${Math.random().toString(36).slice(2, 8)}:events`;
  const key = backend === 'cluster' ? `{${name}}` : name;
  let calls = 0;
  const pipeline = redis.pipeline.bind(redis);
  redis.pipeline = ((...args: Parameters<typeof pipeline>) => {
    const p = pipeline(...args) as ScriptedPipeline;
    const append = p.appendEvents.bind(p);
    p.appendEvents = (...a) => {
      calls++;
      return append(...a);
    };
    return p;
  }) as typeof redis.pipeline;
  t.after(async () => {
    await redis.del(key, `${key}:seen`);
    await redis.quit();
  });
  const replicaWaitMs = backend === 'cluster' ? 1_000 : 0;
  const stream = new RedisEventStream(redis, key, dedupeTtlMs, undefined, undefined, replicaWaitMs, undefined, grouped);
  return { stream, redis, key, appendCalls: () => calls };
}

const event = (id: string, n = 0): DomainEvent =>
  domainEvent('message.queued', { tenantId: 'org_1', teamId: 'team_1' }, { id: `msg_${n}` }, id);

/** The stream's entries: each the ids of the events it holds, in order. */
async function appendedEntries(o: Opened): Promise<string[][]> {
  const entries = (await o.redis.xrange(o.key, '-', '+')) as Array<[string, string[]]>;
  return entries.map(([, fields]) => {
    const field = (name: string) => fields[fields.indexOf(name) + 1]!;
    const ids = (JSON.parse(field('es')) as DomainEvent[]).map((e) => e.id);
    assert.equal(Number(field('n')), ids.length, 'an entry says how many events it holds');
    return ids;
  });
}

/** The event ids the stream holds, in order. */
const appendedIds = async (o: Opened) => (await appendedEntries(o)).flat();

const backends: Array<'redis' | 'cluster'> = [];
if (redisUrl) backends.push('redis');
if (seeds) backends.push('cluster');

for (const backend of backends) {
  describe(`event stream on ${backend === 'redis' ? 'one Redis' : 'a Redis Cluster'}: appends once by event id`, () => {
    test('a batch that holds an event id twice appends it once, and an id appended before is not appended again', async (t) => {
      const o = await open(t, backend);
      await o.stream.append([event('evt_a', 1), event('evt_b', 2), event('evt_a', 3)], { once: true });
      assert.deepEqual(await appendedIds(o), ['evt_a', 'evt_b']);
      await o.stream.append([event('evt_b', 4), event('evt_c', 5)], { once: true });
      assert.deepEqual(await appendedIds(o), ['evt_a', 'evt_b', 'evt_c']);
      assert.deepEqual((await o.redis.zrange(`${o.key}:seen`, '0', '-1')).sort(), ['evt_a', 'evt_b', 'evt_c']);
      // Without `once` an append is plain: the same id goes in again.
      await o.stream.append([event('evt_a', 6)]);
      assert.equal((await appendedIds(o)).length, 4);
    });

    test('appends of one tick go in one script call, each id once across callers', async (t) => {
      const o = await open(t, backend);
      await Promise.all([
        o.stream.append([event('evt_1'), event('evt_2')], { once: true }),
        o.stream.append([event('evt_2'), event('evt_3')], { once: true }),
        o.stream.append([event('evt_4')], { once: true }),
      ]);
      assert.equal(o.appendCalls(), 1);
      assert.deepEqual(await appendedEntries(o), [['evt_1', 'evt_2', 'evt_3', 'evt_4']], 'one entry');
    });

    test('a read gives each event of an entry its own position, and acknowledging a batch acknowledges its entries', async (t) => {
      const o = await open(t, backend);
      // An entry an older version appended: one event, in the field `e`, no counter.
      await o.redis.xadd(o.key, '*', 'e', JSON.stringify(event('evt_0')));
      await o.stream.append([event('evt_1'), event('evt_2'), event('evt_3')], { once: true });
      await o.stream.append([event('evt_4')], { once: true });
      const read = await o.stream.read('g', 'c1', 256);
      assert.deepEqual(
        read.map((r) => r.event.id),
        ['evt_0', 'evt_1', 'evt_2', 'evt_3', 'evt_4'],
      );
      assert.equal(new Set(read.map((r) => r.position)).size, 5);
      const lagOf = async () => (await o.stream.lag()).find((g) => g.group === 'g');
      assert.equal((await lagOf())?.events, 3, 'from an entry without a counter: entries are counted');
      await o.stream.ack(
        'g',
        read.slice(0, 4).map((r) => r.position),
      );
      assert.equal(((await o.redis.xpending(o.key, 'g')) as [number])[0], 1, 'two entries acknowledged, one not');
      assert.equal((await lagOf())?.events, 1, 'from the counters: the events of the entry left');
      await o.stream.ack(
        'g',
        read.slice(4).map((r) => r.position),
      );
      assert.deepEqual(await o.stream.read('g', 'c1', 256), []);
      assert.deepEqual(await lagOf(), { group: 'g', events: 0, oldestAgeSeconds: 0 });
    });

    test("pending events are counted from the entries' counters: a tick of many events is as many", async (t) => {
      const o = await open(t, backend);
      assert.deepEqual(await o.stream.read('g', 'c1', 16), []);
      await o.stream.append(
        Array.from({ length: 40 }, (_, i) => event(`evt_${i}`)),
        { once: true },
      );
      await o.stream.append([event('evt_40'), event('evt_41')], { once: true });
      const first = await o.stream.read('g', 'c1', 16);
      assert.equal(first.length, 40, 'one entry: a read takes it whole');
      assert.equal((await o.stream.lag()).find((g) => g.group === 'g')?.events, 42, '40 read, 2 not read');
      await o.stream.ack(
        'g',
        first.map((r) => r.position),
      );
      assert.equal((await o.stream.lag()).find((g) => g.group === 'g')?.events, 2);
    });

    test('a read of small entries tops up to its count: a quiet stream of single events reads as many as asked', async (t) => {
      const o = await open(t, backend);
      assert.deepEqual(await o.stream.read('g', 'c1', 16), []);
      for (let i = 0; i < 120; i++) await o.stream.append([event(`evt_${i}`)]);
      const first = await o.stream.read('g', 'c1', 100);
      assert.deepEqual(
        first.map((r) => r.event.id),
        Array.from({ length: 100 }, (_, i) => `evt_${i}`),
        'seven entries first, then the 93 the count still lacks',
      );
      await o.stream.ack(
        'g',
        first.map((r) => r.position),
      );
      const rest = await o.stream.read('g', 'c1', 100);
      assert.equal(rest.length, 20, 'the rest, and no more than the stream holds');
      assert.equal(rest[0]!.event.id, 'evt_100');
      await o.stream.ack(
        'g',
        rest.map((r) => r.position),
      );
      assert.equal(((await o.redis.xpending(o.key, 'g')) as [number])[0], 0, 'every entry read is acknowledged');
    });

    test('with entry batches off each event is an entry of its own, as versions before read them, and this version reads them too', async (t) => {
      const o = await open(t, backend, 60_000, false);
      await o.stream.append([event('evt_1'), event('evt_2'), event('evt_1')], { once: true });
      await o.stream.append([event('evt_3')]);
      const entries = (await o.redis.xrange(o.key, '-', '+')) as Array<[string, string[]]>;
      // How a reader of a version before takes an entry's event.
      const readBefore = ([, fields]: [string, string[]]) =>
        (JSON.parse(fields[fields.indexOf('e') + 1] ?? 'null') as DomainEvent).id;
      assert.deepEqual(entries.map(readBefore), ['evt_1', 'evt_2', 'evt_3'], 'an entry each, once by id');
      const read = await o.stream.read('g', 'c1', 16);
      assert.deepEqual(
        read.map((r) => r.event.id),
        ['evt_1', 'evt_2', 'evt_3'],
      );
      assert.equal((await o.stream.lag()).find((g) => g.group === 'g')?.events, 3, 'counted from their counters');
      await o.stream.ack(
        'g',
        read.slice(0, 1).map((r) => r.position),
      );
      assert.equal((await o.stream.lag()).find((g) => g.group === 'g')?.events, 2);
    });

    test('an event an older version marked with its own key (`<stream>:seen:<id>`) is not appended again', async (t) => {
      const o = await open(t, backend);
      // Expires by itself, as the markers did.
      await o.redis.set(`${o.key}:seen:evt_old`, '1', 'PX', 10_000);
      await o.stream.append([event('evt_old'), event('evt_new')], { once: true });
      assert.deepEqual(await appendedIds(o), ['evt_new']);
      await o.stream.append([event('evt_old')], { once: true });
      assert.deepEqual(await appendedIds(o), ['evt_new']);
    });

    test('ids older than the dedupe window leave the seen set (at most once a second), and may be appended again', async (t) => {
      const o = await open(t, backend, 200);
      await o.stream.append([event('evt_x')], { once: true });
      await sleep(1_100);
      await o.stream.append([event('evt_y')], { once: true });
      assert.deepEqual(await o.redis.zrange(`${o.key}:seen`, '0', '-1'), ['evt_y'], 'evt_x trimmed');
      await o.stream.append([event('evt_x')], { once: true });
      assert.deepEqual(await appendedIds(o), ['evt_x', 'evt_y', 'evt_x']);
    });
  });
}

if (backends.length === 0)
  test('event stream appends once: Redis', async (t) => {
    t.skip('REDIS_URL not set');
  });
