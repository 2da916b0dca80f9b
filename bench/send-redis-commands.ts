/**
 * Redis commands per message on the whole send path: POST /api/v1/messages,
 * queued, handed to a relay, reported sent and delivered (a stand-in relay at
 * the actor level answers each send at once). INFO commandstats is summed over
 * the masters before and after a fixed number of sends; what the process runs
 * while idle (lease renewals, heartbeats, timer polls, and on a cluster the
 * reads of idle shards) is measured first over as long and subtracted. On one
 * Redis server (REDIS_URL) and, with REDIS_CLUSTER_NODES set, on that Redis
 * Cluster too. Run it on a Redis nothing else uses:
 * REDIS_URL=redis://127.0.0.1:6379 MONGODB_URL=mongodb://127.0.0.1:27017/relaybox [REDIS_CLUSTER_NODES=127.0.0.1:7100] npm run bench:redis-commands
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { breakdown, commandCounts, commandsBetween, totalOf } from './redis-stats.ts';
import { StandInRelay } from '../test/support/stand-in-relay.ts';
import { signup, startTestApp } from '../test/support/test-app.ts';
import { sendMany, statusOf, wireRedis } from '../test/support/wire-budget.ts';

const messages = Number(process.env.BENCH_MESSAGES || 500);
const inFlight = 10;

async function measure(backend: 'redis+mongo' | 'redis-cluster+mongo') {
  const t = await startTestApp(backend);
  const redis = wireRedis(
    backend,
    backend === 'redis-cluster+mongo' ? process.env.REDIS_CLUSTER_NODES! : process.env.REDIS_URL!,
  );
  await redis.ping();
  try {
    const org = await signup(t);
    const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 50 });
    await relay.connect();
    await sleep(2_000);
    const answering = relay.deliverEverySend();
    const started = Date.now();
    const before = await commandCounts(redis);
    const ids = await sendMany(t, org.ownerToken, {
      count: messages,
      inFlight,
      to: (n) => `+1415555${String(1000 + (n % 500))}`,
      body: 'count',
    });
    while ((await statusOf(t, org.ownerToken, ids.at(-1)!)) !== 'delivered' || answering.reported() < messages)
      await sleep(50);
    await sleep(500); // the last events and acknowledgements
    const busy = commandsBetween(before, await commandCounts(redis));
    const busyMs = Date.now() - started;
    answering.stop();
    // The same length of time with nothing sent: what the processes run anyway.
    const idleBefore = await commandCounts(redis);
    await sleep(busyMs);
    const idle = commandsBetween(idleBefore, await commandCounts(redis));
    const per = new Map([...busy].map(([name, n]) => [name, (n - (idle.get(name) ?? 0)) / messages]));
    relay.close();
    return {
      backend,
      messages,
      seconds: busyMs / 1000,
      total: totalOf(busy) / messages,
      idlePerSecond: totalOf(idle) / (busyMs / 1000),
      net: [...per.values()].filter((n) => n >= 0.05).reduce((a, b) => a + b, 0),
      per: breakdown(new Map([...per].filter(([, n]) => n >= 0.05)), 2),
    };
  } finally {
    redis.disconnect();
    await t.stop();
  }
}

const rows = [await measure('redis+mongo')];
if (process.env.REDIS_CLUSTER_NODES) rows.push(await measure('redis-cluster+mongo'));
console.log(`\nRedis commands per message, POST to delivered (${messages} messages, ${inFlight} requests in flight)\n`);
console.log(
  '| backend | seconds | commands per message (all) | idle commands/s | per message, idle subtracted | of which |',
);
console.log('|---|---|---|---|---|---|');
for (const r of rows)
  console.log(
    `| ${r.backend} | ${r.seconds.toFixed(1)} | ${r.total.toFixed(1)} | ${Math.round(r.idlePerSecond)} | ${r.net.toFixed(1)} | ${r.per} |`,
  );
process.exit(0);
