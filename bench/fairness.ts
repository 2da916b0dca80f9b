/**
 * Fairness across organizations: one organization's 10,000-recipient job
 * drains to its simulated relays while another organization sends single
 * messages one after another; the second organization's single-send
 * dispatch time (from its request to its send frame at its relay) is
 * printed, p50 and p99, against the same with no job running, and the CPU
 * time this process spent meanwhile (what ran ahead of the single, which
 * other processes on a shared machine do not inflate). Targets: on the
 * embedded default the p50 under the job within 1.2x of the p50 without and
 * the p99 within 1.5x, paced and unpaced; on the wire the p99 within 2x
 * when paced. The unpaced job's whole drain is then set beside the same
 * job's on a service of its own with no other organization sending (target:
 * at least 90 % of that rate; embedded only). It reports, it does not assert.
 *
 *   npm run bench:fairness   (BENCH_TURNS=1 adds the event loop's turn lengths)
 *   REDIS_URL=redis://127.0.0.1:6379 MONGODB_URL=mongodb://127.0.0.1:27017/relaybox npm run bench:fairness
 *
 * Each backend runs twice: with sender pacing out of the way (the job's
 * organization drains as fast as its relays take it: the hardest case for
 * the other organization), and with the job's organization at the default
 * pace (1 a second per line, burst 3, 50 new contacts a day: what a customer
 * gets unless its admins change it); BENCH_PACES picks one of them.
 * BENCH_RELAYS (4) relays of BENCH_RELAY_CAPACITY (25) for the job,
 * BENCH_SINGLES (200) single sends BENCH_SINGLE_GAP_MS (20) apart, to one
 * relay of the second organization; every relay reports sent, then
 * delivered, as soon as it gets a send. Every service role runs in this
 * process (the in-process test app); the singles go on one kept-alive
 * connection, each request in one write, so it is on the wire when made, as
 * a remote client's is.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { keptConnection } from '../test/support/raw-http.ts';
import { StandInRelay } from '../test/support/stand-in-relay.ts';
import { signup, startTestApp, type Backend, type Org, type TestApp } from '../test/support/test-app.ts';

const relayCount = Number(process.env.BENCH_RELAYS || 4);
const relayCapacity = Number(process.env.BENCH_RELAY_CAPACITY || 25);
const singles = Number(process.env.BENCH_SINGLES || 200);
const gapMs = Number(process.env.BENCH_SINGLE_GAP_MS || 20);
const jobSize = 10_000;
/** A drain not done within this long is reported as not done. */
const drainCapMs = 300_000;
const timingTurns = process.env.BENCH_TURNS === '1';

/**
 * BENCH_TURNS=1: the length of each turn of the event loop while singles are
 * timed, by a probe that runs once a turn (`setImmediate` from itself). A
 * single send waits at each of its turns for the work already under way in
 * it. The probe keeps the loop from sleeping, so it is left out unless asked.
 */
function turnProbe(): { stop(): string } {
  const at: number[] = [];
  let on = true;
  const probe = () => {
    at.push(performance.now());
    if (on) setImmediate(probe);
  };
  setImmediate(probe);
  return {
    stop() {
      on = false;
      const gaps = at
        .slice(1)
        .map((t, i) => t - at[i]!)
        .sort((a, b) => a - b);
      const span = gaps.reduce((a, b) => a + b, 0);
      // Weighted by time: the length of the turn that a moment (a request arriving) falls in.
      const turnAt = (x: number) => {
        let sum = 0;
        for (const g of gaps) if ((sum += g) >= x * span) return g.toFixed(1);
        return gaps.at(-1)!.toFixed(1);
      };
      const long = gaps.filter((g) => g >= 4).reduce((a, b) => a + b, 0);
      return `${gaps.length} turns; a moment falls in a turn of p50 ${turnAt(0.5)}, p90 ${turnAt(0.9)}, p99 ${turnAt(0.99)} ms; turns of 4 ms or more ${Math.round((100 * long) / span)} % of the time`;
    },
  };
}

/** Relays of `org` that report every send sent, then delivered, at once; `handedOut` records when each message's first send frame came. */
function autoRelays(t: TestApp, org: Org, count: number, capacity: number, handedOut: Map<string, number>) {
  const relays = Array.from({ length: count }, () => new StandInRelay(t, org.orgId, org.teamId, { capacity }));
  const unsubscribe = t.app.messaging.link.onFrame((d) => {
    const relay = relays.find((r) => r.id === d.relayId && r.session === d.session);
    if (!relay || d.frame.type !== 'send') return;
    const { messageId, attempt } = d.frame;
    if (!handedOut.has(messageId)) handedOut.set(messageId, performance.now());
    void relay
      .report(messageId, 'sent', undefined, attempt)
      .then(() => relay.report(messageId, 'delivered', undefined, attempt));
  });
  const beats = setInterval(() => relays.forEach((r) => void r.heartbeat()), 5_000);
  return {
    connect: async () => {
      for (const r of relays) await r.connect();
    },
    close: () => {
      clearInterval(beats);
      unsubscribe();
      for (const r of relays) r.close();
    },
  };
}

