/**
 * Messages per second from send to handled on the Redis transport, with one
 * and with two worker processes; on one Redis server and, when
 * REDIS_CLUSTER_NODES is set, on that Redis Cluster too, side by side, with
 * the Redis commands each message cost (INFO commandstats summed over the
 * masters, before and after: run it on a Redis nothing else uses).
 * Run: REDIS_URL=redis://127.0.0.1:6379 [REDIS_CLUSTER_NODES=127.0.0.1:7100] npm run bench:runtime
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchActor, benchKeys, benchRedis } from './runtime-protocol.ts';
import { RedisTransport } from '../src/runtime/redis-transport.ts';
import { isCluster, parseClusterNodes, type RedisTarget } from '../src/runtime/redis-client.ts';
import { commandCounts } from './redis-stats.ts';

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const clusterNodes = process.env.REDIS_CLUSTER_NODES;
const messages = Number(process.env.BENCH_MESSAGES || 50_000);
const keys = 1_000;
const timeLimitMs = 120_000;

interface Backend {
  name: string;
  target: RedisTarget;
  env: Record<string, string>;
}

const backends: Backend[] = [{ name: 'redis', target: { url }, env: { REDIS_URL: url } }];
if (clusterNodes)
  backends.push({
    name: 'cluster',
    target: { clusterNodes: parseClusterNodes(clusterNodes) },
    env: { REDIS_CLUSTER_NODES: clusterNodes },
  });

function startWorker(env: Record<string, string>): Promise<ChildProcess> {
  // The worker gets only the backend it is run on.
  const { REDIS_URL: _url, REDIS_CLUSTER_NODES: _nodes, ...rest } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/runtime-worker.ts'], {
    env: { ...rest, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`bench worker exited with ${code}`)));
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function run(backend: Backend, workerCount: number) {
  const prefix = `bench-${Math.random().toString(36).slice(2, 8)}`;
  const env = {
    ...backend.env,
    RUNTIME_KEY_PREFIX: prefix,
    RUNTIME_SHARDS: '16',
    RUNTIME_REBALANCE_MS: '200',
    LOG_LEVEL: 'warn',
  };
  const redis = benchRedis(backend.target);
  await redis.ping();
  const bench = benchKeys(prefix);
  const workers: ChildProcess[] = [];
  for (let i = 0; i < workerCount; i++) workers.push(await startWorker({ ...env, NODE_ID: `${prefix}-w${i}` }));
  await sleep(1_500); // let the workers settle their shares of the shards
  const config = { ...loadConfig({ ...env }).runtime };
  const sender = new RedisTransport(backend.target, config, `${prefix}-sender`, createLogger('warn'));
  await sender.start([benchActor(() => {})], { consume: false });

  const before = await commandCounts(redis);
  const started = Date.now();
  const inFlightSends = 500;
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlightSends }, async () => {
      while (next < messages) {
        const i = next++;
        await sender.send('bench', `key-${i % keys}`, { kind: 'ping', t: Date.now() });
      }
    }),
  );
  const sentMs = Date.now() - started;
  while (Number(await redis.get(bench.handled)) < messages) {
    if (Date.now() - started > timeLimitMs) throw new Error('bench did not finish in time');
    await sleep(20);
  }
  const seconds = (Date.now() - started) / 1000;
  const after = await commandCounts(redis);
  const latency = (await redis.lrange(bench.latency, 0, -1)).map(Number).sort((a, b) => a - b);
  for (const w of workers) w.kill('SIGTERM');
  await sender.stop();
  const perMessage = [...after]
    .map(([name, n]) => [name, (n - (before.get(name) ?? 0)) / messages] as const)
    .filter(([, n]) => n >= 0.01)
    .sort((a, b) => b[1] - a[1]);
  const leftovers = (
    await Promise.all((isCluster(redis) ? redis.nodes('master') : [redis]).map((node) => node.keys(`*${prefix}*`)))
  ).flat();
  for (const key of leftovers) await redis.del(key);
  redis.disconnect();
  return {
    backend: backend.name,
    workers: workerCount,
    messages,
    seconds,
    sendSeconds: sentMs / 1000,
    rate: messages / seconds,
    p50: percentile(latency, 50),
    p99: percentile(latency, 99),
    commands: perMessage.reduce((sum, [, n]) => sum + n, 0),
    top: perMessage
      .slice(0, 6)
      .map(([name, n]) => `${name} ${n.toFixed(2)}`)
      .join(', '),
  };
}

const rows = [];
for (const backend of backends) for (const n of [1, 2]) rows.push(await run(backend, n));
console.log(
  `\nRedis transport, send to handled (${messages} messages over ${keys} actors; redis ${url}${clusterNodes ? `, cluster ${clusterNodes}` : ''})\n`,
);
console.log(
  '| backend | workers | messages | seconds | msgs/s | p50 ms | p99 ms | Redis commands per message | the most run, per message |',
);
console.log('|---|---|---|---|---|---|---|---|---|');
for (const r of rows)
  console.log(
    `| ${r.backend} | ${r.workers} | ${r.messages} | ${r.seconds.toFixed(2)} | ${Math.round(r.rate)} | ${r.p50} | ${r.p99} | ${r.commands.toFixed(1)} | ${r.top} |`,
  );
process.exit(0);
