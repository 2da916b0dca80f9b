/**
 * The per-send costs docs/scaling.md's capacity model is built from, with one
 * and with two worker processes, in one run: the service as a web process and
 * its workers (`src/main.ts web` / `worker`) on Redis + MongoDB wire, a relay
 * on a real WebSocket that reports every send sent and delivered, and API sends
 * spread over 1,000 recipients. Over the measured sends, once all are delivered
 * and the service has gone quiet:
 *
 * - frontend CPU µs per accepted send: the web process (HTTP, and the relay's
 *   socket: the send frame out, its two statuses in);
 * - worker CPU µs per delivered message, summed over the workers;
 * - store round trips per send: relaybox_store_operations_total of every
 *   service process (the worker role serves no /metrics: bench/capacity-probe.mjs
 *   reads it inside each process);
 * - Redis commands per send: INFO commandstats of a redis-server this bench
 *   starts on a private port (CAPACITY_REDIS_PORT, 6390), so nothing else's
 *   commands are counted, stopped at the end;
 * - redis-server CPU µs per send, from /proc.
 *
 * With REDIS_CLUSTER_NODES set, the same two rounds run again on that Redis
 * Cluster (start one of its own for the run: `scripts/redis-cluster.sh start
 * 7400`): the commands of its masters, the CPU of all its servers, replicas
 * too (`capacity-redis.ts`).
 *
 * Idle costs (what the processes and Redis do with nothing to send: lease
 * renewals, blocking reads, timer polls) are measured for 3 s before and taken
 * out; the raw figures, and the idle costs themselves, are printed too. It
 * reports, it does not assert.
 *
 *   MONGODB_URL=mongodb://127.0.0.1:27017 npm run bench:capacity
 *
 * BENCH_SENDS (1,500), BENCH_WARMUP_SENDS (300), BENCH_CONCURRENCY (32),
 * BENCH_RELAY_CAPACITY (200). MONGODB_URL defaults to mongodb://127.0.0.1:27017;
 * each round uses its own database, dropped after.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { loadConfig } from '../src/config.ts';
import type { ServerFrame } from '../src/relay-protocol/frames.ts';
import { MongoStore } from '../src/store/mongo-store.ts';
import { RelaySocket } from '../test/support/relay-socket.ts';
import { limitsOutOfTheWay, request, withDatabase } from '../test/support/test-app.ts';
import { existingCluster, privateRedis, type RedisTarget } from './capacity-redis.ts';
import { commandsBetween, totalOf } from './redis-stats.ts';
import { cpuSeconds, killAll, startService, type Running } from './send-path-processes.ts';

const sends = Number(process.env.BENCH_SENDS || 1_500);
const warmupSends = Number(process.env.BENCH_WARMUP_SENDS || 300);
const concurrency = Number(process.env.BENCH_CONCURRENCY || 32);
const relayCapacity = Number(process.env.BENCH_RELAY_CAPACITY || 200);
const redisPort = Number(process.env.CAPACITY_REDIS_PORT || 6390);
const mongoUrl = process.env.MONGODB_URL || 'mongodb://127.0.0.1:27017';
const idleSeconds = 3;
const deliverTimeoutMs = 90_000;
/** Two rounds on one Redis, two more on a cluster. */
const runTimeoutMs = process.env.REDIS_CLUSTER_NODES ? 560_000 : 280_000;
const probe = pathToFileURL(resolve(import.meta.dirname, 'capacity-probe.mjs')).href;
/** Store round trips so far of each process: the probe writes them on SIGUSR2. */
async function storeCommands(pids: number[], dir: string): Promise<number[]> {
  const asked = Date.now();
  for (const pid of pids) process.kill(pid, 'SIGUSR2');
  return Promise.all(
    pids.map(async (pid) => {
      for (let i = 0; i < 100; i++) {
        const read = await readFile(join(dir, `${pid}.json`), 'utf8')
          .then((t) => JSON.parse(t) as { storeCommands: number; at: number })
          .catch(() => undefined);
        if (read && read.at >= asked) return read.storeCommands;
        await sleep(20);
      }
      throw new Error(`process ${pid} did not report its store commands`);
    }),
  );
}

