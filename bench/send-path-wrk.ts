/**
 * Accepted sends per second on POST /api/v1/messages of the embedded default,
 * measured with wrk (a load generator that costs far less CPU than one in
 * Node), and beside it the same for another checkout (BENCH_BASELINE), the two
 * alternating round after round on the same machine, so that the ratio holds
 * even when the machine's load drifts. Each round starts the service
 * (`src/main.ts all`, no REDIS_URL or MONGODB_URL) on a fresh DATA_DIR, signs
 * up, takes a member API key, warms up, then measures. It reports, it does
 * not assert.
 *
 *   npm run bench:send:wrk
 *   BENCH_BASELINE=/path/to/an/earlier/checkout npm run bench:send:wrk
 *
 * BENCH_STORED (0) messages are stored before the service starts: 100
 * organizations' history, written once per target by that checkout's own
 * store (as `npm run bench:store` fills it) and copied into each round's
 * DATA_DIR, so each round starts from the same stored data.
 *
 * BENCH_CONNECTIONS (64), BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (3),
 * BENCH_ROUNDS (3). Needs `wrk` on the PATH (Debian: apt-get install wrk).
 * The service's CPU time per accepted send is printed too: on a machine
 * shared with other work it moves less than the rate does.
 */
import { spawnSync } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { apiKeyFor, cpuSeconds, embeddedSendEnv, startService, type Running } from './send-path-processes.ts';
import { storePhase } from './store-phase.ts';
import { sendScript, wrk } from './wrk.ts';

const connections = Number(process.env.BENCH_CONNECTIONS || 64);
const seconds = Number(process.env.BENCH_SECONDS || 10);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS || 3);
const rounds = Number(process.env.BENCH_ROUNDS || 3);
const baseline = process.env.BENCH_BASELINE ? resolve(process.env.BENCH_BASELINE) : undefined;
const stored = Number(process.env.BENCH_STORED || 0);
const here = resolve(import.meta.dirname, '..');

interface Measured {
  sendsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
  /** Of one core, the service process while wrk measured. */
  serviceCpuPercent: number | undefined;
  accepted: number;
}

const results = new Map<string, Measured[]>();
/** Targets that could not be measured (a service that did not start on the stored data, say), with why; their later rounds are skipped. */
const failures = new Map<string, string>();

/** Per checkout, a DATA_DIR holding BENCH_STORED messages written by its own store, copied into each of its rounds. */
const filled = new Map<string, string>();

async function storedData(root: string): Promise<string> {
  let dir = filled.get(root);
  if (dir) return dir;
  dir = await mkdtemp(join(tmpdir(), 'relaybox-wrk-stored-'));
  filled.set(root, dir);
  await storePhase('fill', dir, stored, root === here ? undefined : root);
  return dir;
}

async function measure(name: string, root: string): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-wrk-'));
  let service: Running | undefined;
  try {
    if (stored > 0) await cp(await storedData(root), dataDir, { recursive: true });
    service = await startService('all', embeddedSendEnv(dataDir), root);
    const base = `http://127.0.0.1:${service.port}`;
    const pid = service.pids[0]!;
    const key = await apiKeyFor(base);
    const script = join(dataDir, 'send.lua');
    await writeFile(script, sendScript(key));
    const url = `${base}/api/v1/messages`;
    wrk(url, script, warmupSeconds, connections);
    const cpuBefore = cpuSeconds(pid);
    const at = performance.now();
    const out = wrk(url, script, seconds, connections);
    const cpuAfter = cpuSeconds(pid);
    const elapsed = (performance.now() - at) / 1000;
    const { sendsPerSecond, p50Ms, p99Ms, non2xx, socketErrors, accepted } = out;
    const row: Measured = {
      sendsPerSecond,
      p50Ms,
      p99Ms,
      non2xx,
      socketErrors,
      serviceCpuPercent:
        cpuBefore === undefined || cpuAfter === undefined ? undefined : ((cpuAfter - cpuBefore) / elapsed) * 100,
      accepted,
    };
    results.set(name, [...(results.get(name) ?? []), row]);
    console.log(
      `${name}: ${row.sendsPerSecond.toFixed(0)} sends/s, p50 ${row.p50Ms.toFixed(1)} ms, p99 ${row.p99Ms.toFixed(1)} ms, ${non2xx} non-2xx, ${socketErrors} socket errors, service CPU ${row.serviceCpuPercent?.toFixed(0) ?? '–'}%`,
    );
  } catch (err) {
    failures.set(name, (err as Error).message);
    console.log(`${name}: not measured: ${(err as Error).message}`);
  } finally {
    await service?.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const version = (root: string) => {
    const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim();
    const changed =
      spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], {
        cwd: root,
        encoding: 'utf8',
      }).stdout.trim() !== '';
    return `${head}${changed ? ' with changes' : ''}`;
  };
  const head = version(here);
  const base = baseline ? version(baseline) : '';
  const targets: [string, string][] = [[`this checkout ${head}`, here]];
  if (baseline) targets.push([`baseline ${base}`, baseline]);
  for (let r = 0; r < rounds; r++) {
    // Alternate which goes first, so neither always meets the warmer machine.
    for (const [name, root] of r % 2 ? [...targets].reverse() : targets)
      if (!failures.has(name)) await measure(name, root);
  }
  for (const dir of filled.values()) await rm(dir, { recursive: true, force: true });
  console.log(
    `\nPOST /api/v1/messages on the embedded default with wrk: ${connections} connections, ${seconds} s after ${warmupSeconds} s warm-up, ${rounds} rounds alternating, ${stored.toLocaleString('en')} messages stored before each round\n`,
  );
  console.log(
    '| target | accepted sends/s (each round) | median | p50 ms (median) | p99 ms (median) | service CPU % (median) | service CPU µs per send (median) | non-2xx |',
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [name] of targets) {
    const rows = results.get(name) ?? [];
    const failed = failures.get(name);
    if (failed) console.log(`| ${name} | not measured: ${failed} | | | | | | |`);
    if (rows.length === 0) continue;
    console.log(
      `| ${name} | ${rows.map((m) => m.sendsPerSecond.toFixed(0)).join(', ')} | ${median(rows.map((m) => m.sendsPerSecond)).toFixed(0)} | ${median(rows.map((m) => m.p50Ms)).toFixed(1)} | ${median(rows.map((m) => m.p99Ms)).toFixed(1)} | ${median(rows.map((m) => m.serviceCpuPercent ?? NaN)).toFixed(0)} | ${median(rows.map((m) => ((m.serviceCpuPercent ?? NaN) * 10_000) / m.sendsPerSecond)).toFixed(0)} | ${rows.reduce((s, m) => s + m.non2xx, 0)} |`,
    );
  }
  if (baseline) {
    const mine = results.get(targets[0]![0]) ?? [];
    const theirs = results.get(targets[1]![0]) ?? [];
    const ratios = mine
      .map((m, i) => (theirs[i] ? m.sendsPerSecond / theirs[i]!.sendsPerSecond : NaN))
      .filter(Number.isFinite);
    if (ratios.length)
      console.log(
        `\nratio this / baseline, round by round: ${ratios.map((x) => x.toFixed(2)).join(', ')} (median ${median(ratios).toFixed(2)})`,
      );
  }
}

await main();
