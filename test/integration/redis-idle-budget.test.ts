import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { breakdown, commandCounts, commandsBetween, totalOf } from '../../bench/redis-stats.ts';
import type { RedisClient } from '../../src/runtime/redis-client.ts';
import { fileServiceUrl } from '../support/services.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { signup, startTestApp, type AnyBackend } from '../support/test-app.ts';
import { sleep } from '../support/until.ts';
import { deliverOne, wireBudget, wireRedis } from '../support/wire-budget.ts';

/**
 * The wire budget of docs/performance-budget.md, counted: Redis commands a
 * second that one process (every role, on Redis + MongoDB wire) runs while
 * nothing is sent, after an organization signed up, its relay came online
 * and one message was delivered. Counted with `INFO commandstats` deltas
 * (a script's own commands count too; the INFO commands themselves do not),
 * so the Redis it runs on must have nothing else running on it meanwhile,
 * as in CI. Fails above the budget that document gives. On one Redis server
 * and on a Redis Cluster (`REDIS_CLUSTER_NODES`), summed over its masters;
 * there the replicas' own acknowledgements to their masters (`REPLCONF ACK`,
 * one a second per replica whatever the clients do) are Redis's own traffic
 * and left out.
 */

const redisUrl = await fileServiceUrl('REDIS_URL');
const mongoUrl = await fileServiceUrl('MONGODB_URL');
const clusterNodes = await fileServiceUrl('REDIS_CLUSTER_NODES');

/** How long the idle commands are counted over: long enough for the slowest steady work (the heartbeat, the stream and event reads' waits). */
const windowMs = 6_000;

async function idleRun(t: TestContext, backend: AnyBackend, redis: RedisClient): Promise<void> {
  const budget = wireBudget('idle Redis commands a second per process');
  const app = await startTestApp(backend);
  t.after(() => app.stop());
  t.after(() => redis.disconnect());
  const org = await signup(app);
  const relay = new StandInRelay(app, org.orgId, org.teamId, { capacity: 10 });
  t.after(() => relay.close());
  await relay.connect();
  await deliverOne(app, org.ownerToken, relay, '+14155551000', 'before the quiet');
  // The work the send left behind (events handled, acknowledgements) ends before the count starts.
  await sleep(1_500);
  const before = await commandCounts(redis);
  const started = Date.now();
  await sleep(windowMs);
  const ran = commandsBetween(before, await commandCounts(redis));
  const seconds = (Date.now() - started) / 1000;
  const perSecond = totalOf(ran) / seconds;
  const detail = breakdown(new Map([...ran].map(([name, n]) => [name, n / seconds])), 1);
  t.diagnostic(`${backend} idle: ${perSecond.toFixed(1)} Redis commands/s (${detail})`);
  assert.ok(
    perSecond <= budget,
    `an idle process on ${backend} ran ${perSecond.toFixed(1)} Redis commands/s, over the budget of ${budget} (${detail})`,
  );
}

test('an idle process runs no more Redis commands a second than the wire budget (one Redis)', async (t) => {
  if (!redisUrl || !mongoUrl) return t.skip('REDIS_URL and MONGODB_URL not set');
  await idleRun(t, 'redis+mongo', wireRedis('redis+mongo', redisUrl));
});

test('an idle process runs no more Redis commands a second than the wire budget (Redis Cluster)', async (t) => {
  if (!clusterNodes || !mongoUrl) return t.skip('REDIS_CLUSTER_NODES and MONGODB_URL not set');
  await idleRun(t, 'redis-cluster+mongo', wireRedis('redis-cluster+mongo', clusterNodes));
});
