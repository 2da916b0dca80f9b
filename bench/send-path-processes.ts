/**
 * Child processes of bench/send-path.ts: the ceiling server, the service in
 * its roles and the load generator. Every child is tracked so the bench can
 * kill whatever is left when it ends or runs out of time.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { limitsOutOfTheWay, request } from '../test/support/test-app.ts';
import { serviceNodeFlags } from './service-node-flags.ts';

const children = new Set<ChildProcess>();
const startTimeoutMs = 30_000;
const stopTimeoutMs = 15_000;

export function killAll(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** With BENCH_SERVICE_LOG set, every tsx child's output is also appended to that file, each line under its name and pid. */
const serviceLog = process.env.BENCH_SERVICE_LOG
  ? createWriteStream(process.env.BENCH_SERVICE_LOG, { flags: 'a' })
  : null;

function tsx(
  file: string,
  args: string[],
  env: Record<string, string>,
  nodeFlags: string[] = [],
  cwd?: string,
): ChildProcess {
  const child = track(
    spawn(process.execPath, [...serviceNodeFlags, ...nodeFlags, '--import', 'tsx', file, ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  if (serviceLog) {
    const name = `[${[file, ...args].join(' ')} ${child.pid}] `;
    for (const out of [child.stdout!, child.stderr!])
      createInterface({ input: out }).on('line', (line) => serviceLog.write(name + line + '\n'));
  }
  return child;
}

/** Resolves with the first stdout line `pick` accepts; rejects on exit or timeout, with the output so far. */
function waitForLine<T>(
  child: ChildProcess,
  what: string,
  pick: (line: string) => T | undefined,
  timeoutMs = startTimeoutMs,
): Promise<T> {
  const lines: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4_000)));
  return new Promise((resolve, reject) => {
    const fail = (why: string) => reject(new Error(`${what} ${why}\n${lines.slice(-20).join('\n')}\n${stderr}`));
    const timer = setTimeout(() => fail(`gave no sign of life in ${timeoutMs} ms`), timeoutMs);
    child.once('exit', (code) => (clearTimeout(timer), fail(`exited with ${code}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      lines.push(line);
      const found = pick(line);
      if (found !== undefined) {
        clearTimeout(timer);
        resolve(found);
      }
    });
  });
}

function parseJsonLine(line: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(line);
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A fresh organization and a member API key of it. */
export async function apiKeyFor(base: string): Promise<string> {
  const suffix = randomUUID().slice(0, 8);
  const created = async (path: string, body: unknown, token?: string): Promise<Record<string, unknown>> => {
    const res = await request(base, 'POST', path, { body, token });
    if (res.status !== 201) throw new Error(`POST ${path} answered ${res.status}: ${res.text.slice(0, 300)}`);
    return res.body as Record<string, unknown>;
  };
  const signup = await created('/api/v1/auth/signup', {
    organizationName: `Bench ${suffix}`,
    email: `bench-${suffix}@example.com`,
    password: 'correct horse battery',
  });
  const key = await created('/api/v1/api-keys', { name: 'bench', role: 'member' }, signup.accessToken as string);
  return key.key as string;
}

export interface Running {
  port: number | undefined;
  pids: number[];
  stop(): Promise<void>;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), stopTimeoutMs);
  await exited;
  clearTimeout(timer);
}

/** A Node program of another project (the reference peer, say) run from `cwd`, up once a stdout line matches `ready`. */
export async function startNodeProgram(
  file: string,
  cwd: string,
  env: Record<string, string>,
  ready: RegExp,
): Promise<Running> {
  const child = track(
    spawn(process.execPath, [file], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  try {
    await waitForLine(child, file, (line) => ready.test(line) || undefined);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  child.stdout!.resume();
  return { port: undefined, pids: [child.pid!], stop: () => stop(child) };
}

export async function startCeiling(): Promise<Running> {
  const child = tsx('bench/send-path-ceiling.ts', [], {});
  const port = await waitForLine(child, 'ceiling server', (line) => parseJsonLine(line)?.port as number | undefined);
  return { port, pids: [child.pid!], stop: () => stop(child) };
}

/** A free port on 127.0.0.1: at LOG_LEVEL=warn the service does not log the port it got for PORT=0. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (!address || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

async function waitHealthy(base: string, child: ChildProcess): Promise<void> {
  const until = Date.now() + startTimeoutMs;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode} before it answered /healthz`);
    const ok = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`service did not answer /healthz within ${startTimeoutMs} ms`);
}

/** The service on the embedded default in `dataDir`, its limits out of the way: a send bench measures the send path, not the limits. */
export function embeddedSendEnv(dataDir: string): Record<string, string> {
  return {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    REDIS_URL: '',
    MONGODB_URL: '',
    ...limitsOutOfTheWay,
  };
}

export type Topology = 'all' | 'web+worker';

/**
 * The real service (`src/main.ts`, of the checkout at `root`, this one by
 * default) on 127.0.0.1, with `workers` worker processes beside the web one
 * for `web+worker` (their pids first, the web process's last). With
 * BENCH_CPU_PROF_DIR set, every service process writes a V8 CPU profile there
 * when it exits.
 */
export async function startService(
  topology: Topology,
  env: Record<string, string>,
  root?: string,
  workers = 1,
): Promise<Running> {
  const profileDir = process.env.BENCH_CPU_PROF_DIR;
  const flags = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
  const started: ChildProcess[] = [];
  try {
    for (let i = 0; topology === 'web+worker' && i < workers; i++) {
      // info, not warn, only so that the worker's "running" line says it is up; the worker logs no request lines.
      const worker = tsx('src/main.ts', ['worker'], { ...env, LOG_LEVEL: 'info' }, flags, root);
      started.push(worker);
      await waitForLine(
        worker,
        'worker',
        (line) => (parseJsonLine(line)?.msg as string | undefined)?.startsWith('relaybox worker ') || undefined,
      );
    }
    const port = await freePort();
    const role = topology === 'all' ? 'all' : 'web';
    const web = tsx('src/main.ts', [role], { ...env, HOST: '127.0.0.1', PORT: String(port) }, flags, root);
    started.push(web);
    web.stdout!.resume();
    web.stderr!.on('data', (c: Buffer) => process.stderr.write(`[service ${role}] ${c.toString()}`));
    await waitHealthy(`http://127.0.0.1:${port}`, web);
    return {
      port,
      pids: started.map((c) => c.pid!),
      // The web process first, so that no request is left for a worker that is gone.
      stop: async () => {
        for (const child of [...started].reverse()) await stop(child);
      },
    };
  } catch (err) {
    for (const child of started) child.kill('SIGKILL');
    throw err;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc; undefined off Linux. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command; in clock ticks (100 a second on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

export interface LoadPhase {
  targetRatePerSecond?: number;
  accepted: number;
  ratePerSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  errors: Record<string, number>;
  errorSamples: Record<string, string>;
  loadCpuPercent: number;
  /** Of one core, summed over the service's processes, while the phase was measured. */
  serviceCpuPercent?: number;
}

export interface LoadResult {
  max: LoadPhase;
  half: LoadPhase | undefined;
}

/** Runs the load generator against `url` and samples the CPU of `servicePids` over each measured window. */
export async function runLoad(
  url: string,
  token: string,
  servicePids: number[],
  timeoutMs: number,
): Promise<LoadResult> {
  const child = tsx('bench/send-path-load.ts', [], { BENCH_URL: url, BENCH_TOKEN: token });
  const marks = new Map<string, { cpu: number | undefined; at: number }>();
  const serviceCpu = () =>
    servicePids.reduce<number | undefined>((sum, pid) => {
      const s = cpuSeconds(pid);
      return sum === undefined || s === undefined ? undefined : sum + s;
    }, 0);
  const cpuPercent: Record<string, number | undefined> = {};
  const result = await waitForLine(
    child,
    'load generator',
    (line) => {
      const entry = parseJsonLine(line);
      if (!entry) return undefined;
      if (entry.mark === 'start') marks.set(entry.phase as string, { cpu: serviceCpu(), at: performance.now() });
      if (entry.mark === 'end') {
        const from = marks.get(entry.phase as string);
        const cpu = serviceCpu();
        if (from?.cpu !== undefined && cpu !== undefined)
          cpuPercent[entry.phase as string] = ((cpu - from.cpu) / ((performance.now() - from.at) / 1000)) * 100;
      }
      return entry.result as LoadResult | undefined;
    },
    timeoutMs,
  );
  result.max.serviceCpuPercent = cpuPercent.max;
  if (result.half) result.half.serviceCpuPercent = cpuPercent.half;
  await stop(child);
  return result;
}