interface Snapshot {
  at: number;
  /** CPU seconds of each service process, then of all the redis-servers. */
  cpu: number[];
  store: number[];
  redis: Map<string, number>;
}

async function snapshot(pids: number[], dir: string, redis: RedisTarget): Promise<Snapshot> {
  const [store, commands] = await Promise.all([storeCommands(pids, dir), redis.commands()]);
  return {
    at: performance.now(),
    cpu: [...pids.map((pid) => cpuSeconds(pid) ?? NaN), redis.cpuSeconds()],
    store,
    redis: commands,
  };
}

/** What moved between two snapshots: seconds, CPU seconds and store commands by process, Redis commands by name. */
function delta(a: Snapshot, b: Snapshot) {
  return {
    seconds: (b.at - a.at) / 1000,
    cpu: b.cpu.map((c, i) => c - a.cpu[i]!),
    store: b.store.map((s, i) => s - a.store[i]!),
    redis: commandsBetween(a.redis, b.redis),
  };
}

/** Signs up, takes a member API key and registers a relay that reports every send as sent, then delivered. */
async function relayAndKey(base: string) {
  const suffix = randomUUID().slice(0, 8);
  const signup = await request(base, 'POST', '/api/v1/auth/signup', {
    body: {
      organizationName: `Capacity ${suffix}`,
      email: `capacity-${suffix}@example.com`,
      password: 'correct horse battery',
    },
  });
  if (signup.status !== 201) throw new Error(`signup answered ${signup.status}: ${signup.text}`);
  const owner = signup.body.accessToken as string;
  const key = await request(base, 'POST', '/api/v1/api-keys', {
    token: owner,
    body: { name: 'capacity', role: 'member' },
  });
  const token = await request(base, 'POST', `/api/v1/tenants/${signup.body.organization.id}/relay-tokens`, {
    token: owner,
  });
  if (key.status !== 201 || token.status !== 201) throw new Error(`api key ${key.status}, relay token ${token.status}`);
  const relay = await RelaySocket.open(base);
  relay.hello({ registrationToken: token.body.token });
  await relay.next('welcome');
  /** Statuses the service acknowledged: two per send, sent and delivered. */
  const counts = { sends: 0, statusesAcked: 0 };
  relay.ws.on('message', (data) => {
    const frame = JSON.parse(String(data)) as ServerFrame;
    if (frame.type === 'send') {
      counts.sends++;
      const at = new Date().toISOString();
      relay.send({ type: 'status', messageId: frame.messageId, attempt: frame.attempt, status: 'sent', at });
      relay.send({ type: 'status', messageId: frame.messageId, attempt: frame.attempt, status: 'delivered', at });
    }
    if (frame.type === 'ack' && frame.of === 'status') counts.statusesAcked++;
  });
  relay.send({ type: 'ready', capacity: relayCapacity });
  const beats = setInterval(
    () =>
      relay.send({
        type: 'heartbeat',
        health: { cpuPercent: 1, memoryUsedBytes: 1, memoryTotalBytes: 2, messagesPerMinute: 0, queueDepth: 0 },
      }),
    5_000,
  );
  return { key: key.body.key as string, counts, close: () => (clearInterval(beats), relay.close()) };
}

/** `count` API sends, `concurrency` at a time; how many were accepted. */
async function send(base: string, key: string, count: number): Promise<number> {
  let next = 0;
  let accepted = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const res = await fetch(`${base}/api/v1/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ to: `+1415555${String(i % 1_000).padStart(4, '0')}`, body: `capacity ${i}` }),
        });
        await res.arrayBuffer();
        if (res.ok) accepted++;
      }
    }),
  );
  return accepted;
}

async function until(what: string, done: () => boolean, progress: () => string): Promise<void> {
  const deadline = Date.now() + deliverTimeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${progress()})`);
    await sleep(50);
  }
}

/** Waits until the store commands of every process stop moving for a second: the background work of the sends is done. */
async function quiet(pids: number[], dir: string): Promise<void> {
  let last = -1;
  for (;;) {
    const now = (await storeCommands(pids, dir)).reduce((s, n) => s + n, 0);
    if (now === last) return;
    last = now;
    await sleep(1_000);
  }
}

