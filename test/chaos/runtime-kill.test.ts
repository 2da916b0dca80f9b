import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { testRuntimeConfig, waitFor } from '../integration/runtime-contract.ts';
import { createLogger } from '../../src/log.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisTransport } from '../../src/runtime/redis-transport.ts';
import { childEnv, serviceUrl } from '../support/services.ts';
import { counterSender } from './counter-protocol.ts';

const keys = 1_000;
const perKey = 10;

function startWorker(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/chaos/counter-worker.ts'], {
    env: { ...childEnv(), ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`worker exited with ${code} before it was ready`)));
  });
}

test('10,000 messages over 2 workers, one killed with SIGKILL mid-run: nothing lost, order kept, counted once', async (t) => {
  const url = await serviceUrl(t, 'REDIS_URL');
  if (!url) return;
  const cfg = testRuntimeConfig({ defaultShards: 8, leaseTtlMs: 1_500, leaseRenewMs: 300, rebalanceMs: 200 });
  const prefix = cfg.keyPrefix;
  const env = {
    REDIS_URL: url,
    RUNTIME_KEY_PREFIX: prefix,
    RUNTIME_SHARDS: '8',
    RUNTIME_LEASE_TTL_MS: '1500',
    RUNTIME_LEASE_RENEW_MS: '300',
    RUNTIME_REBALANCE_MS: '200',
    RUNTIME_READ_BLOCK_MS: '100',
    LOG_LEVEL: 'warn',
  };
  const redis = new Redis(url);
  const workers: ChildProcess[] = [];
  const sender = new RedisTransport(url, cfg, `sender-${prefix}`, createLogger('silent'));
  t.after(async () => {
    for (const w of workers) w.kill('SIGKILL');
    await sender.stop();
    const leftovers = await redis.keys(`${prefix}:*`);
    if (leftovers.length) await redis.del(...leftovers);
    redis.disconnect();
  });

  workers.push(await startWorker({ ...env, NODE_ID: `${prefix}-w1` }));
  workers.push(await startWorker({ ...env, NODE_ID: `${prefix}-w2` }));
  await sender.start([counterSender], { consume: false });
  const stat = async (field: string) => Number((await redis.hget(`${prefix}:chaos:stats`, field)) ?? 0);

  let acknowledged = 0;
  let killedAt = -1;
  for (let seq = 1; seq <= perKey; seq++) {
    const round: Promise<string>[] = [];
    for (let k = 0; k < keys; k++) round.push(sender.send('counter', `key-${k}`, { kind: 'add', seq }));
    await Promise.all(round);
    acknowledged += round.length;
    if (killedAt < 0 && (await stat('handled')) >= 3_000) {
      killedAt = await stat('handled');
      workers[0]!.kill('SIGKILL');
      await once(workers[0]!, 'exit');
    }
    await sleep(300);
  }
  if (killedAt < 0) {
    await waitFor(async () => (await stat('handled')) >= 3_000, 30_000, '3,000 handled');
    killedAt = await stat('handled');
    workers[0]!.kill('SIGKILL');
  }

  await waitFor(async () => (await stat('handled')) >= acknowledged, 60_000, 'every acknowledged message handled');
  await sleep(500); // anything handled twice after this point would show as a duplicate, never as a count
  const counts = await redis.hgetall(`${prefix}:chaos:counts`);
  const handled = await stat('handled');
  const report = {
    sent: acknowledged,
    handled,
    lost: acknowledged - handled,
    killedAfter: killedAt,
    duplicatesSkipped: await stat('duplicates'),
    orderViolations: await stat('orderViolations'),
    deadLetters: (await sender.deadLetters('counter')).length,
  };
  console.log(`chaos report: ${JSON.stringify(report)}`);
  assert.equal(report.lost, 0, 'no acknowledged send was lost');
  assert.equal(report.orderViolations, 0, 'per-key order kept');
  assert.equal(report.deadLetters, 0);
  assert.equal(Object.keys(counts).length, keys);
  for (let k = 0; k < keys; k++)
    assert.equal(Number(counts[`key-${k}`]), perKey, `key-${k} counted exactly ${perKey} times`);
});
