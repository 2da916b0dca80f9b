/**
 * Webhook delivery benchmark: events go into the organization's event stream
 * (as the send path's outbox publishes them), signed deliveries come out to a
 * local keep-alive receiver in another process. Prints deliveries/s at full speed, then the
 * event-to-delivery latency at half that rate, on the embedded default and,
 * when REDIS_URL and MONGODB_URL are set, on Redis + MongoDB wire.
 *
 *   npm run bench:webhooks   (BENCH_EVENTS, BENCH_WEBHOOKS, BENCH_SECONDS)
 *
 * Then the noisy neighbour (bench/webhook-neighbour.ts): organization B's
 * events paced at BENCH_NEIGHBOUR_RATE (500) a second for BENCH_SECONDS, alone
 * and then while organization A's endpoint holds every request 10 s (A has
 * 200 events waiting and 10 more come each second); prints
 * B's event-to-delivery p50 and p99 both ways.
 *
 * BENCH_PROFILE=1 also prints, per backend, the store calls the full-speed
 * phase made per delivery and the time they took, by collection and operation.
 */
import type { App } from '../src/app.ts';
import { isEntryPoint } from './entry-point.ts';
import { measureNoisyNeighbour } from './webhook-neighbour.ts';
import { messageEvent, percentile, startBenchApp, type WebhookBackend } from './webhook-bench-app.ts';

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

export interface WebhookFigures {
  /** Signed deliveries per second with every event appended at once. */
  deliveriesPerSecond: number;
  /** Deliveries per second paced at half that rate, and the event-to-delivery latency there (none when `seconds` is 0). */
  halfRate?: { perSecond: number; p50Ms: number; p99Ms: number };
  storeCalls?: string;
}

/** `events` events to `webhooks` webhooks on `backend` (a fresh app in this process), then `seconds` at half the rate. */
export async function measureWebhooks(
  backend: WebhookBackend,
  opts: { events: number; webhooks: number; seconds: number },
): Promise<WebhookFigures> {
  const { events, webhooks, seconds } = opts;
  const bench = await startBenchApp(backend);
  const { app, sink } = bench;
  const orgId = `org_bench${bench.suffix}`;
  for (let i = 0; i < webhooks; i++)
    await app.webhooks.service.create(orgId, { url: sink.url, events: ['message.queued'], secret: 'bench secret' });
  const event = (n: number) => messageEvent(orgId, n);
  const waitFor = (n: number) => sink.waitFor(n);

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
  await bench.close();
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

async function run(backend: WebhookBackend): Promise<void> {
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
  const backends: WebhookBackend[] =
    process.env.REDIS_URL && process.env.MONGODB_URL ? ['embedded', 'redis+mongo'] : ['embedded'];
  for (const backend of backends) await run(backend);
  const perSecond = Number(process.env.BENCH_NEIGHBOUR_RATE ?? 500);
  console.log(
    `\nnoisy neighbour: B's events at ${perSecond}/s for ${seconds} s, alone, then while A's endpoint holds each request 10 s (A: 200 events waiting, 10 more/s)`,
  );
  console.log("| backend | B alone p50 / p99 ms | B beside A p50 / p99 ms | B's p99 beside A / alone |");
  console.log('|---|---|---|---|');
  for (const backend of backends) {
    const { alone, withA } = await measureNoisyNeighbour(backend, {
      seconds,
      perSecond,
      hangMs: 10_000,
      aBacklog: 200,
      aPerSecond: 10,
    });
    console.log(
      `| ${backend} | ${alone.p50Ms} / ${alone.p99Ms} | ${withA.p50Ms} / ${withA.p99Ms} | ${(withA.p99Ms / alone.p99Ms).toFixed(2)} |`,
    );
  }
  process.exit(0);
}
