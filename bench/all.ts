/**
 * One run, one table: Relaybox beside the floor (../shared/perf/limit: uWS,
 * parse, E.164 check, a native SQLite insert of message and event, group
 * commit: what is left of a send without auth, queue or features) and the
 * reference peer (../shared/peer: Fastify + BullMQ `queue.add`, what a Node
 * team would build first), on the embedded default and on Redis + MongoDB
 * wire. It reports, it does not assert.
 *
 *   npm run bench
 *   BENCH_PARTS=send BENCH_SECONDS=5 npm run bench
 *   BENCH_BASELINE=<commit> npm run bench   # the send part of an earlier commit too, in the same run
 *
 * Parts (BENCH_PARTS, all by default):
 * - send: accepted POST /api/v1/messages under wrk (BENCH_CONNECTIONS 64,
 *   BENCH_SECONDS 10 after BENCH_WARMUP_SECONDS 3) for the peer and each
 *   backend: sends/s, p99, the service's CPU µs per accepted send, its share
 *   of the floor's sends/s, store round trips per accepted send
 *   (relaybox_store_operations_total on /metrics, before and after the
 *   measured window) and the embedded store's budget counters per accepted
 *   send (statements, rows, index entries, document bytes stored:
 *   docs/performance-budget.md). The floor and the peer run in the same part;
 *   either is skipped with the reason when its directory is absent.
 * - BENCH_BASELINE=<commit>: that commit checked out in a temporary git
 *   worktree (npm ci there), its embedded service measured by the same send
 *   part as one more column, the worktree removed at the end.
 * - bulk: a 10,000-recipient job accepted (p50 of BENCH_ACCEPT_SAMPLES, 5),
 *   then a job of BENCH_DRAIN_MESSAGES (10,000) drained to simulated relays:
 *   messages/s handed out, the time from its 201 to `completed`, store round
 *   trips per delivered message.
 * - webhooks: BENCH_EVENTS (5,000) events to BENCH_WEBHOOKS (4) webhooks,
 *   signed deliveries/s.
 *
 * REDIS_URL (redis://127.0.0.1:6379) and MONGODB_URL (mongodb://127.0.0.1:27017;
 * each run its own database, dropped after) for the Redis + MongoDB wire
 * column, skipped with the reason when either does not answer. The peer needs
 * Redis on 127.0.0.1:6379 (its own setting) and `wrk` on the PATH.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { register } from 'prom-client';
import { loadConfig } from '../src/config.ts';
import { discardRedisKeys, discardRunData } from '../test/support/discard-data.ts';
import { limitsOutOfTheWay, withDatabase, type Backend, type TestApp } from '../test/support/test-app.ts';
import { measureAccept, measureDrain, recipients, startBulkApp, type Row as BulkRow } from './bulk.ts';
import {
  apiKeyFor,
  cpuSeconds,
  freePort,
  killAll,
  startNodeProgram,
  startService,
  type Running,
} from './send-path-processes.ts';
import { baselineCheckout, installedCopy, sharedDirectory, type Checkout } from './reference-checkouts.ts';
import { storeCommands, storeWork, type StoreWork } from './send-path-metrics.ts';
import { measureWebhooks } from './webhooks.ts';
import { sendScript, wrk } from './wrk.ts';

const here = resolve(import.meta.dirname, '..');
const parts = new Set((process.env.BENCH_PARTS || 'send,bulk,webhooks').split(','));
const connections = Number(process.env.BENCH_CONNECTIONS || 64);
const seconds = Number(process.env.BENCH_SECONDS || 10);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS || 3);
const acceptSamples = Number(process.env.BENCH_ACCEPT_SAMPLES || 5);
const drainMessages = Number(process.env.BENCH_DRAIN_MESSAGES || recipients);
const events = Number(process.env.BENCH_EVENTS || 5_000);
const webhooks = Number(process.env.BENCH_WEBHOOKS || 4);
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const mongoUrl = process.env.MONGODB_URL || 'mongodb://127.0.0.1:27017';
// The in-process parts (bulk.ts, webhooks.ts) take them from the environment, each run naming its own database.
process.env.REDIS_URL = redisUrl;
process.env.MONGODB_URL = mongoUrl;
const peerSource = process.env.BENCH_PEER_DIR ? resolve(process.env.BENCH_PEER_DIR) : sharedDirectory('peer');
const floorSource = process.env.BENCH_FLOOR_DIR ? resolve(process.env.BENCH_FLOOR_DIR) : sharedDirectory('perf/limit');
const baselineCommit = process.env.BENCH_BASELINE || undefined;
const peerRedis = 'redis://127.0.0.1:6379';
type Target = 'floor' | 'peer' | Backend | 'baseline';
const targets: Target[] = [
  'floor',
  'peer',
  'embedded',
  'redis+mongo',
  ...(baselineCommit ? ['baseline' as const] : []),
];
let baseline: Checkout | undefined;

interface Figures {
  sendsPerSecond?: number;
  p99Ms?: number;
  cpuUsPerSend?: number;
  storePerSend?: number;
  /** The embedded store's budget counters per accepted send. */
  workPerSend?: StoreWork;
  acceptMs?: number;
  drainPerSecond?: number;
  completedMs?: number;
  storePerDelivered?: number;
  webhookDeliveriesPerSecond?: number;
  /** Why a figure is missing: skipped, or failed. */
  notes: string[];
}

