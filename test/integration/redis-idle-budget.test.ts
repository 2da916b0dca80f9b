import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test, type TestContext } from 'node:test';
import { commandCounts } from '../../bench/redis-stats.ts';
import { parseClusterNodes, redisClient, type RedisClient } from '../../src/runtime/redis-client.ts';
import { fileServiceUrl } from '../support/services.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { signup, startTestApp, type AnyBackend } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';

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

/** The "idle Redis commands a second per process" row of the wire budget. */
function idleBudget(): number {
  const doc = readFileSync(new URL('../../docs/performance-budget.md', import.meta.url), 'utf8');
  const section = doc.split(/^## /m).find((s) => s.startsWith('The wire budget\n'));
  assert.ok(section, 'docs/performance-budget.md has a "## The wire budget" section');
  const row = /^\| idle Redis commands a second per process \| ([\d.]+) \|/m.exec(section);
  assert.ok(row, 'the wire budget has an idle Redis commands row');
  return Number(row[1]);
}

/** How long the idle commands are counted over: long enough for the slowest steady work (the heartbeat, the stream and event reads' waits). */
const windowMs = 6_000;

async function idleRun(t: TestContext, backend: AnyBackend, redis: RedisClient): Promise<void> {
  const budget = idleBudget();
  const app = await startTestApp(backend);
  t.after(() => app.stop());
  t.after(() => redis.disconnect());
  const org = await signup(app);
  const relay = new StandInRelay(app, org.orgId, org.teamId, { capacity: 10 });
  t.after(() => relay.close());
  await relay.connect();
  const sent = await app.request('POST', '/api/v1/messages', {
    token: org.ownerToken,
    body: { to: '+14155551000', body: 'before the quiet' },
  });
  assert.equal(sent.status, 201, sent.text);
  await until('the message handed to the relay', async () => relay.sends.length === 1, 10_000);
  await relay.report(sent.body.id, 'sent');
  await relay.report(sent.body.id, 'delivered');
  await until(
    'the message delivered',
    async () =>
      (await app.request('GET', `/api/v1/messages/${sent.body.id}/status`, { token: org.ownerToken })).body.status ===
      'delivered',
    10_000,
  );
  // The work the send left behind (events handled, acknowledgements) ends before the count starts.
  await sleep(1_500);
  const before = await commandCounts(redis);
  const started = Date.now();
  await sleep(windowMs);
  const after = await commandCounts(redis);
  const seconds = (Date.now() - started) / 1000;
  const byCommand = [...after]
    .filter(([name]) => name !== 'info' && name !== 'replconf')
    .map(([name, n]) => [name, (n - (before.get(name) ?? 0)) / seconds] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
  const perSecond = byCommand.reduce((sum, [, n]) => sum + n, 0);
  const detail = byCommand.map(([name, n]) => `${name} ${n.toFixed(1)}`).join(', ');
  t.diagnostic(`${backend} idle: ${perSecond.toFixed(1)} Redis commands/s (${detail})`);
  assert.ok(
    perSecond <= budget,
    `an idle process on ${backend} ran ${perSecond.toFixed(1)} Redis commands/s, over the budget of ${budget} (${detail})`,
  );
}

test('an idle process runs no more Redis commands a second than the wire budget (one Redis)', async (t) => {
  if (!redisUrl || !mongoUrl) return t.skip('REDIS_URL and MONGODB_URL not set');
  await idleRun(t, 'redis+mongo', redisClient({ url: redisUrl }));
});

test('an idle process runs no more Redis commands a second than the wire budget (Redis Cluster)', async (t) => {
  if (!clusterNodes || !mongoUrl) return t.skip('REDIS_CLUSTER_NODES and MONGODB_URL not set');
  await idleRun(t, 'redis-cluster+mongo', redisClient({ clusterNodes: parseClusterNodes(clusterNodes) }));
});
