import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { domainEvent, type EventStream } from '../../src/events/event-stream.ts';
import { RedisEventStream } from '../../src/events/redis-event-stream.ts';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { withScripts } from '../../src/runtime/scripts.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { fileServiceUrl } from '../support/services.ts';

const redisUrl = await fileServiceUrl('REDIS_URL');

async function embedded(t: TestContext): Promise<EventStream> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-lag-'));
  const store = new EmbeddedStore(dir);
  t.after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  return new StoreEventStream(store);
}

async function onRedis(t: TestContext): Promise<EventStream> {
  const redis = withScripts(new Redis(redisUrl!));
  const key = `lag-test-${process.pid}-${Date.now()}:events`;
  t.after(async () => {
    await redis.del(key);
    await redis.quit();
  });
  return new RedisEventStream(redis, key, 60_000);
}

const backends: Array<[string, (t: TestContext) => Promise<EventStream>]> = [['embedded store', embedded]];
if (redisUrl) backends.push(['Redis', onRedis]);

for (const [name, open] of backends) {
  test(`${name}: each group's events not yet handled (read or not) and the age of the oldest; none once acknowledged`, async (t) => {
    const stream = await open(t);
    const events = Array.from({ length: 5 }, (_, i) =>
      domainEvent('message.queued', { tenantId: 'org_1', teamId: 'team_1' }, { id: `msg_${i}` }),
    );
    assert.deepEqual(await stream.read('webhooks', 'c1', 10), [], 'the group exists and has read nothing');
    // Two appends: on Redis each is one entry, and a read takes whole entries.
    await stream.append(events.slice(0, 3));
    await stream.append(events.slice(3));
    await sleep(300);
    const read = await stream.read('webhooks', 'c1', 3);
    assert.equal(read.length, 3);
    const lagOf = async () => (await stream.lag()).find((g) => g.group === 'webhooks');
    const behind = await lagOf();
    assert.equal(behind?.events, 5, 'three read and not acknowledged, two not read');
    assert.ok(
      behind.oldestAgeSeconds >= 0.25 && behind.oldestAgeSeconds < 10,
      `oldest waited ${behind.oldestAgeSeconds} s`,
    );
    await stream.ack(
      'webhooks',
      read.map((r) => r.position),
    );
    assert.equal((await lagOf())?.events, 2);
    const rest = await stream.read('webhooks', 'c1', 10);
    await stream.ack(
      'webhooks',
      rest.map((r) => r.position),
    );
    assert.deepEqual(await lagOf(), { group: 'webhooks', events: 0, oldestAgeSeconds: 0 });
  });
}
