/**
 * What a long queue costs the tenant actor, on the embedded default: one
 * organization's queue filled with N messages (no relay online), then the
 * heap per queued message (after GC) beyond the first 10,000, the RSS, and
 * the time from a restart to the first answer of `/healthz`. It reports, it
 * does not assert.
 *
 *   npm run bench:queued-heap
 *   BENCH_QUEUED=1000000 npm run bench:queued-heap
 *
 * The messages are stored directly, as a restart finds them (queued, in the
 * messages collection), 5,000 a batch: the first 10,000, a restart, then
 * the rest. The heap is measured in this process (`--expose-gc`): after each
 * restart, before and after the tenant actor is activated (a status read of
 * a queued message, while `/healthz` is polled: its slowest answer then is
 * printed), and again once a relay is online and has been handed a message;
 * what the activation adds at N less what it adds at 10,000, divided by the
 * messages beyond 10,000, is the figure the target is about. The restart is measured
 * twice: in this process (the app created on the data directory until
 * `/healthz` answers) and as a new process (`src/main.ts` spawned until
 * `/healthz` answers, Node.js and module loading included), whose RSS is read
 * once its tenant actor holds the queue.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { tenantProtocol } from '../src/actors/tenant/protocol.ts';
import type { TenantState } from '../src/actors/tenant/tenant-state.ts';
import { createApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createHttpServer } from '../src/http/server.ts';
import { createLogger } from '../src/log.ts';
import type { MessageDoc } from '../src/messages/message-store.ts';
import { StandInRelay } from '../test/support/stand-in-relay.ts';
import { request, signup, type TestApp } from '../test/support/test-app.ts';

const queued = Number(process.env.BENCH_QUEUED || 150_000);
const batch = 5_000;
const targets = { bytesPerMessage: 150, healthzMs: 1_000 };
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

if (typeof globalThis.gc !== 'function') throw new Error('run with --expose-gc (npm run bench:queued-heap)');
const gc = globalThis.gc as () => void;

/** The heap in use after two full collections. */
async function heapUsed(): Promise<number> {
  for (let i = 0; i < 2; i++) {
    gc();
    await sleep(50);
  }
  return process.memoryUsage().heapUsed;
}

interface Running {
  app: App;
  base: string;
  stop(): Promise<void>;
}

/** The whole service in this process on `dataDir`, as `src/main.ts` starts it. */
async function start(env: Record<string, string>): Promise<Running> {
  const config = loadConfig(env);
  const log = createLogger('silent');
  const app = await createApp(config, log, { consume: true });
  const http = createHttpServer({ config, log, routes: app.routes, ...app.hooks });
  const gateway = app.attachGateway(http);
  const port = await http.listen('127.0.0.1', 0);
  return {
    app,
    base: `http://127.0.0.1:${port}`,
    async stop() {
      await http.close();
      await gateway.close();
      await app.close();
    },
  };
}

/** Polls `url` until it answers 200: the milliseconds since `since`. */
async function answered(url: string, since: number, timeoutMs = 120_000): Promise<number> {
  for (;;) {
    try {
      if ((await fetch(url)).status === 200) return performance.now() - since;
    } catch {
      // not listening yet
    }
    if (performance.now() - since > timeoutMs) throw new Error(`${url} did not answer within ${timeoutMs} ms`);
    await sleep(5);
  }
}

function queuedMessage(tenantId: string, teamId: string, i: number, at: number): MessageDoc {
  const iso = new Date(at).toISOString();
  const to = `+1415${String(5_000_000 + (i % 4_000_000)).padStart(7, '0')}`;
  return {
    id: `msg_bench_${i}`,
    tenantId,
    teamId,
    direction: 'sent',
    status: 'queued',
    to,
    from: null,
    participant: to,
    conversationId: `conv_bench_${i % 1_000}`,
    body: `queued ${i}`,
    attachments: [],
    priority: i % 10 === 0 ? 50 : 0,
    fromNumber: null,
    attempts: 0,
    lastError: null,
    relayId: null,
    queuedAt: iso,
    sentAt: null,
    deliveredAt: null,
    readAt: null,
    createdAt: iso,
    updatedAt: iso,
  };
}

