/**
 * Bulk jobs on the embedded default and on Redis + MongoDB wire (when
 * REDIS_URL and MONGODB_URL are set): the time to accept a 10,000-recipient
 * job (p50 of 5, each to 10,000 numbers not seen before, so no parse is
 * cached), the drain (from the request to the last of its messages handed to
 * simulated relays of a stated total capacity), the dispatch wait of a single
 * send submitted right after the job and of one submitted while it drains,
 * and the cancel of a 10,000-message job: the answer, and the time until every
 * message is stopped in the store. It reports, it does not assert.
 *
 *   npm run bench:bulk
 *   REDIS_URL=redis://127.0.0.1:6379 MONGODB_URL=mongodb://127.0.0.1:27017/relaybox npm run bench:bulk
 *
 * BENCH_RELAYS (4) simulated relays of BENCH_RELAY_CAPACITY (25) sends in
 * flight each; each reports sent, then delivered, as soon as it gets a send.
 * Every service role runs in this process (the in-process test app).
 * BENCH_DRAIN=0 measures accepting only; BENCH_CANCEL=0 leaves out the cancel.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { StandInRelay } from '../test/support/stand-in-relay.ts';
import { signup, startTestApp, type Backend, type TestApp } from '../test/support/test-app.ts';
import { isEntryPoint } from './entry-point.ts';

export const recipients = 10_000;
const acceptSamples = Number(process.env.BENCH_ACCEPT_SAMPLES || 5);
const relayCount = Number(process.env.BENCH_RELAYS || 4);
const relayCapacity = Number(process.env.BENCH_RELAY_CAPACITY || 25);
const targets = { acceptEmbeddedMs: 500, acceptRedisMongoMs: 3_000, singleDispatchMs: 1_000 };

export interface Row {
  backend: Backend;
  acceptMs: number[];
  drainMs?: number;
  completedMs?: number;
  singleWaitMs?: number;
  singlePosition?: number;
  midWaitMs?: number;
  /** How far the drain got: messages handed out and the time since the request (kept up to date, for a run cut short). */
  drained?: { count: number; ms: number };
  cancelMs?: number;
  stoppedMs?: number;
  failure?: string;
}

/** The handed-out count at which the second single send is submitted: the job is draining at full speed by then. */
const midDrainAt = 2_000;

