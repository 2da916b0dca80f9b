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
async function open(t: TestContext, backend: 'redis' | 'cluster', dedupeTtlMs = 60_000): Promise<Opened> {
  const redis = withScripts(backend === 'cluster' ? new Cluster(seeds!) : new Redis(redisUrl!));
  const name = `append-once-${process.pid}-${Math.random().toString(36).slice(2, 8)}:events`;
  const key = backend === 'cluster' ? `{${name}}` : name;
  let calls = 0;
  const pipeline = redis.pipeline.bind(redis);
  redis.pipeline = ((...args: Parameters<typeof pipeline>) => {
    const p = pipeline(...args) as ScriptedPipeline;
    const append = p.appendEventsOnce.bind(p);
    p.appendEventsOnce = (...a) => {
      calls++;
      return append(...a);
    };
    return p;
  }) as typeof redis.pipeline;
  t.after(async () => {
    await redis.del(key, `${key}:seen`);
    await redis.quit();
  });
  const stream = new RedisEventStream(redis, key, dedupeTtlMs, undefined, undefined, backend === 'cluster' ? 1_000 : 0);
  return { stream, redis, key, appendCalls: () => calls };
}

const event = (id: string, n = 0): DomainEvent =>
  domainEvent('message.queued', { tenantId: 'org_1', teamId: 'team_1' }, { id: `msg_${n}` }, id);

/** The event ids the stream holds, in order. */
async function appendedIds(o: Opened): Promise<string[]> {
  const entries = (await o.redis.xrange(o.key, '-', '+')) as Array<[string, string[]]>;
  return entries.map(([, fields]) => (JSON.parse(fields[1]!) as DomainEvent).id);
}

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
      assert.deepEqual(await appendedIds(o), ['evt_1', 'evt_2', 'evt_3', 'evt_4']);
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