/** `src/main.ts` spawned on `env`'s data directory: the time to `/healthz`, then `activate` timed and the RSS after it. */
async function restartProcess(env: Record<string, string>, activate?: (base: string) => Promise<unknown>) {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const spawnAt = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: 'ignore',
  });
  try {
    const base = `http://127.0.0.1:${port}`;
    const healthzMs = await answered(`${base}/healthz`, spawnAt);
    const activatedAt = performance.now();
    await activate?.(base);
    const activatedMs = performance.now() - activatedAt;
    const vm = /VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${child.pid}/status`, 'utf8'));
    return { healthzMs, activatedMs, rss: vm ? Number(vm[1]) * 1024 : NaN };
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

const tenantStates = (app: App) => [...app.runtime.statesOf(tenantProtocol.type)] as TenantState[];
/** The first messages of an organization, whose cost the heap target leaves out. */
const first = 10_000;

interface Restarted {
  running: Running;
  healthzMs: number;
  idle: number;
  activated: number;
  statusMs: number;
  slowestHealthz: number;
  longestStall: number;
  waiting: unknown;
  counted: number;
  inMemory: number;
}

/** A restart in this process on `env` with `count` stored: /healthz, then the heap before and after the tenant actor counts the queue. */
async function restartHere(env: Record<string, string>, token: string, count: number): Promise<Restarted> {
  const restartAt = performance.now();
  const running = await start(env);
  const healthzMs = await answered(`${running.base}/healthz`, restartAt);
  const idle = await heapUsed();
  const statusAt = performance.now();
  let activating = true;
  let slowestHealthz = 0;
  // The poll runs in this process, so a stall of its event loop delays the poll's timer as much as the answer: the
  // loop's own delay, sampled every 10 ms, is what a client outside would have waited at worst.
  const stalls = monitorEventLoopDelay({ resolution: 10 });
  stalls.enable();
  const polling = (async () => {
    while (activating) {
      const at = performance.now();
      await fetch(`${running.base}/healthz`);
      slowestHealthz = Math.max(slowestHealthz, performance.now() - at);
      await sleep(50);
    }
  })();
  const counted = () => tenantStates(running.app).reduce((n, s) => n + s.queue.size, 0);
  const waiting = (await request(running.base, 'GET', `/api/v1/messages/msg_bench_${count - 1}/status`, { token })).body
    .waitingFor;
  // Under load the status read may answer before the activation is done (its ask times out): wait until the queue is counted.
  for (let i = 0; i < 2_400 && counted() < count; i++) await sleep(50);
  const statusMs = performance.now() - statusAt;
  activating = false;
  await polling;
  stalls.disable();
  const longestStall = stalls.max / 1e6;
  const activated = await heapUsed();
  const inMemory = tenantStates(running.app).reduce((n, s) => n + s.queue.held, 0);
  return {
    running,
    healthzMs,
    idle,
    activated,
    statusMs,
    slowestHealthz,
    longestStall,
    waiting,
    counted: counted(),
    inMemory,
  };
}

async function main(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-queued-heap-'));
  const env = { DATA_DIR: dataDir, LOG_LEVEL: 'silent', RUNTIME_KEY_PREFIX: `qh${randomUUID().slice(0, 8)}` };
  try {
    // Seed: an organization, and its queue stored as a restart finds it: the first 10,000, then the rest.
    const seeding = await start(env);
    const org = await signup({ request: (m, p, o) => request(seeding.base, m, p, o) } as TestApp, 'Bench queue');
    await seeding.stop();
    const seededAt = performance.now();
    const seed = async (from: number, to: number) => {
      const running = await start(env);
      const messages = running.app.store.collection<MessageDoc>('messages');
      const oldest = Date.now() - queued;
      for (let i = from; i < to; i += batch) {
        const docs = Array.from({ length: Math.min(batch, to - i) }, (_, j) =>
          queuedMessage(org.orgId, org.teamId, i + j, oldest + i + j),
        );
        await messages.insertMany({ tenantId: org.orgId }, docs);
      }
      await running.stop();
    };
    await seed(0, Math.min(first, queued));
    const atFirst = await restartHere(env, org.ownerToken, Math.min(first, queued));
    await atFirst.running.stop();
    await seed(first, queued);
    console.log(`seeded ${queued} queued messages in ${((performance.now() - seededAt) / 1000).toFixed(1)} s`);

    // A restart in this process with the whole queue stored.
    const whole = await restartHere(env, org.ownerToken, queued);
    const { running } = whole;
    // A relay online with room for one send, never reported on: the dispatch hands it the first message.
    const relay = new StandInRelay({ app: running.app } as TestApp, org.orgId, org.teamId, { capacity: 1 });
    await relay.connect();
    for (let i = 0; i < 2_400 && relay.sends.length === 0; i++) await sleep(25);
    const online = await heapUsed();
    const countedOnline = tenantStates(running.app).reduce((n, s) => n + s.queue.size, 0);
    relay.close();
    await running.stop();

    // A restart as a new process: spawn to /healthz, then its RSS once its tenant actor counts the queue; the same on an empty data directory for reference.
    const empty = await mkdtemp(join(tmpdir(), 'relaybox-queued-heap-empty-'));
    const reference = await restartProcess({ ...env, DATA_DIR: empty }).finally(() =>
      rm(empty, { recursive: true, force: true }),
    );
    const restarted = await restartProcess(env, (base) =>
      request(base, 'GET', `/api/v1/messages/msg_bench_${queued - 1}/status`, { token: org.ownerToken }),
    );

    const perMessage = (bytes: number) => `${(bytes / queued).toFixed(1)} B`;
    const firstCost = atFirst.activated - atFirst.idle;
    const beyond = queued > first ? (whole.activated - whole.idle - firstCost) / (queued - first) : NaN;
    console.log(
      JSON.stringify({
        queued,
        waitingFor: whole.waiting,
        countedAfterActivation: whole.counted,
        heldInMemory: whole.inMemory,
        countedWithRelayOnline: countedOnline,
        handedOut: relay.sends.length,
      }),
    );
    console.log(`heap after restart, before the tenant actor: ${mib(whole.idle)}`);
    console.log(
      `heap with the tenant actor activated:      ${mib(whole.activated)} (+${perMessage(whole.activated - whole.idle)} per queued message; the queue counted ${whole.statusMs.toFixed(0)} ms after the status read)`,
    );
    console.log(
      `  at ${first.toLocaleString('en')} queued:                    +${mib(firstCost)} (+${(firstCost / Math.min(first, queued)).toFixed(1)} B per queued message)`,
    );
    console.log(
      `heap per queued message beyond the first ${first.toLocaleString('en')}: ${beyond.toFixed(1)} B (target ≤ ${targets.bytesPerMessage} B)`,
    );
    console.log(
      `heap with a relay online (one handed out): ${mib(online)} (+${perMessage(online - whole.idle)} per queued message)`,
    );
    console.log(`slowest /healthz while the tenant actor was activated: ${whole.slowestHealthz.toFixed(0)} ms`);
    console.log(
      `longest event-loop stall while it was activated: ${whole.longestStall.toFixed(0)} ms (what a client outside waits at worst)`,
    );
    console.log(
      `restart to /healthz at ${queued.toLocaleString('en')} queued, in this process: ${whole.healthzMs.toFixed(0)} ms (target ≤ ${targets.healthzMs} ms at 1,000,000; ${atFirst.healthzMs.toFixed(0)} ms at ${first.toLocaleString('en')})`,
    );
    console.log(
      `restart to /healthz, a new process:        ${restarted.healthzMs.toFixed(0)} ms (Node.js and tsx loading included; ${reference.healthzMs.toFixed(0)} ms on an empty data directory)`,
    );
    console.log(
      `that process's status read (activation):  ${restarted.activatedMs.toFixed(0)} ms; its RSS then: ${mib(restarted.rss)}`,
    );
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