/** Up to 10,000 distinct valid US numbers per batch (+1 415 <exchange> xxxx): each batch its own exchange, so no number was seen before. */
let batches = 0;
const entries = (tag: string, count = recipients) => {
  const exchange = 500 + batches++;
  return Array.from({ length: count }, (_, i) => ({
    to: `+1415${exchange}${String(i).padStart(4, '0')}`,
    body: `${tag} ${i}`,
  }));
};
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Polls `check` every `everyMs`: reads that count a whole job are spaced out so the bench does not measure itself. */
async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  everyMs = 5,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Accepting: each sample on a quiet service (the previous job's background work, its conversations, finished); `awaitLastJob: false` leaves the last job's. */
export async function measureAccept(t: TestApp, row: Row, opts: { awaitLastJob?: boolean } = {}): Promise<void> {
  const org = await signup(t, 'Bench accept');
  const jobs = t.app.store.collection('bulk_jobs');
  for (let i = 0; i < acceptSamples; i++) {
    const body = { messages: entries(`sample ${i}`) };
    const started = performance.now();
    const res = await t.request('POST', '/api/v1/messages/bulk', { token: org.ownerToken, body });
    const ms = performance.now() - started;
    if (res.status !== 201) throw new Error(`accept answered ${res.status}: ${res.text.slice(0, 200)}`);
    row.acceptMs.push(ms);
    console.log(`# ${row.backend}: accept ${i + 1}/${acceptSamples}: ${ms.toFixed(0)} ms`);
    if (i === acceptSamples - 1 && opts.awaitLastJob === false) break; // nothing is measured after it
    await waitUntil(
      async () =>
        (await jobs.findOne(
          { tenantId: org.orgId, teamId: org.teamId },
          { id: res.body.jobId, conversationsTouched: true },
        )) !== null,
      600_000,
      "the job's background work",
      200,
    );
  }
}

/** Draining: relays online, a job of `count` messages, then a single send right after it. */
export async function measureDrain(t: TestApp, row: Row, count = recipients): Promise<void> {
  const midCount = Math.min(midDrainAt, Math.floor(count / 2));
  const org = await signup(t, 'Bench drain');
  const relays = Array.from(
    { length: relayCount },
    () => new StandInRelay(t, org.orgId, org.teamId, { capacity: relayCapacity }),
  );
  const handedOut = new Map<string, number>();
  let startedAt: number | undefined;
  const unsubscribe = t.app.messaging.link.onFrame((d) => {
    const relay = relays.find((r) => r.id === d.relayId && r.session === d.session);
    if (!relay || d.frame.type !== 'send') return;
    const { messageId, attempt } = d.frame;
    if (!handedOut.has(messageId)) handedOut.set(messageId, performance.now());
    if (startedAt !== undefined) row.drained = { count: handedOut.size, ms: performance.now() - startedAt };
    // As the gateway reports them: to the relay actor, which frees the credit and passes the status on.
    void relay
      .report(messageId, 'sent', undefined, attempt)
      .then(() => relay.report(messageId, 'delivered', undefined, attempt));
  });
  // Relays that stop heartbeating go offline (RELAY_HEARTBEAT_TIMEOUT_MS): these keep beating while the job drains.
  const beats = setInterval(() => relays.forEach((r) => void r.heartbeat()), 5_000);
  try {
    for (const r of relays) await r.connect();
    const body = { messages: entries('drain', count) };
    const started = performance.now();
    startedAt = started;
    const job = await t.request('POST', '/api/v1/messages/bulk', { token: org.ownerToken, body });
    if (job.status !== 201) throw new Error(`accept answered ${job.status}`);
    const singleAt = performance.now();
    const single = await t.request('POST', '/api/v1/messages', {
      token: org.ownerToken,
      body: { to: '+14155559999', body: 'one-off' },
    });
    if (single.status !== 201) throw new Error(`single send answered ${single.status}`);
    await waitUntil(() => handedOut.has(single.body.id), 120_000, 'the single send');
    row.singleWaitMs = handedOut.get(single.body.id)! - singleAt;
    row.singlePosition = [...handedOut.keys()].indexOf(single.body.id);
    await waitUntil(() => handedOut.size >= midCount, 600_000, `${midCount} messages handed out`);
    const midAt = performance.now();
    const mid = await t.request('POST', '/api/v1/messages', {
      token: org.ownerToken,
      body: { to: '+14155559998', body: 'one-off while the job drains' },
    });
    if (mid.status !== 201) throw new Error(`single send answered ${mid.status}`);
    await waitUntil(() => handedOut.has(mid.body.id), 120_000, 'the single send sent while the job drains');
    row.midWaitMs = handedOut.get(mid.body.id)! - midAt;
    await waitUntil(() => handedOut.size >= count + 2, 600_000, 'every message handed out');
    const jobIds = new Set([...handedOut.keys()].filter((id) => id !== single.body.id && id !== mid.body.id));
    row.drainMs = Math.max(...[...handedOut].filter(([id]) => jobIds.has(id)).map(([, at]) => at)) - started;
    await waitUntil(
      async () =>
        (await t.request('GET', `/api/v1/messages/bulk/${job.body.jobId}`, { token: org.ownerToken })).body.status ===
        'completed',
      600_000,
      'the job completed',
      500,
    );
    row.completedMs = performance.now() - started;
  } finally {
    clearInterval(beats);
    unsubscribe();
    for (const r of relays) r.close();
  }
}

/** Cancelling: a 10,000-message job with no relay online (nothing is handed out), cancelled; its answer, then every message stopped in the store. */
async function measureCancel(t: TestApp, row: Row): Promise<void> {
  const org = await signup(t, 'Bench cancel');
  const job = await t.request('POST', '/api/v1/messages/bulk', {
    token: org.ownerToken,
    body: { messages: entries('cancel') },
  });
  if (job.status !== 201) throw new Error(`accept answered ${job.status}`);
  const messages = t.app.store.collection('messages');
  const scope = { tenantId: org.orgId, teamId: org.teamId };
  // Its messages are on the send queue: released by the request, or (since the job actor does it) once the job says so.
  const jobs = t.app.store.collection('bulk_jobs');
  await waitUntil(
    async () => (await jobs.findOne(scope, { id: job.body.jobId, released: false })) === null,
    600_000,
    'the job released',
    200,
  );
  const started = performance.now();
  const res = await t.request('POST', `/api/v1/messages/bulk/${job.body.jobId}/cancel`, { token: org.ownerToken });
  row.cancelMs = performance.now() - started;
  if (res.status !== 200) throw new Error(`cancel answered ${res.status}: ${res.text.slice(0, 200)}`);
  await waitUntil(
    async () => (await messages.count(scope, { jobId: job.body.jobId, status: 'queued' })) === 0,
    600_000,
    'every message stopped',
    200,
  );
  row.stoppedMs = performance.now() - started;
}

/** The whole service in this process; the simulated relays heartbeat, but a loaded machine must not take them offline mid-drain. */
export function startBulkApp(backend: Backend): Promise<TestApp> {
  return startTestApp(backend, {
    RUNTIME_KEY_PREFIX: `bulk${randomUUID().slice(0, 8)}`,
    RELAY_HEARTBEAT_TIMEOUT_MS: '600000',
  });
}

async function bench(row: Row): Promise<void> {
  const backend = row.backend;
  let t: TestApp | undefined;
  // Each phase on its own: one that fails or times out is reported, and the next still runs.
  const phase = async (name: string, run: (app: TestApp) => Promise<void>) => {
    try {
      await run(t!);
    } catch (err) {
      row.failure = `${row.failure ? `${row.failure}; ` : ''}${name}: ${err instanceof Error ? err.message : String(err)}`;
    }
  };
  try {
    t = await startBulkApp(backend);
    if (acceptSamples > 0) await phase('accept', (app) => measureAccept(app, row));
    if (process.env.BENCH_CANCEL !== '0') await phase('cancel', (app) => measureCancel(app, row));
    if (process.env.BENCH_DRAIN !== '0') await phase('drain', (app) => measureDrain(app, row));
  } catch (err) {
    row.failure = err instanceof Error ? err.message : String(err);
  } finally {
    await t?.stop();
  }
}

const all: Backend[] = process.env.REDIS_URL && process.env.MONGODB_URL ? ['embedded', 'redis+mongo'] : ['embedded'];
const backends = process.env.BENCH_ONLY ? all.filter((b) => process.env.BENCH_ONLY!.split(',').includes(b)) : all;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(', ');
const loadBefore = load();
const rows: Row[] = [];
if (isEntryPoint(import.meta.url)) {
  // A run cut short (SIGTERM, Ctrl-C) still prints what it measured.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => {
      report(`cut short by ${signal}`);
      process.exit(1);
    });
  }
  for (const backend of backends) {
    const row: Row = { backend, acceptMs: [] };
    rows.push(row);
    await bench(row);
  }
  report();
  process.exit(0);
}

