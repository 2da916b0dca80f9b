/**
 * Webhook delivery benchmark: events go into the organization's event stream
 * (as the send path's outbox publishes them), signed deliveries come out to a
 * local keep-alive receiver in another process. Prints deliveries/s at full speed, then the
 * event-to-delivery latency at half that rate, on the embedded default and,
 * when REDIS_URL and MONGODB_URL are set, on Redis + MongoDB wire.
 *
 *   npm run bench:webhooks   (BENCH_EVENTS, BENCH_WEBHOOKS, BENCH_SECONDS)
 *
 * BENCH_PROFILE=1 also prints, per backend, the store calls the full-speed
 * phase made per delivery and the time they took, by collection and operation.
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
import { isEntryPoint } from './entry-point.ts';

const events = Number(process.env.BENCH_EVENTS ?? 5_000);
const webhooks = Number(process.env.BENCH_WEBHOOKS ?? 4);
const seconds = Number(process.env.BENCH_SECONDS ?? 10);

const profiling = process.env.BENCH_PROFILE === '1';

/** Counts and times every store call, by collection and operation, by wrapping the collection class's methods. */
function profileStore(app: App): { reset(): void; report(deliveries: number): string } {
  const calls = new Map<string, { n: number; ms: number }>();
  const proto = Object.getPrototypeOf(app.store.collection('profile_probe')) as Record<string, unknown>;
  for (const op of [
    'insertOne',
    'insertMany',
    'findOne',
    'find',
    'count',
    'updateOne',
    'updateMany',
    'deleteOne',
    'deleteMany',
  ]) {
    const original = proto[op] as (...args: unknown[]) => Promise<unknown>;
    if (typeof original !== 'function' || (original as { profiled?: boolean }).profiled) continue;
    const wrapped = async function (this: { name: string }, ...args: unknown[]) {
      const started = performance.now();
      try {
        return await original.apply(this, args);
      } finally {
        const key = `${this.name}.${op}`;
        const c = calls.get(key) ?? { n: 0, ms: 0 };
        c.n++;
        c.ms += performance.now() - started;
        calls.set(key, c);
      }
    };
    (wrapped as { profiled?: boolean }).profiled = true;
    proto[op] = wrapped;
  }
  return {
    reset: () => calls.clear(),
    report: (deliveries) =>
      [...calls]
        .sort((a, b) => b[1].ms - a[1].ms)
        .slice(0, 10)
        .map(
          ([key, c]) =>
            `    ${key}: ${(c.n / deliveries).toFixed(3)} calls/delivery, ${Math.round(c.ms)} ms in all (${(c.ms / c.n).toFixed(1)} ms each)`,
        )
        .join('\n'),
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

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
  return {
    url,
    count: () => ask<number>('count'),
    reset: () => ask<number>('reset'),
    latencies: () => ask<number[]>('latencies'),
    close: () =>
      new Promise<void>((resolve) => {
        child.removeAllListeners('exit');
        child.once('exit', () => resolve());
        child.disconnect();
      }),
  };
}

export interface WebhookFigures {
  /** Signed deliveries per second with every event appended at once. */
  deliveriesPerSecond: number;
  /** Deliveries per second paced at half that rate, and the event-to-delivery latency there (none when `seconds` is 0). */
  halfRate?: { perSecond: number; p50Ms: number; p99Ms: number };
  storeCalls?: string;
}

/** `events` events to `webhooks` webhooks on `backend` (a fresh app in this process), then `seconds` at half the rate. */
export async function measureWebhooks(
  backend: 'embedded' | 'redis+mongo',
  opts: { events: number; webhooks: number; seconds: number },
): Promise<WebhookFigures> {
  const { events, webhooks, seconds } = opts;
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-bench-'));
  const suffix = randomUUID().slice(0, 8);
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    RUNTIME_KEY_PREFIX: `bw${suffix}`,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    LOG_LEVEL: 'warn',
  };
  if (backend === 'redis+mongo') {
    env.REDIS_URL = process.env.REDIS_URL!;
    const url = new URL(process.env.MONGODB_URL!);
    url.pathname = `/relaybox_bw${suffix}`;
    env.MONGODB_URL = url.toString();
  }
  const config = loadConfig(env);
  const app: App = await createApp(config, createLogger('warn'), { consume: true });
  const sink = await receiver();
  const orgId = `org_bench${suffix}`;
  for (let i = 0; i < webhooks; i++)
    await app.webhooks.service.create(orgId, { url: sink.url, events: ['message.queued'], secret: 'bench secret' });
  const event = (n: number) =>
    domainEvent(
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
  const waitFor = async (count: number) => {
    const deadline = Date.now() + 300_000;
    while ((await sink.count()) < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  };

  const profile = profiling ? profileStore(app) : undefined;
  profile?.reset();
  // Full speed: every event appended at once, timed until the last delivery.
  const started = performance.now();
  for (let i = 0; i < events; i += 500)
    await app.events.append(Array.from({ length: Math.min(500, events - i) }, (_, k) => event(i + k)));
  await waitFor(events * webhooks);
  const delivered = await sink.count();
  const rate = (delivered / (performance.now() - started)) * 1000;
  const storeCalls = profile?.report(delivered);

  const figures: WebhookFigures = { deliveriesPerSecond: rate, storeCalls };
  if (seconds > 0) figures.halfRate = await halfRate();
  await app.close();
  await sink.close();
  await discardRunData(config, dataDir);
  return figures;

  /** Half the full rate, paced every 10 ms, for the latency from the event to its delivery. */
  async function halfRate(): Promise<WebhookFigures['halfRate']> {
    const before = await sink.reset();
    const perTick = Math.max(1, Math.round(rate / 2 / webhooks / 100));
    let sent = 0;
    const until = Date.now() + seconds * 1000;
    while (Date.now() < until) {
      const tick = Date.now();
      await app.events.append(Array.from({ length: perTick }, (_, k) => event(events + sent + k)));
      sent += perTick;
      await new Promise((r) => setTimeout(r, Math.max(0, 10 - (Date.now() - tick))));
    }
    await waitFor(before + sent * webhooks);
    const sorted = (await sink.latencies()).sort((a, b) => a - b);
    return { perSecond: (sent * webhooks) / seconds, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) };
  }
}

async function run(backend: 'embedded' | 'redis+mongo'): Promise<void> {
  const f = await measureWebhooks(backend, { events, webhooks, seconds });
  console.log(
    `| ${backend} | ${webhooks} | ${Math.round(f.deliveriesPerSecond)} | ${Math.round(f.halfRate!.perSecond)} | ${f.halfRate!.p50Ms} | ${f.halfRate!.p99Ms} |`,
  );
  if (f.storeCalls) console.log(`  store calls at full speed (${backend}):\n${f.storeCalls}`);
}

if (isEntryPoint(import.meta.url)) {
  console.log(
    `${events} events to ${webhooks} webhooks (${events * webhooks} signed deliveries), then ${seconds} s at half the rate`,
  );
  console.log('| backend | webhooks | deliveries/s | half rate/s | p50 ms | p99 ms |');
  console.log('|---|---|---|---|---|---|');
  await run('embedded');
  if (process.env.REDIS_URL && process.env.MONGODB_URL) await run('redis+mongo');
  process.exit(0);
}