/**
 * Single sends of `org`, one after another, each timed from its request to
 * its send frame; stops early when `until` says so. `cpu` gets the CPU time
 * this process spent meanwhile (ms): the work that ran ahead of the single,
 * which other processes on a shared machine do not inflate as they do the
 * wall time.
 */
async function timeSingles(
  t: TestApp,
  org: Org,
  handedOut: Map<string, number>,
  until: () => boolean = () => true,
  cpu: number[] = [],
): Promise<number[]> {
  const waits: number[] = [];
  const client = await keptConnection(t.base);
  const headers: [string, string][] = [
    ['Authorization', `Bearer ${org.ownerToken}`],
    ['Content-Type', 'application/json'],
  ];
  for (let i = 0; i < singles && until(); i++) {
    const body = JSON.stringify({ to: `+1415666${String(i).padStart(4, '0')}`, body: `single ${i}` });
    const started = performance.now();
    const cpuBefore = process.cpuUsage();
    const res = await client.request('POST', '/api/v1/messages', headers, body);
    if (res.status !== 201) throw new Error(`single send answered ${res.status}: ${res.body}`);
    const id = (JSON.parse(res.body) as { id: string }).id;
    const deadline = Date.now() + 60_000;
    while (!handedOut.has(id)) {
      if (Date.now() > deadline) throw new Error('a single send was not handed out within 60 s');
      await sleep(1);
    }
    waits.push(handedOut.get(id)! - started);
    const used = process.cpuUsage(cpuBefore);
    cpu.push((used.user + used.system) / 1000);
    await sleep(gapMs);
  }
  client.close();
  return waits;
}

/** The service every run starts: keys of its own, relays that never time out while the bench holds them. */
const startBenchApp = (backend: Backend) =>
  startTestApp(backend, {
    RUNTIME_KEY_PREFIX: `fair${randomUUID().slice(0, 8)}`,
    RELAY_HEARTBEAT_TIMEOUT_MS: '600000',
  });

/** The busy organization's 10,000-recipient job; resolves when it is accepted. */
async function postJob(t: TestApp, busy: Org): Promise<void> {
  const job = await t.request('POST', '/api/v1/messages/bulk', {
    token: busy.ownerToken,
    body: {
      messages: Array.from({ length: jobSize }, (_, i) => ({
        to: `+1415777${String(i).padStart(4, '0')}`,
        body: `job ${i}`,
      })),
    },
  });
  if (job.status !== 201) throw new Error(`the job answered ${job.status}`);
}

/** Seconds from `started` until the job's last message is handed out (at most `drainCapMs`; undefined past it). */
async function drained(started: number, handed: () => number): Promise<number | undefined> {
  while (handed() < jobSize) {
    if (performance.now() - started > drainCapMs) return undefined;
    await sleep(5);
  }
  return (performance.now() - started) / 1000;
}

/**
 * The unpaced job's drain with no other organization sending, on a service
 * of its own started the same way: what its drain beside the singles is set
 * against (target: at least 90 % of this rate).
 */
async function jobAlone(backend: Backend): Promise<number | undefined> {
  const t = await startBenchApp(backend);
  const handedOut = new Map<string, number>();
  const busy = await signup(t, 'Bench busy');
  const busyRelays = autoRelays(t, busy, relayCount, relayCapacity, handedOut);
  try {
    await busyRelays.connect();
    await postJob(t, busy);
    return await drained(performance.now(), () => handedOut.size);
  } finally {
    busyRelays.close();
    await t.stop();
  }
}

/**
 * Whether the job's whole drain is set beside one with no other organization
 * sending: unpaced (paced, its rate is its pace) and on the embedded default
 * (on the wire double the drain takes minutes, FerretDB scanning each filter).
 */
const comparesDrain = (backend: Backend, pace: JobPace) => pace === 'unpaced' && backend === 'embedded';

const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

/** The job's organization's pace: none (as fast as its relays take it), or the defaults. */
type JobPace = 'unpaced' | 'default pace';

