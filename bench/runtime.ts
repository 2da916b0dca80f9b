/**
 * Messages per second from send to handled on the Redis transport, with one
 * and with two worker processes. Run: REDIS_URL=redis://127.0.0.1:6379 npm run bench:runtime
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { benchActor } from './runtime-protocol.ts';
import { RedisTransport } from '../src/runtime/redis-transport.ts';

const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const messages = Number(process.env.BENCH_MESSAGES || 50_000);
const keys = 1_000;
const timeLimitMs = 120_000;

function startWorker(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/runtime-worker.ts'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => c.toString().includes('ready') && resolve(child));
    child.once('exit', (code) => reject(new Error(`bench worker exited with ${code}`)));
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

async function run(workerCount: number) {
  const prefix = `bench-${Math.random().toString(36).slice(2, 8)}`;
  const env = { REDIS_URL: url, RUNTIME_KEY_PREFIX: prefix, RUNTIME_SHARDS: '16', RUNTIME_REBALANCE_MS: '200', LOG_LEVEL: 'warn' };
  const redis = new Redis(url);
  const workers: ChildProcess[] = [];
  for (let i = 0; i < workerCount; i++) workers.push(await startWorker({ ...env, NODE_ID: `${prefix}-w${i}` }));
  await sleep(1_500); // let the workers settle their shares of the shards
  const config = { ...loadConfig({ ...env }).runtime };
  const sender = new RedisTransport(url, config, `${prefix}-sender`, createLogger('warn'));
  await sender.start([benchActor(() => {})], { consume: false });

  const started = Date.now();
  const inFlightSends = 500;
  let next = 0;
  await Promise.all(Array.from({ length: inFlightSends }, async () => {
    while (next < messages) {
      const i = next++;
      await sender.send('bench', `key-${i % keys}`, { kind: 'ping', t: Date.now() });
    }
  }));
  const sentMs = Date.now() - started;
  while (Number(await redis.get(`${prefix}:bench:handled`)) < messages) {
    if (Date.now() - started > timeLimitMs) throw new Error('bench did not finish in time');
    await sleep(20);
  }
  const seconds = (Date.now() - started) / 1000;
  const latency = (await redis.lrange(`${prefix}:bench:latency`, 0, -1)).map(Number).sort((a, b) => a - b);
  for (const w of workers) w.kill('SIGTERM');
  await sender.stop();
  const leftovers = await redis.keys(`${prefix}:*`);
  if (leftovers.length) await redis.del(...leftovers);
  redis.disconnect();
  return { workers: workerCount, messages, seconds, sendSeconds: sentMs / 1000, rate: messages / seconds, p50: percentile(latency, 50), p99: percentile(latency, 99) };
}

const rows = [];
for (const n of [1, 2]) rows.push(await run(n));
console.log(`\nRedis transport, send to handled (${messages} messages over ${keys} actors, redis ${url})\n`);
console.log('| workers | messages | seconds | msgs/s | p50 ms | p99 ms |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.workers} | ${r.messages} | ${r.seconds.toFixed(2)} | ${Math.round(r.rate)} | ${r.p50} | ${r.p99} |`);
process.exit(0);
