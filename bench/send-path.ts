/**
 * Accepted sends per second on POST /api/v1/messages, and their latency, against
 * a bare uWebSockets.js server (the ceiling), the embedded default and Redis +
 * MongoDB wire; then where the time goes, per stage. It reports, it does not
 * assert: it exits 0 when a target is missed.
 *
 *   npm run bench:send
 *   REDIS_URL=redis://127.0.0.1:6379 MONGODB_URL=mongodb://127.0.0.1:27017/relaybox npm run bench:send
 *
 * BENCH_CONNECTIONS (64), BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (2),
 * BENCH_SPLIT=0 skips web + worker as two processes, BENCH_CPU_PROF_DIR makes
 * every service process write a V8 CPU profile there, BENCH_ONLY=ceiling,embedded,all,split
 * runs only those targets.
 */
import { loadConfig } from '../src/config.ts';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoStore } from '../src/store/mongo-store.ts';
import { discardRedisKeys } from '../test/support/discard-data.ts';
import { limitsOutOfTheWay } from '../test/support/test-app.ts';
import { fetchStageHistograms, subtract, summarizeStages, type StageSummary } from './send-path-metrics.ts';
import {
  apiKeyFor,
  killAll,
  runLoad,
  startCeiling,
  startService,
  type LoadResult,
  type Running,
  type Topology,
} from './send-path-processes.ts';

const connections = Number(process.env.BENCH_CONNECTIONS || 64);
const seconds = Number(process.env.BENCH_SECONDS || 10);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS || 2);
const redisUrl = process.env.REDIS_URL || undefined;
const mongoUrl = process.env.MONGODB_URL || undefined;
const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',')) : undefined;
const wanted = (target: 'ceiling' | 'embedded' | 'all' | 'split') => !only || only.has(target);
const split = process.env.BENCH_SPLIT !== '0' && wanted('split');
/** Both phases, the drain after each, and slack for a slow start. */
const loadTimeoutMs = (2 * (warmupSeconds + seconds) + 2 * 10 + 30) * 1000;
const targetsFromIssue = { redisMongoPerSecond: 10_000, embeddedPerSecond: 20_000, p99AtHalfMs: 20 };

interface Row {
  name: string;
  load?: LoadResult;
  stages?: StageSummary[];
  failure?: string;
}

const rows: Row[] = [];
const skipped: string[] = [];

async function benchCeiling(): Promise<void> {
  let server: Running | undefined;
  try {
    server = await startCeiling();
    const load = await runLoad(`http://127.0.0.1:${server.port}/api/v1/messages`, 'none', server.pids, loadTimeoutMs);
    rows.push({ name: 'ceiling: bare uWS', load });
  } catch (err) {
    rows.push({ name: 'ceiling: bare uWS', failure: String(err instanceof Error ? err.message : err) });
  } finally {
    await server?.stop();
  }
}

async function benchService(name: string, topology: Topology, env: Record<string, string>): Promise<void> {
  let service: Running | undefined;
  try {
    service = await startService(topology, env);
    const base = `http://127.0.0.1:${service.port}`;
    const key = await apiKeyFor(base);
    const before = await fetchStageHistograms(base);
    const load = await runLoad(`${base}/api/v1/messages`, key, service.pids, loadTimeoutMs);
    const stages = summarizeStages(subtract(await fetchStageHistograms(base), before));
    rows.push({ name, load, stages });
  } catch (err) {
    rows.push({ name, failure: String(err instanceof Error ? err.message : err).split('\n')[0] });
    console.error(`${name}:`, err);
  } finally {
    await service?.stop();
  }
}