async function run(backend: Backend, pace: JobPace) {
  const t = await startBenchApp(backend);
  const handedOut = new Map<string, number>();
  const busy = await signup(t, 'Bench busy');
  const quiet = await signup(t, 'Bench quiet');
  const busyRelays = autoRelays(t, busy, relayCount, relayCapacity, handedOut);
  const quietRelay = autoRelays(t, quiet, 1, 10, handedOut);
  try {
    if (pace === 'default pace') {
      const paced = await t.request('PUT', '/api/v1/organization/pacing', {
        token: busy.ownerToken,
        body: { perSecond: 1, burst: 3, newContactsPerDay: 50 },
      });
      if (paced.status !== 200) throw new Error(`pacing answered ${paced.status}`);
    }
    await busyRelays.connect();
    await quietRelay.connect();
    const cpuAlone: number[] = [];
    const cpuLoaded: number[] = [];
    let probe = timingTurns ? turnProbe() : undefined;
    const alone = await timeSingles(t, quiet, handedOut, undefined, cpuAlone);
    const turnsAlone = probe?.stop();
    const before = handedOut.size;
    await postJob(t, busy);
    const jobStarted = performance.now();
    // Measured while the job drains: from its first messages handed out (100 of them, or its lines' first bursts when paced) until its last.
    while (handedOut.size < before + (pace === 'unpaced' ? 100 : relayCount * 3)) await sleep(5);
    const jobHanded = () => handedOut.size - before;
    probe = timingTurns ? turnProbe() : undefined;
    const loaded = await timeSingles(t, quiet, handedOut, () => jobHanded() < jobSize, cpuLoaded);
    const turnsLoaded = probe?.stop();
    const drainedWhileMeasuring = jobHanded();
    const measuredSeconds = (performance.now() - jobStarted) / 1000;
    // The job's whole drain, to set beside the same job's with no other organization sending.
    const drainSeconds = comparesDrain(backend, pace) ? await drained(jobStarted, jobHanded) : undefined;
    const turns = turnsAlone && turnsLoaded ? { alone: turnsAlone, loaded: turnsLoaded } : undefined;
    return { alone, loaded, cpuAlone, cpuLoaded, drainedWhileMeasuring, measuredSeconds, drainSeconds, turns };
  } finally {
    busyRelays.close();
    quietRelay.close();
    await t.stop();
  }
}

const paces = (process.env.BENCH_PACES || 'unpaced,default pace')
  .split(',')
  .filter((p): p is JobPace => p === 'unpaced' || p === 'default pace');
const all: Backend[] = process.env.REDIS_URL && process.env.MONGODB_URL ? ['embedded', 'redis+mongo'] : ['embedded'];
console.log(
  `# fairness: ${jobSize}-recipient job on ${relayCount} relays x ${relayCapacity} while another organization sends ${singles} singles ${gapMs} ms apart; load before ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')}`,
);
console.log(
  '| backend | the job | singles alone: p50 / p99 ms | singles while the job drains: p50 / p99 ms (n) | p50 / p99 ratio | job messages handed out meanwhile | the job drained, beside the singles / alone |',
);
console.log('|---|---|---|---|---|---|---|');
const cpuLines: string[] = [];
const rate = (seconds: number | undefined) => (seconds === undefined ? undefined : jobSize / seconds);
for (const backend of all) {
  for (const pace of paces) {
    try {
      const r = await run(backend, pace);
      const p50 = quantile(r.loaded, 0.5) / quantile(r.alone, 0.5);
      const p99 = quantile(r.loaded, 0.99) / quantile(r.alone, 0.99);
      // Paced, the job's rate is its pace, whoever else sends; unpaced, it is set beside a run of its own.
      let drain = '-';
      if (comparesDrain(backend, pace)) {
        const beside = rate(r.drainSeconds);
        const alone = rate(await jobAlone(backend));
        const show = (x: number | undefined) => (x === undefined ? 'not done' : `${Math.round(x)}/s`);
        drain = `${show(beside)} / ${show(alone)}`;
        if (beside !== undefined && alone !== undefined) drain += ` (${(beside / alone).toFixed(2)}, target ≥ 0.90)`;
      }
      const targets =
        backend === 'embedded' ? 'targets ≤ 1.20 / ≤ 1.50' : pace === 'unpaced' ? 'no target' : 'target p99 ≤ 2.00';
      console.log(
        `| ${backend} | ${pace} | ${quantile(r.alone, 0.5).toFixed(1)} / ${quantile(r.alone, 0.99).toFixed(1)} | ${quantile(r.loaded, 0.5).toFixed(1)} / ${quantile(r.loaded, 0.99).toFixed(1)} (${r.loaded.length}) | ${p50.toFixed(2)} / ${p99.toFixed(2)} (${targets}) | ${r.drainedWhileMeasuring} in ${r.measuredSeconds.toFixed(1)} s | ${drain} |`,
      );
      const cpu = (xs: number[]) => `${quantile(xs, 0.5).toFixed(1)} / ${quantile(xs, 0.99).toFixed(1)}`;
      cpuLines.push(
        `# ${backend}, ${pace}: CPU ms this process spent per single, p50 / p99: ${cpu(r.cpuAlone)} alone, ${cpu(r.cpuLoaded)} while the job drains`,
      );
      if (r.turns)
        cpuLines.push(
          `# ${backend}, ${pace}: event loop turns alone: ${r.turns.alone}`,
          `# ${backend}, ${pace}: event loop turns while the job drains: ${r.turns.loaded}`,
        );
    } catch (err) {
      console.log(`| ${backend} | ${pace} | failed: ${err instanceof Error ? err.message : String(err)} | | | | |`);
    }
  }
}
for (const line of cpuLines) console.log(line);
console.log(
  `# load after ${loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')}`,
);
process.exit(0);