const figures = new Map<Target, Figures>(targets.map((t) => [t, { notes: [] }]));
const note = (target: Target, text: string) => {
  figures.get(target)!.notes.push(text);
  console.log(`# ${target}: ${text}`);
};

/** Whether something listens at the URL's host and port (2 s to answer). */
function reachable(url: string, defaultPort: number): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((done) => {
    const socket = connect({ host: hostname || '127.0.0.1', port: Number(port || defaultPort), timeout: 2_000 });
    const end = (ok: boolean) => (socket.destroy(), done(ok));
    socket.once('connect', () => end(true));
    socket.once('error', () => end(false));
    socket.once('timeout', () => end(false));
  });
}

async function scrape(base: string): Promise<{ commands: number; work: StoreWork | undefined }> {
  const res = await fetch(`${base}/metrics`);
  if (!res.ok) throw new Error(`GET /metrics answered ${res.status}`);
  const text = await res.text();
  return { commands: storeCommands(text), work: storeWork(text) };
}

/**
 * Warm-up, then the measured window: wrk's figures, the CPU the process used
 * per accepted send and, for Relaybox, its store commands per accepted send.
 */
async function measureSends(
  target: Target,
  url: string,
  script: string,
  pid: number,
  metricsBase?: string,
): Promise<void> {
  wrk(url, script, warmupSeconds, connections);
  const storeBefore = metricsBase ? await scrape(metricsBase) : undefined;
  const cpuBefore = cpuSeconds(pid);
  const out = wrk(url, script, seconds, connections);
  const cpuAfter = cpuSeconds(pid);
  const storeAfter = metricsBase ? await scrape(metricsBase) : undefined;
  const f = figures.get(target)!;
  f.sendsPerSecond = out.sendsPerSecond;
  f.p99Ms = out.p99Ms;
  if (cpuBefore !== undefined && cpuAfter !== undefined && out.accepted > 0)
    f.cpuUsPerSend = ((cpuAfter - cpuBefore) * 1e6) / out.accepted;
  if (storeBefore !== undefined && storeAfter !== undefined && out.accepted > 0) {
    f.storePerSend = (storeAfter.commands - storeBefore.commands) / out.accepted;
    const [a, b] = [storeAfter.work, storeBefore.work];
    if (a && b)
      f.workPerSend = {
        statements: (a.statements - b.statements) / out.accepted,
        rows: (a.rows - b.rows) / out.accepted,
        indexEntries: (a.indexEntries - b.indexEntries) / out.accepted,
        storedBytes: (a.storedBytes - b.storedBytes) / out.accepted,
      };
  }
  if (out.non2xx || out.socketErrors)
    note(target, `${out.non2xx} non-2xx answers, ${out.socketErrors} socket errors while measured`);
  console.log(`# ${target}: ${Math.round(out.sendsPerSecond)} sends/s, p99 ${out.p99Ms.toFixed(1)} ms`);
}

const referenceFiles = ['package.json', 'package-lock.json', 'server.mjs', 'post.lua'];