async function withDataDir(run: (dataDir: string) => Promise<void>): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-bench-'));
  try {
    await run(dataDir);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

async function benchRedisMongo(topology: Topology): Promise<void> {
  const suffix = randomUUID().slice(0, 8);
  const prefix = `bench${suffix}`;
  const database = new URL(mongoUrl!);
  database.pathname = `/relaybox_bench_${suffix}`;
  const env = {
    ...limitsOutOfTheWay,
    LOG_LEVEL: 'warn',
    REDIS_URL: redisUrl!,
    MONGODB_URL: database.toString(),
    RUNTIME_KEY_PREFIX: prefix,
  };
  try {
    await withDataDir((dataDir) =>
      benchService(`redis + mongo wire (${topology})`, topology, { ...env, DATA_DIR: dataDir }),
    );
  } finally {
    const store = new MongoStore(
      database.toString(),
      undefined,
      loadConfig({}).storePingTimeoutMs,
      loadConfig({}).mongoWrites,
    );
    await store
      .init()
      .then(() => store.dropDatabase())
      .finally(() => store.close())
      .catch((err) => console.error('could not drop the bench database:', err));
    await discardRedisKeys(redisUrl!, `${prefix}:`);
  }
}

const fmt = (n: number | undefined, digits = 1) => (n === undefined || Number.isNaN(n) ? '–' : n.toFixed(digits));
const errorsOf = (load: LoadResult) => {
  const all: Record<string, number> = {};
  for (const phase of [load.max, load.half])
    for (const [k, v] of Object.entries(phase?.errors ?? {})) all[k] = (all[k] ?? 0) + v;
  const list = Object.entries(all);
  return list.length ? list.map(([k, v]) => `${v} × ${k}`).join(', ') : '0';
};

function report(): void {
  const ceiling = rows.find((r) => r.name.startsWith('ceiling'))?.load?.max.ratePerSecond;
  console.log(
    `\nPOST /api/v1/messages: ${connections} keep-alive connections, ${seconds} s measured after ${warmupSeconds} s warm-up; half rate is open loop, latency from when each request was due\n`,
  );
  console.log('| target | accepted sends/s | p50 ms | p99 ms | p99 at half rate ms | errors | ratio to ceiling |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    if (!r.load) {
      console.log(`| ${r.name} | failed: ${r.failure} | | | | | |`);
      continue;
    }
    const { max, half } = r.load;
    const ratio = ceiling ? max.ratePerSecond / ceiling : undefined;
    console.log(
      `| ${r.name} | ${Math.round(max.ratePerSecond)} | ${fmt(max.p50Ms, 2)} | ${fmt(max.p99Ms, 2)} | ${fmt(half?.p99Ms, 2)} | ${errorsOf(r.load)} | ${fmt(ratio, 2)} |`,
    );
  }
  for (const s of skipped) console.log(`| ${s} | skipped: set REDIS_URL and MONGODB_URL | | | | | |`);

  console.log(
    '\nCPU while measuring, % of one core (this machine has the generator and the service on the same cores)\n',
  );
  console.log(
    '| target | load generator (max) | service (max) | half rate achieved/s | load generator (half) | service (half) |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const r of rows.filter((x) => x.load)) {
    const { max, half } = r.load!;
    console.log(
      `| ${r.name} | ${fmt(max.loadCpuPercent, 0)} | ${fmt(max.serviceCpuPercent, 0)} | ${half ? `${Math.round(half.ratePerSecond)} of ${Math.round(half.targetRatePerSecond ?? 0)}` : '–'} | ${fmt(half?.loadCpuPercent, 0)} | ${fmt(half?.serviceCpuPercent, 0)} |`,
    );
  }

  for (const r of rows.filter((x) => x.stages?.length)) {
    console.log(
      `\nStages of /api/v1/messages, ${r.name} (relaybox_http_stage_duration_seconds over both phases; p50/p90 interpolated in buckets; persist and enqueue are per batch, observed once per request)\n`,
    );
    console.log('| stage | count | p50 ms | p90 ms | mean ms |');
    console.log('|---|---|---|---|---|');
    const q = (ms: number, s: StageSummary) => (ms <= s.firstBucketMs ? `< ${fmt(s.firstBucketMs, 3)}` : fmt(ms, 3));
    for (const s of r.stages!)
      console.log(`| ${s.stage} | ${s.count} | ${q(s.p50Ms, s)} | ${q(s.p90Ms, s)} | ${fmt(s.meanMs, 3)} |`);
  }
  for (const r of rows) {
    for (const phase of [r.load?.max, r.load?.half]) {
      for (const [status, sample] of Object.entries(phase?.errorSamples ?? {}))
        console.log(`\n${r.name}: first ${status} answer: ${sample}`);
    }
  }

  console.log('\nTargets from the issue');
  console.log(`- >= ${targetsFromIssue.redisMongoPerSecond}/s on Redis + MongoDB wire`);
  console.log(`- >= ${targetsFromIssue.embeddedPerSecond}/s on embedded`);
  console.log(`- p99 <= ${targetsFromIssue.p99AtHalfMs} ms at half rate`);
  for (const r of rows.filter((x) => x.load && !x.name.startsWith('ceiling'))) {
    const goal = r.name.startsWith('embedded')
      ? targetsFromIssue.embeddedPerSecond
      : targetsFromIssue.redisMongoPerSecond;
    const rate = r.load!.max.ratePerSecond;
    const p99 = r.load!.half?.p99Ms ?? NaN;
    console.log(
      `  ${r.name}: ${Math.round(rate)}/s ${rate >= goal ? 'meets' : 'misses'} ${goal}/s; p99 at half rate ${fmt(p99, 2)} ms ${p99 <= targetsFromIssue.p99AtHalfMs ? 'meets' : 'misses'} ${targetsFromIssue.p99AtHalfMs} ms`,
    );
  }
}

const services = 2 + (redisUrl && mongoUrl ? 2 : 0);
const deadline = setTimeout(
  () => {
    console.error('\nthe bench ran out of time; what finished so far:');
    report();
    killAll();
    process.exit(0);
  },
  services * (loadTimeoutMs + 60_000),
);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => (killAll(), process.exit(130)));

if (wanted('ceiling')) await benchCeiling();
if (wanted('embedded'))
  await withDataDir((dataDir) =>
    benchService('embedded default (all)', 'all', {
      ...limitsOutOfTheWay,
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      REDIS_URL: '',
      MONGODB_URL: '',
      RUNTIME_KEY_PREFIX: `bench${randomUUID().slice(0, 8)}`,
    }),
  );
if (redisUrl && mongoUrl) {
  if (wanted('all')) await benchRedisMongo('all');
  if (split) await benchRedisMongo('web+worker');
} else {
  skipped.push('redis + mongo wire');
}
clearTimeout(deadline);
report();
killAll();
process.exit(0);
