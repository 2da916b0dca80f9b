/**
 * Webhook delivery benchmark: events go into the organization's event stream
 * (as the send path's outbox publishes them), signed deliveries come out to a
 * local keep-alive receiver. Prints deliveries/s at full speed, then the
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
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { domainEvent } from '../src/events/event-stream.ts';
import { createLogger } from '../src/log.ts';
import { discardRunData } from '../test/support/discard-data.ts';

const events = Number(process.env.BENCH_EVENTS ?? 5_000);
const webhooks = Number(process.env.BENCH_WEBHOOKS ?? 4);
const seconds = Number(process.env.BENCH_SECONDS ?? 10);

const profiling = process.env.BENCH_PROFILE === '1';

/** Counts and times every store call, by collection and operation, by wrapping the collection class's methods. */
function profileStore(app: App): { reset(): void; report(deliveries: number): string } {
  const calls = new Map<string, { n: number; ms: number }>();
  const proto = Object.getPrototypeOf(app.store.collection('profile_probe')) as Record<string, unknown>;
  for (const op of ['insertOne', 'insertMany', 'findOne', 'find', 'count', 'updateOne', 'updateMany', 'deleteOne', 'deleteMany']) {
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
    report: (deliveries) => [...calls].sort((a, b) => b[1].ms - a[1].ms).slice(0, 10)
      .map(([key, c]) => `    ${key}: ${(c.n / deliveries).toFixed(3)} calls/delivery, ${Math.round(c.ms)} ms in all (${(c.ms / c.n).toFixed(1)} ms each)`).join('\n'),
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

async function receiver() {
  const latencies: number[] = [];
  let count = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      count++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { timestamp: string };
      latencies.push(Date.now() - Date.parse(body.timestamp));
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    get count() {
      return count;
    },
    latencies,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

async function run(backend: 'embedded' | 'redis+mongo'): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-bench-'));
  const suffix = randomUUID().slice(0, 8);
  const env: Record<string, string> = { DATA_DIR: dataDir, RUNTIME_KEY_PREFIX: `bw${suffix}`, WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' };
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
  for (let i = 0; i < webhooks; i++) await app.webhooks.service.create(orgId, { url: sink.url, events: ['message.queued'], secret: 'bench secret' });
  const event = (n: number) => domainEvent('message.queued', { tenantId: orgId }, { id: `msg_${n}`, to: '+14155550100', from: null, body: `bench ${n}`, status: 'queued', conversationId: 'conv_bench' });
  const waitFor = async (count: number) => {
    const deadline = Date.now() + 300_000;
    while (sink.count < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  };

  const profile = profiling ? profileStore(app) : undefined;
  profile?.reset();
  // Full speed: every event appended at once, timed until the last delivery.
  const started = performance.now();
  for (let i = 0; i < events; i += 500) await app.events.append(Array.from({ length: Math.min(500, events - i) }, (_, k) => event(i + k)));
  await waitFor(events * webhooks);
  const rate = (sink.count / (performance.now() - started)) * 1000;
  const storeCalls = profile?.report(sink.count);

  // Half that rate, paced every 10 ms, for the latency from the event to its delivery.
  sink.latencies.length = 0;
  const before = sink.count;
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
  const sorted = [...sink.latencies].sort((a, b) => a - b);
  console.log(`| ${backend} | ${webhooks} | ${Math.round(rate)} | ${Math.round((sent * webhooks) / seconds)} | ${percentile(sorted, 50)} | ${percentile(sorted, 99)} |`);
  if (storeCalls) console.log(`  store calls at full speed (${backend}):\n${storeCalls}`);

  await app.close();
  await sink.close();
  await discardRunData(config, dataDir);
}

console.log(`${events} events to ${webhooks} webhooks (${events * webhooks} signed deliveries), then ${seconds} s at half the rate`);
console.log('| backend | webhooks | deliveries/s | half rate/s | p50 ms | p99 ms |');
console.log('|---|---|---|---|---|---|');
await run('embedded');
if (process.env.REDIS_URL && process.env.MONGODB_URL) await run('redis+mongo');
process.exit(0);
