/**
 * The noisy neighbour: organization B's events, paced, delivered to B's
 * webhook with B alone, then again while organization A's webhook endpoint
 * holds every request `hangMs` (the same receiver with `?hang=`, so the same
 * origin and connection pool as B): A has a backlog of `aBacklog` events,
 * many times what its lane holds in flight, and more come at `aPerSecond`.
 * B's latency from event to delivery, both ways: a hanging endpoint must not
 * move it. (A's event volume is kept small on purpose: what is measured is
 * the hanging endpoint, not the cost of routing twice the events.)
 */
import { messageEvent, percentile, startBenchApp, type WebhookBackend } from './webhook-bench-app.ts';

export interface Latency {
  delivered: number;
  p50Ms: number;
  p99Ms: number;
}

export interface NeighbourFigures {
  alone: Latency;
  withA: Latency;
}

export async function measureNoisyNeighbour(
  backend: WebhookBackend,
  opts: { seconds: number; perSecond: number; hangMs: number; aBacklog: number; aPerSecond: number },
): Promise<NeighbourFigures> {
  // Errors only: A's attempts still hanging at the stop cannot schedule their retry, a warning each (they stay pending).
  const bench = await startBenchApp(backend, 'error');
  const { app, sink } = bench;
  const orgA = `org_noisy${bench.suffix}`;
  const orgB = `org_quiet${bench.suffix}`;
  const subscribe = { events: ['message.queued' as const], secret: 'bench secret' };
  await app.webhooks.service.create(orgB, { url: sink.url, ...subscribe });
  let n = 0;
  const events = (orgId: string, count: number) => Array.from({ length: count }, () => messageEvent(orgId, n++));

  /**
   * B's events every 10 ms for `seconds`, and A's at `aPerSecond` beside
   * them when `withA`; B's latency once all of B's arrived.
   */
  const paced = async (seconds: number, withA: boolean): Promise<Latency> => {
    const before = await sink.reset();
    const perTick = Math.max(1, Math.round(opts.perSecond / 100));
    let sent = 0;
    let ticks = 0;
    const until = Date.now() + seconds * 1000;
    while (Date.now() < until) {
      const tick = Date.now();
      const fromA = withA && ticks++ % Math.max(1, Math.round(100 / opts.aPerSecond)) === 0 ? 1 : 0;
      await app.events.append([...events(orgB, perTick), ...events(orgA, fromA)]);
      sent += perTick;
      await new Promise((r) => setTimeout(r, Math.max(0, 10 - (Date.now() - tick))));
    }
    await sink.waitFor(before + sent);
    const sorted = (await sink.latencies()).sort((a, b) => a - b);
    return { delivered: sorted.length, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) };
  };

  await paced(2, false); // warm-up: connections opened, code compiled
  const alone = await paced(opts.seconds, false);
  await app.webhooks.service.create(orgA, { url: `${sink.url}?hang=${opts.hangMs}`, ...subscribe });
  // A's backlog: far more than its lane can hold in flight, so its endpoint is hanging for the whole phase.
  await app.events.append(events(orgA, opts.aBacklog));
  const withA = await paced(opts.seconds, true);
  await bench.close();
  return { alone, withA };
}