/** The floor: what accepting a message durably costs at least, on one core (../shared/perf/README.md). */
async function sendFloor(): Promise<void> {
  if (!floorSource) return note('floor', 'skipped: no ../shared/perf/limit beside the repository (or BENCH_FLOOR_DIR)');
  let floor: Running | undefined;
  try {
    const dir = await installedCopy(floorSource, 'floor', referenceFiles);
    const port = await freePort();
    floor = await startNodeProgram('server.mjs', dir, { PORT: String(port) }, /^limit listening/);
    await measureSends('floor', `http://127.0.0.1:${port}/api/v1/messages`, join(dir, 'post.lua'), floor.pids[0]!);
  } catch (err) {
    note('floor', `failed: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    await floor?.stop();
  }
}

async function sendPeer(): Promise<void> {
  if (!peerSource) return note('peer', 'skipped: no ../shared/peer beside the repository (or BENCH_PEER_DIR)');
  if (!(await reachable(peerRedis, 6379)))
    return note('peer', `skipped: no Redis at ${peerRedis}, which the peer uses`);
  let peer: Running | undefined;
  try {
    const dir = await installedCopy(peerSource, 'peer', referenceFiles);
    const port = await freePort();
    peer = await startNodeProgram('server.mjs', dir, { PORT: String(port) }, /^peer listening on/);
    await measureSends('peer', `http://127.0.0.1:${port}/api/v1/messages`, join(dir, 'post.lua'), peer.pids[0]!);
  } catch (err) {
    note('peer', `failed: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    await peer?.stop();
    // BullMQ names the peer's queue after its process: `bull:peer-send-<pid>:`.
    if (peer) await discardRedisKeys(peerRedis, `bull:peer-send-${peer.pids[0]}:`);
  }
}

/** The service of this checkout, or of `checkout` (the baseline column), on `backend`. */
async function sendRelaybox(backend: Backend, target: Target = backend, checkout?: Checkout): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-bench-all-'));
  const suffix = randomUUID().slice(0, 8);
  const env: Record<string, string> = {
    ...limitsOutOfTheWay,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    RUNTIME_KEY_PREFIX: `bench${suffix}`,
    REDIS_URL: '',
    MONGODB_URL: '',
  };
  if (backend === 'redis+mongo')
    Object.assign(env, { REDIS_URL: redisUrl, MONGODB_URL: withDatabase(mongoUrl, `relaybox_bench_${suffix}`) });
  let service: Running | undefined;
  try {
    service = await startService('all', env, checkout?.root);
    const base = `http://127.0.0.1:${service.port}`;
    const script = join(dataDir, 'send.lua');
    await writeFile(script, sendScript(await apiKeyFor(base)));
    await measureSends(target, `${base}/api/v1/messages`, script, service.pids[0]!, base);
  } catch (err) {
    note(target, `send failed: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    await service?.stop();
    await discardRunData(loadConfig(env), dataDir).catch((err) =>
      console.error(`could not drop the ${backend} bench data:`, err),
    );
    if (backend === 'redis+mongo') await discardRedisKeys(redisUrl, `bench${suffix}:`);
  }
}

/** Store commands so far in this process (the bulk and webhook parts run the service here). */
const storeCommandsHere = async () => storeCommands(await register.metrics());

async function bulk(backend: Backend): Promise<void> {
  const f = figures.get(backend)!;
  const row: BulkRow = { backend, acceptMs: [] };
  let t: TestApp | undefined;
  try {
    t = await startBulkApp(backend);
    // The drain first: the last accepted job's background work (10,000 conversations) then delays nothing measured.
    if (drainMessages > 0) {
      const before = await storeCommandsHere();
      await measureDrain(t, row, drainMessages);
      // The job's messages and the two single sends measureDrain makes beside it, each delivered.
      f.storePerDelivered = ((await storeCommandsHere()) - before) / (drainMessages + 2);
      f.drainPerSecond = row.drainMs ? drainMessages / (row.drainMs / 1000) : undefined;
      f.completedMs = row.completedMs;
    }
    if (acceptSamples > 0) {
      await measureAccept(t, row, { awaitLastJob: false });
      f.acceptMs = [...row.acceptMs].sort((a, b) => a - b)[Math.floor(row.acceptMs.length / 2)];
    }
  } catch (err) {
    note(backend, `bulk failed: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    await t?.stop();
  }
}

async function webhookDeliveries(backend: Backend): Promise<void> {
  try {
    figures.get(backend)!.webhookDeliveriesPerSecond = (
      await measureWebhooks(backend, { events, webhooks, seconds: 0 })
    ).deliveriesPerSecond;
  } catch (err) {
    note(backend, `webhooks failed: ${(err as Error).message.split('\n')[0]}`);
  }
}

function report(started: Date, loadBefore: string): void {
  const n = (x: number | undefined, digits = 0) =>
    x === undefined || !Number.isFinite(x)
      ? '–'
      : x.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const ms = (x: number | undefined) => (x === undefined ? '–' : `${n(x)} ms`);
  const floor = figures.get('floor')!;
  const ofFloor = (x: number | undefined, base: number | undefined) =>
    x === undefined || base === undefined ? '–' : n(x / base, 2);
  // The floor's counters are not counted: they are what its code does per send.
  const work = (pick: (w: StoreWork) => number, digits: number, floorByCode: string) => (f: Figures, t: Target) =>
    t === 'floor' ? floorByCode : t === 'peer' ? 'no database' : f.workPerSend ? n(pick(f.workPerSend), digits) : '–';
  const rows: Array<[string, (f: Figures, t: Target) => string]> = [
    [`accepted sends/s (wrk, ${connections} connections, ${seconds} s)`, (f) => n(f.sendsPerSecond)],
    ['p99 ms', (f) => n(f.p99Ms, 1)],
    ['share of the floor (sends/s)', (f) => ofFloor(f.sendsPerSecond, floor.sendsPerSecond)],
    ['service CPU µs per accepted send', (f) => n(f.cpuUsPerSend)],
    ["CPU per send against the floor's", (f) => ofFloor(f.cpuUsPerSend, floor.cpuUsPerSend)],
    [
      'store round trips per accepted send',
      (f, t) => (t === 'peer' ? 'no database' : t === 'floor' ? '–' : n(f.storePerSend, 2)),
    ],
    [
      'SQL statements per accepted send (budget counters)',
      work((w) => w.statements, 2, '2 inserts and a share of a commit (its code)'),
    ],
    ['rows written per accepted send', work((w) => w.rows, 2, '2 (its code)')],
    ['index entries written per accepted send', work((w) => w.indexEntries, 2, '2 (its code)')],
    ['document bytes stored per accepted send', work((w) => w.storedBytes, 0, 'the document twice (its code)')],
    [`${recipients.toLocaleString('en')}-recipient bulk accept (p50 of ${acceptSamples})`, (f) => ms(f.acceptMs)],
    [`bulk drain of ${drainMessages.toLocaleString('en')} to simulated relays, messages/s`, (f) => n(f.drainPerSecond)],
    ['bulk drain: 201 to `completed`', (f) => ms(f.completedMs)],
    ['store round trips per delivered message (drain)', (f) => n(f.storePerDelivered, 2)],
    [
      `signed webhook deliveries/s (${events.toLocaleString('en')} events x ${webhooks} webhooks)`,
      (f) => n(f.webhookDeliveriesPerSecond),
    ],
  ];
  const heads: Record<Target, string> = {
    floor: 'floor: uWS + SQLite insert',
    peer: 'peer: Fastify + BullMQ',
    baseline: `Relaybox ${baseline?.commit ?? baselineCommit}, embedded`,
    embedded: 'Relaybox, embedded default',
    'redis+mongo': 'Relaybox, Redis + MongoDB wire',
  };
  console.log(
    `\nnpm run bench, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${cpus().length} cores, load average (1, 5, 15 min) ${loadBefore} at the start, ${loadavg()
      .map((l) => l.toFixed(1))
      .join(', ')} at the end; parts: ${[...parts].join(', ')}\n`,
  );
  console.log(`| | ${targets.map((t) => heads[t]).join(' | ')} |`);
  console.log(`|---|${targets.map(() => '---').join('|')}|`);
  for (const [label, cell] of rows)
    console.log(`| ${label} | ${targets.map((t) => cell(figures.get(t)!, t)).join(' | ')} |`);
  const peerRate = figures.get('peer')!.sendsPerSecond;
  if (peerRate)
    console.log(
      `\nsends/s against the peer: ${targets
        .filter((t) => t !== 'peer' && t !== 'floor' && figures.get(t)!.sendsPerSecond)
        .map((t) => `${t} ${(figures.get(t)!.sendsPerSecond! / peerRate).toFixed(2)}x`)
        .join(', ')}`,
    );
  for (const t of targets) for (const text of figures.get(t)!.notes) console.log(`- ${t}: ${text}`);
}

const started = new Date();
const loadBefore = loadavg()
  .map((l) => l.toFixed(1))
  .join(', ');
// A run cut short still prints what it measured.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAll();
    void baseline?.remove();
    report(started, loadBefore);
    console.log(`\n(cut short by ${signal})`);
    process.exit(130);
  });
}
const backends: Backend[] = ['embedded'];
const [redisUp, mongoUp] = await Promise.all([reachable(redisUrl, 6379), reachable(mongoUrl, 27017)]);
if (redisUp && mongoUp) backends.push('redis+mongo');
else
  note(
    'redis+mongo',
    `skipped: ${[redisUp ? '' : `no Redis at ${redisUrl}`, mongoUp ? '' : `no MongoDB wire server at ${mongoUrl}`].filter(Boolean).join(', ')}`,
  );
if (parts.has('send')) {
  if (baselineCommit)
    baseline = await baselineCheckout(baselineCommit).catch((err) => {
      note('baseline', `skipped: ${(err as Error).message.split('\n')[0]}`);
      return undefined;
    });
  try {
    await sendFloor();
    await sendPeer();
    for (const backend of backends) await sendRelaybox(backend);
    if (baseline) await sendRelaybox('embedded', 'baseline', baseline);
  } finally {
    await baseline?.remove();
  }
}
if (parts.has('bulk')) for (const backend of backends) await bulk(backend);
if (parts.has('webhooks')) for (const backend of backends) await webhookDeliveries(backend);
report(started, loadBefore);
killAll();
process.exit(0);
