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
import { redisClient, parseClusterNodes } from '../src/runtime/redis-client.ts';
import { commandCounts } from './redis-stats.ts';
import { StandInRelay } from '../test/support/stand-in-relay.ts';
import { signup, startTestApp, type AnyBackend } from '../test/support/test-app.ts';

const messages = Number(process.env.BENCH_MESSAGES || 500);
const inFlight = 10;

const delta = (after: Map<string, number>, before: Map<string, number>) =>
  new Map([...after].map(([name, n]) => [name, n - (before.get(name) ?? 0)]));

async function measure(backend: AnyBackend) {
  const t = await startTestApp(backend);
  const redis =
    backend === 'redis-cluster+mongo'
      ? redisClient({ clusterNodes: parseClusterNodes(process.env.REDIS_CLUSTER_NODES!) })
      : redisClient({ url: process.env.REDIS_URL! });
  await redis.ping();
  try {
    const org = await signup(t);
    const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 50 });
    await relay.connect();
    await sleep(2_000);
    let answered = 0;
    const answering = setInterval(() => {
      for (const frame of relay.sends.slice(answered))
        void relay.report(frame.messageId, 'sent').then(() => relay.report(frame.messageId, 'delivered'));
      answered = relay.sends.length;
    }, 5);
    const started = Date.now();
    const before = await commandCounts(redis);
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < messages) {
          next++;
          const res = await t.request('POST', '/api/v1/messages', {
            token: org.ownerToken,
            body: { to: `+1415555${String(1000 + (next % 500))}`, body: 'count' },
          });
          if (res.status !== 201) throw new Error(`send: ${res.status} ${res.text}`);
          ids.push(res.body.id);
        }
      }),
    );
    const delivered = async () =>
      (await t.request('GET', `/api/v1/messages/${ids.at(-1)}/status`, { token: org.ownerToken })).body.status ===
      'delivered';
    while (!(await delivered()) || answered < messages) await sleep(50);
    await sleep(500); // the last events and acknowledgements
    const busy = delta(await commandCounts(redis), before);
    const busyMs = Date.now() - started;
    clearInterval(answering);
    // The same length of time with nothing sent: what the processes run anyway.
    const idleBefore = await commandCounts(redis);
    await sleep(busyMs);
    const idle = delta(await commandCounts(redis), idleBefore);
    const per = [...busy]
      .map(([name, n]) => [name, (n - (idle.get(name) ?? 0)) / messages] as const)
      .filter(([, n]) => n >= 0.05)
      .sort((a, b) => b[1] - a[1]);
    relay.close();
    return {
      backend,
      messages,
      seconds: busyMs / 1000,
      total: [...busy.values()].reduce((a, b) => a + b, 0) / messages,
      idlePerSecond: [...idle.values()].reduce((a, b) => a + b, 0) / (busyMs / 1000),
      per,
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
for (const r of rows) {
  const sum = r.per.reduce((a, [, n]) => a + n, 0);
  console.log(
    `| ${r.backend} | ${r.seconds.toFixed(1)} | ${r.total.toFixed(1)} | ${Math.round(r.idlePerSecond)} | ${sum.toFixed(1)} | ${r.per.map(([name, n]) => `${name} ${n.toFixed(2)}`).join(', ')} |`,
  );
}
process.exit(0);
