import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import { breakdown, commandCounts, commandsBetween, totalOf } from '../../bench/redis-stats.ts';
import type { RedisClient } from '../../src/runtime/redis-client.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { fileServiceUrl } from '../support/services.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { storeOperations } from '../support/store-operations.ts';
import { apiKey, signup, startTestApp, withDatabase } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';
import { deliverOne, sendMany, statusOf, wireBudget, wireRedis } from '../support/wire-budget.ts';

/**
 * The per-message rows of the wire budget of docs/performance-budget.md,
 * counted: Redis commands and MongoDB commands per delivered message on
 * Redis + MongoDB wire, what the process runs while idle subtracted. One
 * process with every role, an organization, its relay online (a stand-in at
 * the actor level that reports each send sent and delivered as it comes),
 * the credentials and the conversation warm; then 200 accepted sends to that
 * conversation, at most 64 requests in flight, counted from the first until
 * every one is delivered and the process has settled (no MongoDB command and
 * at most twice the idle rate of Redis commands and 5, for a second). Redis
 * commands are `INFO commandstats` deltas (a script's own commands count
 * too, INFO does not), summed over the masters of a cluster, the replicas'
 * `REPLCONF ACK` left out, so the Redis must have nothing else running on it
 * meanwhile, as in CI. MongoDB commands are what the driver's command
 * monitoring saw start (`MongoStore.observedCommands`), a retry or a
 * FerretDB one-at-a-time path counted as the commands it sends. Fails above
 * the budget that document gives; prints every figure by command so a note
 * can quote it.
 */

const redisUrl = await fileServiceUrl('REDIS_URL');
const mongoUrl = await fileServiceUrl('MONGODB_URL');
const clusterNodes = await fileServiceUrl('REDIS_CLUSTER_NODES');
const pathsUrl = await fileServiceUrl('MONGODB_PATHS_URL');

const messages = 200;
const inFlight = 64;
const to = '+14155550100';
/** 25 characters, as the embedded budget's. */
const body = 'Your code is 123456. Bye!';
/** How long the idle commands are counted over, before the sends. */
const idleWindowMs = 4_000;
/** A window with no MongoDB command and at most twice the idle rate of Redis commands (and 5): the sends' work is done. */
const settleWindowMs = 1_000;

const minus = (a: Map<string, number>, b: Map<string, number>) =>
  new Map([...a].map(([name, n]) => [name, n - (b.get(name) ?? 0)]).filter(([, n]) => n !== 0) as [string, number][]);
const scaled = (counts: Map<string, number>, by: number) =>
  new Map([...counts].map(([name, n]) => [name, n * by] as const));

/** Starts a count: what it answers ends it, with the commands each server was sent meanwhile (and the store adapter's own tally of its operations), and how long that took. */
function counter(redis: RedisClient, store: MongoStore) {
  return async () => {
    const redisBefore = await commandCounts(redis);
    const mongoBefore = store.observedCommands();
    const adapterBefore = await storeOperations();
    const started = Date.now();
    return async () => ({
      redis: commandsBetween(redisBefore, await commandCounts(redis)),
      mongo: minus(store.observedCommands(), mongoBefore),
      adapter: minus(await storeOperations(), adapterBefore),
      seconds: (Date.now() - started) / 1000,
    });
  };
}

/** What `init` found the MongoDB server to be, and so which paths the store's writes and id-list reads took. */
function storePaths(store: MongoStore): string {
  const q = store.quirks;
  if (!q.scansIdLists && !q.writesOneStatementEach && !q.updatesReadThenWrite)
    return "MongoDB's paths: bulk writes as one command, id lists read with $in, updates compare-and-set";
  return [
    'FerretDB paths:',
    q.writesOneStatementEach
      ? 'bulk writes one statement a command (update, else insert),'
      : 'bulk writes as one command,',
    q.scansIdLists ? 'id lists read and written one id a command,' : 'id lists read with $in,',
    q.updatesReadThenWrite
      ? 'updates not compare-and-set (Store.updatesCompareAndSet false: owner changes insert versions; not on this path)'
      : 'updates compare-and-set',
  ].join(' ');
}

/**
 * With `pathsUrl` the service stores on that server, in a database of its
 * own, taking MongoDB's paths (MONGODB_PATHS=mongodb), instead of on
 * MONGODB_URL's with the paths its server calls for; its MongoDB budget is
 * then the row of `where` on MongoDB's paths.
 */