function report(note?: string): void {
  const fmt = (ms: number | undefined) => (ms === undefined ? '-' : `${Math.round(ms)} ms`);
  const rate = (ms: number | undefined) => (ms === undefined ? '' : ` (${Math.round(recipients / (ms / 1000))}/s)`);
  console.log(
    `\nBulk jobs: ${recipients.toLocaleString('en')} recipients; ${relayCount} simulated relays x ${relayCapacity} in flight = ${relayCount * relayCapacity} total capacity`,
  );
  console.log(`Load average (1, 5, 15 min): ${loadBefore} at the start, ${load()} at the end\n`);
  console.log(
    `| backend | accept p50 of ${acceptSamples} (min-max) | drain: accept to all handed to relays | job completed | single send right after the job: wait (position) | single send while it drains: wait | cancel: answer / all stopped |`,
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const accept = r.acceptMs.length
      ? `${fmt(p50(r.acceptMs))} (${fmt(Math.min(...r.acceptMs))}-${fmt(Math.max(...r.acceptMs))})`
      : '-';
    const single = `${fmt(r.singleWaitMs)}${r.singlePosition === undefined ? '' : ` (#${r.singlePosition + 1})`}`;
    const drain =
      r.drainMs !== undefined
        ? `${fmt(r.drainMs)}${rate(r.drainMs)}`
        : r.drained
          ? `not done: ${r.drained.count} in ${fmt(r.drained.ms)} (${Math.round(r.drained.count / (r.drained.ms / 1000))}/s)`
          : '-';
    console.log(
      `| ${r.backend} | ${accept} | ${drain} | ${fmt(r.completedMs)} | ${single} | ${fmt(r.midWaitMs)} | ${fmt(r.cancelMs)} / ${fmt(r.stoppedMs)} |${r.failure ? ` failed: ${r.failure}` : ''}`,
    );
  }
  for (const r of rows.filter((row) => row.backend === 'redis+mongo' && row.drainMs !== undefined)) {
    console.log(
      `\nRedis + MongoDB wire drain: ${fmt(r.drainMs)} from the request to the last of ${recipients.toLocaleString('en')} messages handed to the relays${rate(r.drainMs)}.`,
    );
  }
  console.log(
    `\nTargets: accept <= ${targets.acceptEmbeddedMs} ms embedded, <= ${targets.acceptRedisMongoMs} ms Redis + MongoDB wire; single send dispatched within ${targets.singleDispatchMs} ms while the job drains.`,
  );
  if (note) console.log(`\n(${note})`);
}
