import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { collectDefaultMetrics, Gauge, Histogram, register } from 'prom-client';

export { register as metricsRegistry };

let defaultsCollected = false;

/** prom-client's gauges named like counters (`promtool check metrics` refuses a gauge ending in `_total`): replaced by `nodejs_active_resources{type}`. */
const misnamedDefaults = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
  'nodejs_active_handles',
  'nodejs_active_requests',
  'nodejs_active_resources',
];

export function collectProcessMetrics(opts: { buildCommit?: string | undefined } = {}): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register });
  for (const name of misnamedDefaults) register.removeSingleMetric(name);
  new Gauge({
    name: 'relaybox_build_info',
    help: 'Always 1: the running version, its commit and the Node.js version',
    labelNames: ['version', 'commit', 'node'],
    registers: [register],
  }).set({ version: packageVersion(), commit: opts.buildCommit ?? checkoutCommit(), node: process.version }, 1);
  new Gauge({
    name: 'nodejs_active_resources',
    help: 'Resources keeping the event loop alive (handles, requests, timers), by type',
    labelNames: ['type'],
    registers: [register],
    collect() {
      this.reset();
      const counts = new Map<string, number>();
      for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
      for (const [type, n] of counts) this.set({ type }, n);
    },
  });
}

function singleton<T>(name: string, make: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? make();
}

export const httpDuration = singleton(
  'relaybox_http_request_duration_seconds',
  () =>
    new Histogram({
      name: 'relaybox_http_request_duration_seconds',
      help: 'HTTP request duration by route pattern, method and status',
      labelNames: ['route', 'method', 'status'],
      // Up to a minute: a bulk upload or an export takes seconds, and each should land in a bucket of its own, not in +Inf.
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    }),
);

/**
 * The duration histogram's children of one route and method, one per status,
 * each resolved once: `labels()` validates and hashes the label set on every
 * call, which per request shows in profiles.
 */
export class RouteDurations {
  private readonly byStatus = new Map<number, BoundObservations>();
  constructor(
    private readonly route: string,
    private readonly method: string,
  ) {}

  observe(status: number, seconds: number): void {
    let child = this.byStatus.get(status);
    if (!child)
      this.byStatus.set(
        status,
        (child = new BoundObservations(httpDuration, {
          route: this.route,
          method: this.method,
          status: String(status),
        })),
      );
    child.observe(seconds);
  }
}

/** What a prom-client 15 histogram keeps of one label set, and where. */
interface HistogramEntry {
  labels: Record<string, string | number>;
  sum: number;
  count: number;
  bucketValues: Record<number, number>;
}
interface HistogramInternals {
  hashMap?: Record<string, HistogramEntry>;
  upperBounds?: readonly number[];
}

/**
 * One label set of a histogram, resolved once. prom-client's own child
 * (`labels(...)`) validates and hashes its label set again on every
 * observation (a string built and looked up each time, per request in the
 * profile of a send); this keeps the set's entry once the first observation
 * has made it and adds to it directly. Should the entry not be found (a
 * reset, a prom-client that keeps them otherwise), the observation goes
 * through prom-client as before and the entry is looked for again.
 */
export class BoundObservations {
  private entry: HistogramEntry | undefined;
  private hash: string | undefined;
  /** Set when prom-client keeps its entries otherwise: then every observation goes through it. */
  private unbound = false;
  constructor(
    private readonly histogram: Histogram<string>,
    private readonly labels: Record<string, string>,
  ) {}

  observe(value: number): void {
    const internals = this.histogram as unknown as HistogramInternals;
    const entry = this.entry;
    if (entry === undefined || internals.hashMap?.[this.hash!] !== entry || !Number.isFinite(value)) {
      this.histogram.observe(this.labels, value);
      if (!this.unbound) this.find(internals);
      return;
    }
    entry.sum += value;
    entry.count += 1;
    const bounds = internals.upperBounds!;
    for (let i = 0; i < bounds.length; i++)
      if (value <= bounds[i]!) {
        entry.bucketValues[bounds[i]!]! += 1;
        return;
      }
  }

