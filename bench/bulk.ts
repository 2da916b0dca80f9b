/**
 * Bulk jobs on the embedded default and on Redis + MongoDB wire (when
 * REDIS_URL and MONGODB_URL are set): the time to accept a 10,000-recipient
 * job (p50 of 5), the time until all its messages are handed to simulated
 * relays of a stated total capacity, and the dispatch wait of a single send
 * submitted right after the job. It reports, it does not assert.
 *
 *   npm run bench:bulk
 *   REDIS_URL=redis://127.0.0.1:6379 MONGODB_URL=mongodb://127.0.0.1:27017/relaybox npm run bench:bulk
 *
 * BENCH_RELAYS (4) simulated relays of BENCH_RELAY_CAPACITY (25) sends in
 * flight each; each reports sent, then delivered, as soon as it gets a send.
 * Every service role runs in this process (the in-process test app).
 * BENCH_DRAIN=0 measures accepting only.
 */
import { randomUUID } from 'node:crypto';
import { tenantProtocol } from '../src/actors/tenant.actor.ts';
import { actorClient } from '../src/runtime/actor.ts';
import { sleep } from '../src/runtime/actor-host.ts';
import { StandInRelay } from '../test/support/stand-in-relay.ts';
import { signup, startTestApp, type Backend, type TestApp } from '../test/support/test-app.ts';

const recipients = 10_000;
const acceptSamples = Number(process.env.BENCH_ACCEPT_SAMPLES || 5);
const relayCount = Number(process.env.BENCH_RELAYS || 4);
const relayCapacity = Number(process.env.BENCH_RELAY_CAPACITY || 25);
const targets = { acceptEmbeddedMs: 500, acceptRedisMongoMs: 3_000, singleDispatchMs: 1_000 };

interface Row {
  backend: Backend;
  acceptMs: number[];
  drainMs?: number;
  completedMs?: number;
  singleWaitMs?: number;
  singlePosition?: number;
  failure?: string;
}

const entries = (tag: string) => Array.from({ length: recipients }, (_, i) => ({ to: `+1${String(4155000000 + i)}`, body: `${tag} ${i}` }));
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Polls `check` every `everyMs`: reads that count a whole job are spaced out so the bench does not measure itself. */
async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, everyMs = 5): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Accepting: each sample on a quiet service (the previous job's background work, its conversations, finished). */
async function measureAccept(t: TestApp, row: Row): Promise<void> {
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
    await waitUntil(async () => (await jobs.findOne({ tenantId: org.orgId, teamId: org.teamId }, { id: res.body.jobId, conversationsTouched: true })) !== null, 300_000, 'the job\'s background work', 200);
  }
}

/** Draining: relays online, a job, then a single send right after it. */
async function measureDrain(t: TestApp, row: Row): Promise<void> {
  const org = await signup(t, 'Bench drain');
  const tenants = actorClient(t.app.runtime, tenantProtocol);
  const relays = Array.from({ length: relayCount }, () => new StandInRelay(t, org.orgId, org.teamId, { capacity: relayCapacity }));
  const handedOut = new Map<string, number>();
  const unsubscribe = t.app.messaging.link.onFrame((d) => {
    const relay = relays.find((r) => r.id === d.relayId && r.session === d.session);
    if (!relay || d.frame.type !== 'send') return;
    const { messageId, attempt } = d.frame;
    if (!handedOut.has(messageId)) handedOut.set(messageId, performance.now());
    const at = new Date().toISOString();
    void tenants.send(org.orgId, { kind: 'status', relayId: relay.id, session: relay.session, messageId, attempt, status: 'sent', at })
      .then(() => tenants.send(org.orgId, { kind: 'status', relayId: relay.id, session: relay.session, messageId, attempt, status: 'delivered', at }));
  });
  // Relays that stop heartbeating go offline (RELAY_HEARTBEAT_TIMEOUT_MS): these keep beating while the job drains.
  const beats = setInterval(() => relays.forEach((r) => void r.heartbeat()), 5_000);
  try {
    for (const r of relays) await r.connect();
    const started = performance.now();
    const job = await t.request('POST', '/api/v1/messages/bulk', { token: org.ownerToken, body: { messages: entries('drain') } });
    if (job.status !== 201) throw new Error(`accept answered ${job.status}`);
    const singleAt = performance.now();
    const single = await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to: '+14155559999', body: 'one-off' } });
    if (single.status !== 201) throw new Error(`single send answered ${single.status}`);
    await waitUntil(() => handedOut.has(single.body.id), 120_000, 'the single send');
    row.singleWaitMs = handedOut.get(single.body.id)! - singleAt;
    row.singlePosition = [...handedOut.keys()].indexOf(single.body.id);
    await waitUntil(() => handedOut.size >= recipients + 1, 600_000, 'every message handed out');
    row.drainMs = Math.max(...handedOut.values()) - started;
    await waitUntil(async () => (await t.request('GET', `/api/v1/messages/bulk/${job.body.jobId}`, { token: org.ownerToken })).body.status === 'completed', 600_000, 'the job completed', 500);
    row.completedMs = performance.now() - started;
  } finally {
    clearInterval(beats);
    unsubscribe();
    for (const r of relays) r.close();
  }
}

async function bench(backend: Backend): Promise<Row> {
  const row: Row = { backend, acceptMs: [] };
  let t: TestApp | undefined;
  try {
    // The simulated relays heartbeat, but a loaded machine must not take them offline mid-drain.
    t = await startTestApp(backend, { RUNTIME_KEY_PREFIX: `bulk${randomUUID().slice(0, 8)}`, RELAY_HEARTBEAT_TIMEOUT_MS: '600000' });
    await measureAccept(t, row);
    if (process.env.BENCH_DRAIN !== '0') await measureDrain(t, row);
  } catch (err) {
    row.failure = err instanceof Error ? err.message : String(err);
  } finally {
    await t?.stop();
  }
  return row;
}

const all: Backend[] = process.env.REDIS_URL && process.env.MONGODB_URL ? ['embedded', 'redis+mongo'] : ['embedded'];
const backends = process.env.BENCH_ONLY ? all.filter((b) => process.env.BENCH_ONLY!.split(',').includes(b)) : all;
const rows: Row[] = [];
for (const backend of backends) rows.push(await bench(backend));

const fmt = (ms: number | undefined) => (ms === undefined ? '-' : `${Math.round(ms)} ms`);
console.log(`\nBulk jobs: ${recipients.toLocaleString('en')} recipients; ${relayCount} simulated relays x ${relayCapacity} in flight = ${relayCount * relayCapacity} total capacity\n`);
console.log(`| backend | accept p50 of ${acceptSamples} (min-max) | all handed to relays | job completed | single send dispatch wait (position) |`);
console.log('|---|---|---|---|---|');
for (const r of rows) {
  const accept = r.acceptMs.length ? `${fmt(p50(r.acceptMs))} (${fmt(Math.min(...r.acceptMs))}-${fmt(Math.max(...r.acceptMs))})` : '-';
  console.log(`| ${r.backend} | ${accept} | ${fmt(r.drainMs)} | ${fmt(r.completedMs)} | ${fmt(r.singleWaitMs)}${r.singlePosition === undefined ? '' : ` (#${r.singlePosition + 1})`} |${r.failure ? ` failed: ${r.failure}` : ''}`);
}
console.log(`\nTargets: accept <= ${targets.acceptEmbeddedMs} ms embedded, <= ${targets.acceptRedisMongoMs} ms Redis + MongoDB wire; single send dispatched within ${targets.singleDispatchMs} ms while the job drains.`);
process.exit(0);