interface Round {
  workers: number;
  /** The Redis it ran on: one server, or a cluster. */
  redis: string;
  accepted: number;
  seconds: number;
  webCpuUs: number;
  workerCpuUs: number;
  webCpuUsRaw: number;
  workerCpuUsRaw: number;
  redisCpuUs: number;
  redisCpuUsRaw: number;
  /** % of one core with nothing to send: the web process, each worker, redis-server. */
  idleCpuPercent: { web: number; worker: number; redis: number };
  storeWeb: number;
  storeWorkers: number;
  redisPerSend: number;
  redisPerSendRaw: number;
  idleRedisPerSecond: number;
  redisTop: Array<[string, number]>;
}

async function round(workers: number, redis: RedisTarget): Promise<Round> {
  const suffix = randomUUID().slice(0, 8);
  const database = withDatabase(mongoUrl, `relaybox_capacity_${suffix}`);
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-capacity-'));
  const probeDir = await mkdtemp(join(tmpdir(), 'relaybox-capacity-probe-'));
  const env = {
    ...limitsOutOfTheWay,
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    ...redis.env,
    MONGODB_URL: database,
    RUNTIME_KEY_PREFIX: `capacity${suffix}`,
    CAPACITY_PROBE_DIR: probeDir,
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${probe}`.trim(),
  };
  let service: Running | undefined;
  let relay: Awaited<ReturnType<typeof relayAndKey>> | undefined;
  try {
    service = await startService('web+worker', env, undefined, workers);
    const pids = service.pids;
    const base = `http://127.0.0.1:${service.port}`;
    relay = await relayAndKey(base);
    const counts = relay.counts;
    const warm = await send(base, relay.key, warmupSends);
    await until(
      'the warm-up to be delivered',
      () => counts.statusesAcked >= 2 * warm,
      () => JSON.stringify(counts),
    );
    await quiet(pids, probeDir);

    const idleFrom = await snapshot(pids, probeDir, redis);
    await sleep(idleSeconds * 1_000);
    const idle = delta(idleFrom, await snapshot(pids, probeDir, redis));

    const from = await snapshot(pids, probeDir, redis);
    const accepted = await send(base, relay.key, sends);
    await until(
      'every send to be delivered',
      () => counts.statusesAcked >= 2 * (warm + accepted),
      () => JSON.stringify(counts),
    );
    await quiet(pids, probeDir);
    const moved = delta(from, await snapshot(pids, probeDir, redis));

    const web = pids.length - 1;
    const redisAt = pids.length;
    const idleShare = moved.seconds / idle.seconds;
    const perSend = (n: number) => n / accepted;
    const cpuUs = (which: (i: number) => boolean, minusIdle: boolean) =>
      perSend(
        moved.cpu.reduce((s, c, i) => (which(i) ? s + c - (minusIdle ? idle.cpu[i]! * idleShare : 0) : s), 0) * 1e6,
      );
    const idlePercent = (which: (i: number) => boolean) =>
      (idle.cpu.reduce((s, c, i) => (which(i) ? s + c : s), 0) / idle.seconds) * 100;
    const isWorker = (i: number) => i < web;
    const redisTotal = totalOf(moved.redis);
    const idleRedis = totalOf(idle.redis);
    return {
      workers,
      redis: redis.name,
      accepted,
      seconds: moved.seconds,
      webCpuUs: cpuUs((i) => i === web, true),
      workerCpuUs: cpuUs(isWorker, true),
      webCpuUsRaw: cpuUs((i) => i === web, false),
      workerCpuUsRaw: cpuUs(isWorker, false),
      redisCpuUs: cpuUs((i) => i === redisAt, true),
      redisCpuUsRaw: cpuUs((i) => i === redisAt, false),
      idleCpuPercent: {
        web: idlePercent((i) => i === web),
        worker: idlePercent(isWorker) / workers,
        redis: idlePercent((i) => i === redisAt),
      },
      storeWeb: perSend(moved.store[web]!),
      storeWorkers: perSend(moved.store.reduce((s, n, i) => (isWorker(i) ? s + n : s), 0)),
      redisPerSend: perSend(redisTotal - idleRedis * idleShare),
      redisPerSendRaw: perSend(redisTotal),
      idleRedisPerSecond: idleRedis / idle.seconds,
      redisTop: [...moved.redis].sort((a, b) => b[1] - a[1]).slice(0, 8),
    };
  } finally {
    relay?.close();
    await service?.stop();
    const store = new MongoStore(database, undefined, loadConfig({}).storePingTimeoutMs, loadConfig({}).mongoWrites);
    await store
      .init()
      .then(() => store.dropDatabase())
      .finally(() => store.close())
      .catch((err) => console.error('could not drop the bench database:', err));
    await rm(dataDir, { recursive: true, force: true });
    await rm(probeDir, { recursive: true, force: true });
  }
}

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '–';

