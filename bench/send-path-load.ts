/**
 * The load generator of bench/send-path.ts, in its own process so that it does
 * not share an event loop with what it measures. Keep-alive connections from
 * node's http.Agent (undici is not installed).
 *
 * Phase `max`: BENCH_CONNECTIONS loops each send POST /api/v1/messages back to
 * back; the first BENCH_WARMUP_SECONDS are not counted. Phase `half`: open loop
 * at half the measured rate, paced on a schedule; a request's latency counts
 * from when it was due, not from when it went out, so a stalled server cannot
 * hide its backlog (no coordinated omission).
 *
 * stdout: `{"mark":"start"|"end","phase":...}` lines around each measured
 * window (the parent samples the service's CPU there), then `{"result":...}`.
 */
import http from 'node:http';

const target = new URL(required('BENCH_URL'));
const token = required('BENCH_TOKEN');
const connections = Number(process.env.BENCH_CONNECTIONS || 64);
const seconds = Number(process.env.BENCH_SECONDS || 10);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS || 2);
/** How long in-flight requests may take to finish after a phase ends. */
const drainMs = 10_000;

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections });
let sequence = 0;

/** One send; resolves with the HTTP status, or the error code when no response came. */
function send(): Promise<{ status: number | string; sample?: string }> {
  const body = `{"to":"+14155550100","body":"bench ${sequence++}"}`;
  return new Promise((resolve) => {
    const req = http.request(
      {
        agent,
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status === 201) {
          res.resume();
          res.on('end', () => resolve({ status }));
          return;
        }
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status, sample: text.slice(0, 200) }));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ status: err.code ?? 'error', sample: err.message }));
    req.end(body);
  });
}

interface Window {
  accepted: number;
  errors: Record<string, number>;
  samples: Record<string, string>;
  latenciesMs: number[];
}

function newWindow(): Window {
  return { accepted: 0, errors: {}, samples: {}, latenciesMs: [] };
}

function record(w: Window, outcome: { status: number | string; sample?: string }, latencyMs: number): void {
  if (outcome.status === 201) {
    w.accepted++;
    w.latenciesMs.push(latencyMs);
    return;
  }
  const key = String(outcome.status);
  w.errors[key] = (w.errors[key] ?? 0) + 1;
  if (outcome.sample !== undefined) w.samples[key] ??= outcome.sample;
}

function mark(kind: 'start' | 'end', phase: string): void {
  process.stdout.write(`${JSON.stringify({ mark: kind, phase })}\n`);
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summarize(w: Window, measuredMs: number, cpu: NodeJS.CpuUsage) {
  const sorted = Float64Array.from(w.latenciesMs).sort();
  const list = Array.from(sorted);
  return {
    accepted: w.accepted,
    ratePerSecond: w.accepted / (measuredMs / 1000),
    p50Ms: percentile(list, 50),
    p99Ms: percentile(list, 99),
    maxMs: list.length ? list[list.length - 1]! : NaN,
    errors: w.errors,
    errorSamples: w.samples,
    /** Of one core, while measuring: near 100 means the generator, not the server, set the pace. */
    loadCpuPercent: ((cpu.user + cpu.system) / 1000 / measuredMs) * 100,
  };
}

function drained(inFlight: () => number): Promise<void> {
  const until = performance.now() + drainMs;
  return new Promise((resolve) => {
    const check = () => (inFlight() === 0 || performance.now() > until ? resolve() : setTimeout(check, 5));
    check();
  });
}

/** Closed loop: every connection sends its next request as soon as the previous one is answered. */
async function maxRate() {
  const w = newWindow();
  const started = performance.now();
  const measureFrom = started + warmupSeconds * 1000;
  const measureUntil = measureFrom + seconds * 1000;
  let cpuAtStart: NodeJS.CpuUsage | undefined;
  let cpu: NodeJS.CpuUsage = { user: 0, system: 0 };
  const startTimer = setTimeout(() => {
    cpuAtStart = process.cpuUsage();
    mark('start', 'max');
  }, warmupSeconds * 1000);
  const endTimer = setTimeout(
    () => {
      cpu = process.cpuUsage(cpuAtStart);
      mark('end', 'max');
    },
    (warmupSeconds + seconds) * 1000,
  );
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < measureUntil) {
        const t0 = performance.now();
        const outcome = await send();
        const t1 = performance.now();
        if (t0 >= measureFrom && t1 <= measureUntil) record(w, outcome, t1 - t0);
      }
    }),
  );
  clearTimeout(startTimer);
  clearTimeout(endTimer);
  return summarize(w, seconds * 1000, cpu);
}

/** Open loop at a fixed rate: requests go out when due, whether or not earlier ones were answered. */
async function pacedRate(ratePerSecond: number) {
  const w = newWindow();
  const started = performance.now();
  const measureFrom = started + warmupSeconds * 1000;
  const stopAt = measureFrom + seconds * 1000;
  const intervalMs = 1000 / ratePerSecond;
  let issued = 0;
  let inFlight = 0;
  let cpuAtStart: NodeJS.CpuUsage | undefined;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      if (cpuAtStart === undefined && now >= measureFrom) {
        cpuAtStart = process.cpuUsage();
        mark('start', 'half');
      }
      while (started + issued * intervalMs <= Math.min(now, stopAt)) {
        const due = started + issued * intervalMs;
        issued++;
        inFlight++;
        void send().then((outcome) => {
          inFlight--;
          if (due >= measureFrom) record(w, outcome, performance.now() - due);
        });
      }
      if (now >= stopAt) return resolve();
      setTimeout(tick, 1);
    };
    tick();
  });
  const cpu = process.cpuUsage(cpuAtStart);
  mark('end', 'half');
  await drained(() => inFlight);
  return { targetRatePerSecond: ratePerSecond, ...summarize(w, seconds * 1000, cpu) };
}

const max = await maxRate();
const half = max.ratePerSecond >= 2 ? await pacedRate(max.ratePerSecond / 2) : undefined;
agent.destroy();
process.stdout.write(`${JSON.stringify({ result: { connections, seconds, warmupSeconds, max, half } })}\n`);
process.exit(0);