async function perMessageRun(
  t: TestContext,
  backend: 'redis+mongo' | 'redis-cluster+mongo',
  redis: RedisClient,
  where: string,
  pathsUrl?: string,
): Promise<void> {
  const redisBudget = wireBudget(`Redis commands per delivered message (${where})`);
  const mongoBudget = wireBudget(
    `MongoDB commands per delivered message (${where}${pathsUrl ? ", MongoDB's paths" : ''})`,
  );
  const onPaths: Record<string, string> = pathsUrl
    ? {
        MONGODB_URL: withDatabase(pathsUrl, `relaybox_p${randomUUID().slice(0, 8)}`),
        MONGODB_PATHS: 'mongodb',
      }
    : {};
  // Timers that would read the store in the middle of the count wait for minutes.
  const app = await startTestApp(
    backend,
    { CREDENTIAL_CACHE_MS: '600000', TENANT_SWEEP_MS: '600000', WEBHOOK_SWEEP_MS: '600000', ...onPaths },
    { observeStoreCommands: true },
  );
  t.after(() => app.stop());
  t.after(() => redis.disconnect());
  const store = app.app.store;
  assert.ok(store instanceof MongoStore, 'the wire backend stores in MongoDB');
  const org = await signup(app);
  const key = await apiKey(app, org, 'member');
  const relay = new StandInRelay(app, org.orgId, org.teamId, { capacity: inFlight });
  t.after(() => relay.close());
  await relay.connect();
  // Credentials cached, the conversation stored, the tenant and relay actors awake.
  await deliverOne(app, key, relay, to, 'warm 1');
  await deliverOne(app, key, relay, to, 'warm 2');
  await sleep(1_500);
  const count = counter(redis, store);

  const idleCount = await count();
  await sleep(idleWindowMs);
  const idle = await idleCount();
  const idleRedisPerSecond = totalOf(idle.redis) / idle.seconds;

  const answering = relay.deliverEverySend();
  const busyCount = await count();
  const ids = await sendMany(app, key, { count: messages, inFlight, to: () => to, body });
  await until('every send reported sent and delivered', async () => answering.reported() >= messages, 60_000);
  await until(
    'the process to settle',
    async () => {
      const window = await count();
      await sleep(settleWindowMs);
      const seen = await window();
      return totalOf(seen.mongo) === 0 && totalOf(seen.redis) <= idleRedisPerSecond * seen.seconds * 2 + 5;
    },
    30_000,
  );
  const busy = await busyCount();
  answering.stop();

  // Counted; now read back (these reads are not in the count).
  const statuses = new Map<string, number>();
  for (let i = 0; i < ids.length; i += 20)
    for (const status of await Promise.all(ids.slice(i, i + 20).map((id) => statusOf(app, key, id))))
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
  assert.deepEqual(Object.fromEntries(statuses), { delivered: messages }, 'every message delivered');

  const idleShare = busy.seconds / idle.seconds;
  const net = (during: Map<string, number>, whileIdle: Map<string, number>) =>
    scaled(minus(during, scaled(whileIdle, idleShare)), 1 / messages);
  const redisPer = net(busy.redis, idle.redis);
  const mongoPer = net(busy.mongo, idle.mongo);
  const adapterPer = net(busy.adapter, idle.adapter);
  const redisTotal = totalOf(redisPer);
  const mongoTotal = totalOf(mongoPer);
  t.diagnostic(
    `${backend}: ${messages} messages delivered in ${busy.seconds.toFixed(1)} s; idle ${idleRedisPerSecond.toFixed(1)} Redis commands/s and ${(totalOf(idle.mongo) / idle.seconds).toFixed(1)} MongoDB commands/s (${idle.seconds.toFixed(1)} s), subtracted`,
  );
  t.diagnostic(`${backend}: ${redisTotal.toFixed(2)} Redis commands per delivered message (${breakdown(redisPer, 2)})`);
  t.diagnostic(
    `${backend}: ${mongoTotal.toFixed(2)} MongoDB commands per delivered message (${breakdown(mongoPer, 2)}); ${storePaths(store)}`,
  );
  t.diagnostic(
    `${backend}: the store adapter's operations per delivered message, as it counts them: ${breakdown(adapterPer, 2)}`,
  );
  assert.ok(
    redisTotal <= redisBudget,
    `a delivered message on ${backend} cost ${redisTotal.toFixed(2)} Redis commands, over the budget of ${redisBudget} (${breakdown(redisPer, 2)})`,
  );
  assert.ok(
    mongoTotal <= mongoBudget,
    `a delivered message on ${backend} cost ${mongoTotal.toFixed(2)} MongoDB commands, over the budget of ${mongoBudget} (${breakdown(mongoPer, 2)})`,
  );
}

test('a delivered message costs no more Redis and MongoDB commands than the wire budget (one Redis)', async (t) => {
  if (!redisUrl || !mongoUrl) return t.skip('REDIS_URL and MONGODB_URL not set');
  await perMessageRun(t, 'redis+mongo', wireRedis('redis+mongo', redisUrl), 'one Redis');
});

test("a delivered message costs no more MongoDB commands than the wire budget on MongoDB's paths (one Redis)", async (t) => {
  if (!redisUrl || !pathsUrl) return t.skip('REDIS_URL and MONGODB_PATHS_URL not set');
  await perMessageRun(t, 'redis+mongo', wireRedis('redis+mongo', redisUrl), 'one Redis', pathsUrl);
});

test('a delivered message costs no more Redis and MongoDB commands than the wire budget (Redis Cluster)', async (t) => {
  if (!clusterNodes || !mongoUrl) return t.skip('REDIS_CLUSTER_NODES and MONGODB_URL not set');
  await perMessageRun(t, 'redis-cluster+mongo', wireRedis('redis-cluster+mongo', clusterNodes), 'Redis Cluster');
});