function report(rows: Round[]): void {
  console.log(
    `\nPer-send costs: web process + workers on Redis (one private redis-server on port ${redisPort}${targets.length > 1 ? ', then the cluster' : ''}) + MongoDB wire (${mongoUrl}); ${fmt(sends)} API sends after ${fmt(warmupSends)} warm-up, ${concurrency} at a time, to 1,000 recipients, one relay of capacity ${relayCapacity} reporting sent and delivered; idle costs (${idleSeconds} s measured before) taken out\n`,
  );
  console.log(
    `| per accepted and delivered send | ${rows.map((r) => `${r.redis}, ${r.workers} worker${r.workers > 1 ? 's' : ''}`).join(' | ')} |`,
  );
  console.log(`|---|${rows.map(() => '---|').join('')}`);
  const line = (label: string, value: (r: Round) => string) =>
    console.log(`| ${label} | ${rows.map(value).join(' | ')} |`);
  line('sends accepted, all delivered', (r) => fmt(r.accepted));
  line('frontend (web) CPU µs', (r) => `${fmt(r.webCpuUs)} (raw ${fmt(r.webCpuUsRaw)})`);
  line('worker CPU µs, all workers', (r) => `${fmt(r.workerCpuUs)} (raw ${fmt(r.workerCpuUsRaw)})`);
  line('store round trips: web', (r) => fmt(r.storeWeb, 2));
  line('store round trips: workers', (r) => fmt(r.storeWorkers, 2));
  line('store round trips: total', (r) => fmt(r.storeWeb + r.storeWorkers, 2));
  line('Redis commands', (r) => `${fmt(r.redisPerSend, 1)} (raw ${fmt(r.redisPerSendRaw, 1)})`);
  line('redis-server CPU µs', (r) => `${fmt(r.redisCpuUs)} (raw ${fmt(r.redisCpuUsRaw)})`);
  line('idle: Redis commands/s', (r) => fmt(r.idleRedisPerSecond));
  line(
    'idle: CPU % of a core, web / each worker / redis-server',
    (r) => `${fmt(r.idleCpuPercent.web, 1)} / ${fmt(r.idleCpuPercent.worker, 1)} / ${fmt(r.idleCpuPercent.redis, 1)}`,
  );
  line('window, s (a shared machine: not a rate to quote)', (r) => fmt(r.seconds, 1));
  for (const r of rows)
    console.log(
      `\nRedis commands over the window, ${r.redis}, ${r.workers} worker(s), most first: ${r.redisTop.map(([name, n]) => `${name} ${fmt(n / r.accepted, 2)}`).join(', ')} per send`,
    );
}

const targets: RedisTarget[] = [];
const deadline = setTimeout(() => {
  console.error('the bench ran out of time');
  killAll();
  targets.forEach((t) => t.kill());
  process.exit(1);
}, runTimeoutMs);
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => (killAll(), targets.forEach((t) => t.kill()), process.exit(130)));

const rows: Round[] = [];
try {
  targets.push(await privateRedis(redisPort));
  if (process.env.REDIS_CLUSTER_NODES) targets.push(await existingCluster(process.env.REDIS_CLUSTER_NODES));
  for (const target of targets) for (const workers of [1, 2]) rows.push(await round(workers, target));
} catch (err) {
  console.error(err);
} finally {
  clearTimeout(deadline);
  report(rows);
  killAll();
  for (const target of targets) await target.stop();
}
process.exit(0);
