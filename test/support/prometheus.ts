import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

export const monitoringDir = resolve(import.meta.dirname, '..', '..', 'monitoring');

/** A port nobody listens on right now. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** A Prometheus duration (`5m`, `1h`, `3d`) divided by `factor`, in whole seconds (at least 1 s). */
export function scaleDuration(duration: string, factor: number): string {
  const units: Record<string, number> = { s: 1, m: 60, h: 3_600, d: 86_400, w: 604_800 };
  const m = /^(\d+)([smhdw])$/.exec(duration);
  if (!m) throw new Error(`not a duration: ${duration}`);
  return `${Math.max(1, Math.round((Number(m[1]) * units[m[2]!]!) / factor))}s`;
}

/**
 * The project's rules with every range window (`[5m]`) and `for:` divided by
 * `factor`: the same expressions, thresholds and labels, on a clock a test can
 * wait for. Recorded series keep their names (`…_rate5m` covers 5 s at 60).
 */
export async function scaledRules(factor: number): Promise<string> {
  const rules = await readFile(join(monitoringDir, 'relaybox-rules.yml'), 'utf8');
  return rules
    .replace(/\[(\d+[smhdw])\]/g, (_, d: string) => `[${scaleDuration(d, factor)}]`)
    .replace(/^(\s+for: )(\d+[smhdw])$/gm, (_, head: string, d: string) => `${head}${scaleDuration(d, factor)}`);
}

export interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface PromAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
}

export interface Prometheus {
  url: string;
  /** Sets the targets scraped (file-based discovery: Prometheus reads the change within a second or so). */
  scrape(targets: string[]): Promise<void>;
  query(expr: string): Promise<{ status: string; error?: string; resultType?: string; result: PromSample[] }>;
  alerts(): Promise<PromAlert[]>;
  stop(): Promise<void>;
}

/** Whether the `prometheus` server is installed; in CI its absence is a failure, elsewhere a skip with the reason. */
export function prometheusInstalled(t: TestContext): boolean {
  const probe = spawnSync('prometheus', ['--version'], { encoding: 'utf8' });
  if (!probe.error) return true;
  if (process.env.CI === 'true')
    throw new Error('prometheus is missing in CI: .ci/run installs it (Debian package prometheus)');
  t.skip('prometheus not found (apt-get install --no-install-recommends prometheus)');
  return false;
}

/**
 * A Prometheus server of the test's own: its storage in a temporary dir, a
 * free port, the given rules, a 1 s scrape and evaluation interval. Stopped
 * by its PID.
 */
export async function startPrometheus(rules: string, runbookBase: string): Promise<Prometheus> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-prometheus-'));
  const port = await freePort();
  const targetsFile = join(dir, 'targets.json');
  await writeFile(targetsFile, '[]');
  await writeFile(join(dir, 'rules.yml'), rules);
  await writeFile(
    join(dir, 'prometheus.yml'),
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      '  evaluation_interval: 1s',
      '  external_labels:',
      `    runbook_base_url: ${runbookBase}`,
      'rule_files: [rules.yml]',
      'scrape_configs:',
      '  - job_name: relaybox',
      '    file_sd_configs:',
      `      - files: [${targetsFile}]`,
      '        refresh_interval: 1s',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4_000)));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}: ${stderr}`);
    const ready = await fetch(`${url}/-/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    if (i > 150) {
      await stop();
      throw new Error(`prometheus did not get ready in 30 s: ${stderr}`);
    }
    await sleep(200);
  }
  const api = async (path: string) => (await (await fetch(`${url}${path}`)).json()) as any;
  return {
    url,
    async scrape(targets) {
      await writeFile(`${targetsFile}.new`, JSON.stringify([{ targets }]));
      // Renamed into place, so Prometheus never reads a half-written file.
      await rename(`${targetsFile}.new`, targetsFile);
    },
    async query(expr) {
      const body = await api(`/api/v1/query?query=${encodeURIComponent(expr)}`);
      return {
        status: body.status,
        error: body.error,
        resultType: body.data?.resultType,
        result: body.data?.result ?? [],
      };
    },
    async alerts() {
      return (await api('/api/v1/alerts')).data.alerts as PromAlert[];
    },
    stop,
  };
}

/** Polls until `check` gives a value, or fails naming `what` after `ms`. */
export async function until<T>(what: string, ms: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await sleep(250);
  }
}