  private find(internals: HistogramInternals): void {
    this.entry = undefined;
    this.unbound = true;
    if (!internals.hashMap || !internals.upperBounds) return;
    const names = Object.keys(this.labels);
    for (const [hash, entry] of Object.entries(internals.hashMap)) {
      if (typeof entry?.sum !== 'number' || typeof entry.count !== 'number' || !entry.bucketValues) continue;
      if (names.length !== Object.keys(entry.labels).length) continue;
      if (names.every((name) => String(entry.labels[name]) === this.labels[name])) {
        this.hash = hash;
        this.entry = entry;
        this.unbound = false;
        return;
      }
    }
  }
}

/** Time spent in each stage of a request (auth, rate_limit, validate, handler; features add persist, enqueue). */
export const stageDuration = singleton(
  'relaybox_http_stage_duration_seconds',
  () =>
    new Histogram({
      name: 'relaybox_http_stage_duration_seconds',
      help: 'Time spent in each stage of request handling, by route and stage',
      labelNames: ['route', 'stage'],
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1],
    }),
);

/**
 * Figures read from somewhere else (the transport, the event stream) when
 * Prometheus scrapes, not on every message: one read serves every gauge of
 * the set for half a second. Each gauge is labelled by `label`.
 */
function exposeRead<R extends Record<string, unknown>>(
  label: keyof R & string,
  read: () => Promise<R[]>,
  gauges: Array<{ name: string; help: string; field: keyof R & string }>,
): void {
  for (const { name } of gauges) register.removeSingleMetric(name);
  let latest: Promise<R[]> | undefined;
  const current = () => (latest ??= read().finally(() => setTimeout(() => (latest = undefined), 500)));
  for (const { name, help, field } of gauges) {
    new Gauge<string>({
      name,
      help,
      labelNames: [label],
      // A source that cannot answer keeps the last figures: one unreadable gauge must not fail the whole scrape.
      async collect() {
        for (const row of (await current().catch(() => [])) ?? [])
          this.set({ [label]: String(row[label]) }, Number(row[field]));
      },
    });
  }
}

/** Actor backlog, its age, dead letters and timers by actor type. */
export function exposeRuntimeStats(
  stats: () => Promise<
    Array<{ type: string; pending: number; oldestAgeSeconds: number; deadLetters: number; timers: number }>
  >,
): void {
  exposeRead('type', stats, [
    {
      name: 'relaybox_runtime_pending_messages',
      help: 'Actor messages sent and not yet handled, by actor type',
      field: 'pending',
    },
    {
      name: 'relaybox_runtime_oldest_message_age_seconds',
      help: 'How long the oldest actor message not yet handled has waited, by actor type (0 when none waits)',
      field: 'oldestAgeSeconds',
    },
    {
      name: 'relaybox_runtime_dead_letters',
      help: 'Actor messages in the dead-letter stream, by actor type',
      field: 'deadLetters',
    },
    { name: 'relaybox_runtime_timers', help: 'Durable timers not yet due, by actor type', field: 'timers' },
  ]);
}

/** How far each consumer group of the event stream (event-log, webhooks, automations) is behind. */
export function exposeEventStreamLag(
  lag: () => Promise<Array<{ group: string; events: number; oldestAgeSeconds: number }>>,
): void {
  exposeRead('group', lag, [
    {
      name: 'relaybox_event_stream_pending_events',
      help: 'Events appended and not yet handled by the consumer group (read or not)',
      field: 'events',
    },
    {
      name: 'relaybox_event_stream_oldest_pending_age_seconds',
      help: 'Seconds since the oldest event the consumer group has not yet handled was appended (0 when none)',
      field: 'oldestAgeSeconds',
    },
  ]);
}

const root = resolve(import.meta.dirname, '..', '..');

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The checkout's HEAD read from `.git` (no git program needed), else "unknown". */
function checkoutCommit(): string {
  try {
    const git = join(root, '.git');
    const head = readFileSync(join(git, 'HEAD'), 'utf8').trim();
    if (!head.startsWith('ref: ')) return head.slice(0, 12);
    const ref = head.slice(5);
    if (existsSync(join(git, ref))) return readFileSync(join(git, ref), 'utf8').trim().slice(0, 12);
    const packed = readFileSync(join(git, 'packed-refs'), 'utf8')
      .split('\n')
      .find((line) => line.endsWith(` ${ref}`));
    return packed ? packed.slice(0, 12) : 'unknown';
  } catch {
    return 'unknown';
  }
}
