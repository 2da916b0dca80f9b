/**
 * What the webhook benches share: a fresh app on a backend, in this process,
 * and the receiver (bench/webhook-sink.ts) in a process of its own.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { fork } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { domainEvent } from '../src/events/event-stream.ts';
import { createLogger } from '../src/log.ts';
import { discardRunData } from '../test/support/discard-data.ts';

export type WebhookBackend = 'embedded' | 'redis+mongo';

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** A `message.queued` event of `orgId`, numbered `n`. */
export function messageEvent(orgId: string, n: number) {
  return domainEvent(
    'message.queued',
    { tenantId: orgId },
    {
      id: `msg_${n}`,
      to: '+14155550100',
      from: null,
      body: `bench ${n}`,
      status: 'queued',
      conversationId: 'conv_bench',
    },
  );
}

export type Sink = Awaited<ReturnType<typeof receiver>>;

/** The receiver runs in its own process (bench/webhook-sink.ts): on one event loop with the service it would take the service's CPU. */
async function receiver() {
  const child = fork(fileURLToPath(new URL('./webhook-sink.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let answer: ((m: Record<string, unknown>) => void) | undefined;
  const first = new Promise<string>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the receiver exited with ${code}`)));
    answer = (m) => resolve(m.url as string);
  });
  child.on('message', (m: Record<string, unknown>) => answer?.(m));
  const url = await first;
  const ask = <T>(op: 'count' | 'reset' | 'latencies') =>
    new Promise<T>((resolve) => {
      answer = (m) => resolve((op === 'latencies' ? m.latencies : m.count) as T);
      child.send({ op });
    });
  const count = () => ask<number>('count');
  return {
    url,
    count,
    reset: () => ask<number>('reset'),
    latencies: () => ask<number[]>('latencies'),
    /** Until the receiver has counted `n` deliveries (5 minutes at most). */
    async waitFor(n: number): Promise<void> {
      const deadline = Date.now() + 300_000;
      while ((await count()) < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    },
    close: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.disconnect();
      }),
  };
}

/** A fresh app on `backend` (its own data directory, key prefix and database) and a receiver; `close` discards both. */
export async function startBenchApp(
  backend: WebhookBackend,
  logLevel: 'warn' | 'error' = 'warn',
): Promise<{
  app: App;
  sink: Sink;
  suffix: string;
  close(): Promise<void>;
}> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-bench-'));
  const suffix = randomUUID().slice(0, 8);
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    RUNTIME_KEY_PREFIX: `bw${suffix}`,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    LOG_LEVEL: logLevel,
  };
  if (backend === 'redis+mongo') {
    env.REDIS_URL = process.env.REDIS_URL!;
    const url = new URL(process.env.MONGODB_URL!);
    url.pathname = `/relaybox_bw${suffix}`;
    env.MONGODB_URL = url.toString();
  }
  const config = loadConfig(env);
  const app: App = await createApp(config, createLogger(logLevel), { consume: true });
  const sink = await receiver();
  return {
    app,
    sink,
    suffix,
    async close() {
      await app.close();
      await sink.close();
      await discardRunData(config, dataDir);
    },
  };
}
