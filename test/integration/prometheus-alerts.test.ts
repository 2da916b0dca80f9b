/**
 * The pager, end to end: a real Prometheus (Debian's `prometheus` package)
 * scrapes a running Relaybox every second and evaluates the project's rules,
 * their windows and `for:` scaled down 60 times (5m becomes 5 s, 1h 60 s) in
 * a copy made here. Real faults are induced and each alert must reach
 * `firing` in Prometheus's own API within a bound, then resolve once the
 * fault is gone; the time each took is printed. Meanwhile every dashboard
 * panel's query must return data in its unit and legend, and each fired
 * alert's runbook's first diagnostic must show what the runbook says.
 *
 * Embedded: one process. Redis + MongoDB wire (REDIS_URL, MONGODB_URL): a
 * web process and a worker, the worker scraped on its METRICS_PORT, MongoDB
 * reached through a TCP hop the test can cut (the shared server is never
 * stopped).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { storeFile } from '../../src/store/embedded-store.ts';
import { AnsweringRelay, firesWithin, resolvesWithin, tenant, type Tenant, type Timing } from '../support/alert-rig.ts';
import { cuttableLink } from '../support/cuttable-link.ts';
import { firstDiagnostic, panelProblems, panelQueries } from '../support/monitoring-checks.ts';
import {
  freePort,
  prometheusInstalled,
  scaledRules,
  startPrometheus,
  until,
  type Prometheus,
} from '../support/prometheus.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { withDatabase } from '../support/test-app.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { wireRun } from '../support/wire-run.ts';

const factor = 60;
const runbookBase = 'https://example.com/relaybox/blob/main';
const timings: Timing[] = [];
/** Series one process may export (docs/operations.md): none has a label per organization, webhook or URL. */
const seriesBudget = 1_500;

const serviceEnv = {
  LOG_LEVEL: 'warn',
  RATE_LIMIT_PER_MINUTE: '6000000',
  RATE_LIMIT_BURST: '1000000',
  PACING_PER_SECOND: '1000000',
  PACING_BURST: '1000000',
  PACING_NEW_CONTACTS_PER_DAY: '1000000',
  PACING_UNANSWERED_CAP: '1000000',
  PACING_FOLLOW_UPS_PER_DAY: '1000000',
  PACING_JITTER_MS: '0',
  PACING_QUIET_HOURS: 'off',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  // One attempt at a time per webhook: a slow, failing endpoint makes its own events late within seconds.
  WEBHOOK_CONCURRENCY: '1',
  TENANT_SWEEP_MS: '1000',
  RUNTIME_LEASE_TTL_MS: '3000',
  RUNTIME_LEASE_RENEW_MS: '500',
  RUNTIME_REBALANCE_MS: '300',
  SHUTDOWN_TIMEOUT_MS: '3000',
};

/** A running Relaybox the test can fault: its web address, and how to break and mend its store. */
interface Deployment {
  base: string;
  targets(): string[];
  /** The service's last log lines, for a failure's message. */
  logs(): string[];
  storeDown(): Promise<void>;
  storeUp(): Promise<void>;
  /** Wire only: SIGKILLs the only worker, and starts its replacement. */
  workers?: { kill(): void; start(): Promise<void> };
  stop(): Promise<void>;
}

/** The embedded default: one process; its store's files made immutable is a volume gone read-only. */
async function embedded(t: TestContext): Promise<Deployment | undefined> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-alerts-'));
  const probe = spawnSync('chattr', ['+i', dir], { encoding: 'utf8' });
  spawnSync('chattr', ['-i', dir]);
  if (probe.status !== 0) {
    await rm(dir, { recursive: true, force: true });
    const reason = `chattr +i failed (${(probe.stderr || probe.error?.message || '').trim()}): the embedded store's fault needs root on ext4 or xfs`;
    if (process.env.CI === 'true') throw new Error(reason);
    t.skip(reason);
    return undefined;
  }
  // Embedded even where the run has REDIS_URL and MONGODB_URL set for the wire tests (as CI has).
  const web = await startServiceProcess(
    'all',
    { ...serviceEnv, REDIS_URL: '', MONGODB_URL: '', DATA_DIR: dir },
    60_000,
  );
  // The database, its log and the directory; SQLite's shared-memory index stays writable (it is mapped into memory, where a file that cannot grow is a SIGBUS).
  const files = [dir, join(dir, storeFile), join(dir, `${storeFile}-wal`)];
  const chattr = (flag: string) => spawnSync('chattr', [flag, ...files], { encoding: 'utf8' });
  return {
    base: `http://127.0.0.1:${web.port}`,
    targets: () => [`127.0.0.1:${web.port}`],
    logs: () => web.lines.slice(-20),
    async storeDown() {
      const done = chattr('+i');
      assert.equal(done.status, 0, done.stderr);
    },
    async storeUp() {
      chattr('-i');
    },
    async stop() {
      chattr('-i');
      await web.terminate();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Redis + MongoDB wire: a web process and one worker, MongoDB through a TCP hop of the test's own. */
async function wire(t: TestContext): Promise<Deployment | undefined> {
  const procs = new Set<ServiceProcess>();
  const run = await wireRun(t, 'alerts', () => {
    for (const p of procs) p.child.kill('SIGKILL');
  });
  if (!run) return undefined;
  const link = await cuttableLink(new URL(run.mongoUrl));
  const env = {
    ...serviceEnv,
    ...run.env,
    MONGODB_URL: withDatabase(`mongodb://127.0.0.1:${link.port}/`, run.database),
    WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex'),
  };
  const metricsPort = await freePort();
  let worker: ServiceProcess | undefined;
  const startWorker = async () => {
    worker = await startServiceProcess('worker', { ...env, METRICS_PORT: String(metricsPort) }, 60_000);
    procs.add(worker);
    said(worker, 'worker');
    assert.equal(worker.port, metricsPort, 'the worker says where its metrics are');
  };
  await startWorker();
  const web = await startServiceProcess('web', env, 60_000);
  procs.add(web);
  said(web, 'web');
  return {
    base: `http://127.0.0.1:${web.port}`,
    targets: () => [`127.0.0.1:${web.port}`, `127.0.0.1:${metricsPort}`],
    // Each process's last lines, after what it said before them of reaching MongoDB (the store's lines) and of any
    // unhandled rejection.
    logs: () =>
      [...procs].flatMap((p) => [
        ...p.lines
          .slice(0, -10)
          .filter((line) => /"component":"store"|unhandled rejection/.test(line))
          .slice(-10),
        ...p.lines.slice(-10),
      ]),
    storeDown: () => link.cut(),
    storeUp: async () => void (await link.restore()),
    workers: {
      kill() {
        worker!.child.kill('SIGKILL');
        procs.delete(worker!);
      },
      start: startWorker,
    },
    async stop() {
      await link.restore().catch(() => undefined);
      for (const p of procs) await p.terminate();
      procs.clear();
      await link.cut();
    },
  };
}

/** A process that ends on its own says so, with its last log lines. */
function said(p: ServiceProcess, name: string): void {
  p.child.once('exit', (code, signal) => {
    if (signal !== 'SIGTERM' && signal !== 'SIGKILL')
      console.log(`# ${name} exited (${code ?? signal}):\n${p.lines.slice(-5).join('\n')}`);
  });
}

/** Runs the first diagnostic of the alert's runbook (a PromQL query) and returns its samples' values by labels. */
async function diagnose(prom: Prometheus, alert: string): Promise<Array<{ labels: string; value: number }>> {
  const query = firstDiagnostic(alert);
  const answer = await prom.query(query);
  assert.equal(answer.status, 'success', `${alert}.md: \`${query}\` does not run: ${answer.error}`);
  return answer.result.map((s) => ({ labels: JSON.stringify(s.metric), value: Number(s.value[1]) }));
}

function record(backend: string, alert: string, fired: number, resolved?: number): void {
  timings.push({ alert, backend, firedAfterS: fired, resolvedAfterS: resolved });
  console.log(
    `# ${backend}: ${alert} firing ${fired.toFixed(1)} s after the fault` +
      (resolved === undefined ? '' : `, resolved ${resolved.toFixed(1)} s after it was removed`),
  );
}

async function alertsFireAndResolve(t: TestContext, backend: 'embedded' | 'redis+mongo'): Promise<void> {
  if (!prometheusInstalled(t)) return;
  const d = backend === 'embedded' ? await embedded(t) : await wire(t);
  if (!d) return;
  t.after(() => d.stop());
  const prom = await startPrometheus(await scaledRules(factor), runbookBase);
  t.after(() => prom.stop());
  await prom.scrape(d.targets());
  const fine = await WebhookReceiver.start();
  const failing = await WebhookReceiver.start();
  t.after(() => Promise.all([fine.stop(), failing.stop()]));
  let broken = false;
  // Broken: a 500 after half a second, so one attempt at a time holds the webhook's only slot.
  failing.respond = (_req, res) =>
    void (broken ? setTimeout(() => res.writeHead(500).end('down'), 500) : res.writeHead(200).end('ok'));

  // Steady load: an organization with its relay online and a webhook that answers, 4 sends a second.
  const load = await tenant(d.base, 'load');
  const hook = (org: { token: string }, url: string) =>
    fetch(`${d.base}/api/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url, events: ['message.queued'] }),
    }).then((r) => assert.equal(r.status, 201));
  await hook(load, fine.url);
  const relays = [await AnsweringRelay.register(d.base, load)];
  t.after(() => relays.forEach((r) => r.close()));
  const statuses = new Map<number, number>();
  let loading = true;
  const loop = (async () => {
    while (loading) {
      const status = await load.send().catch(() => 0);
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      await sleep(250);
    }
  })();
  t.after(async () => {
    loading = false;
    await loop;
  });
  await until('the targets scraped', 20_000, async () =>
    (await prom.query('sum(up)')).result.some((s) => Number(s.value[1]) === d.targets().length) ? true : undefined,
  );

  // 1. The only relay of an organization with queued messages goes away; 2. a webhook endpoint fails slowly under a burst.
  const asleep = await tenant(d.base, 'asleep');
  const mac = await AnsweringRelay.register(d.base, asleep);
  relays.push(mac);
  const hooked = await tenant(d.base, 'hooked');
  await hook(hooked, failing.url);
  relays.push(await AnsweringRelay.register(d.base, hooked));
  await mac.disconnect();
  for (let i = 0; i < 3; i++) assert.equal(await asleep.send(), 201);
  const relayGone = Date.now();
  broken = true;
  for (let i = 0; i < 90; i++) assert.equal(await hooked.send(), 201);
  const burst = Date.now();

  const noRelay = await firesWithin(prom, 'RelayboxNoRelayOnline', {}, relayGone, 90_000);
  const waiting = await diagnose(prom, 'RelayboxNoRelayOnline');
  assert.ok(waiting.length === 1 && waiting[0]!.value >= 1, `organizations waiting: ${JSON.stringify(waiting)}`);
  await mac.reconnect();
  const back = Date.now();
  record(
    backend,
    'RelayboxNoRelayOnline',
    noRelay.seconds,
    await resolvesWithin(prom, 'RelayboxNoRelayOnline', {}, back, 30_000).catch(async (err: Error) =>
      assert.fail(`${err.message}\n${await whoWaits(d, prom, { load, asleep, hooked }, relays)}`),
    ),
  );

  const page = { severity: 'page', long_window: '1h' };
  const late = await firesWithin(prom, 'RelayboxWebhookBudgetBurn', page, burst, 120_000);
  const lateShare = await diagnose(prom, 'RelayboxWebhookBudgetBurn');
  assert.ok(lateShare.length === 1 && lateShare[0]!.value > 14.4 * 0.005, `late share: ${JSON.stringify(lateShare)}`);
  broken = false;
  const mended = Date.now();
  record(
    backend,
    'RelayboxWebhookBudgetBurn',
    late.seconds,
    await resolvesWithin(prom, 'RelayboxWebhookBudgetBurn', { severity: 'page' }, mended, 120_000),
  );

  // Every panel while the service is under load, and every kind of traffic has flowed.
  const queries = panelQueries();
  assert.ok(queries.length >= 10, `${queries.length} panel queries`);
  const panels = await until('every panel returns data', 30_000, async () => {
    const problems: string[] = [];
    for (const q of queries)
      for (const p of await panelProblems(prom, q)) problems.push(`${q.panel} \`${q.expr}\`: ${p}`);
    return problems.length === 0 ? queries.length : (lastProblems = problems) && undefined;
  }).catch(async (err: Error) => {
    const seen = await prom.query(
      'sum by (outcome) (increase(relaybox_messages_total[1m])) or sum(relaybox_relays_connected) or sum(relaybox_queue_messages)',
    );
    assert.fail(
      `${err.message}\n${lastProblems.join('\n')}\nthe last minute: ${JSON.stringify(seen.result)}, sends by status: ${JSON.stringify([...statuses])}, given to the relays: ${relays.map((r) => r.sends).join(', ')}, queued: ${JSON.stringify((await prom.query('relaybox_queue_messages')).result)}`,
    );
  });
  console.log(`# ${backend}: all ${panels} panel queries return data in their unit and legend`);
  const series = (await prom.query('count by (instance) ({job="relaybox"})')).result;
  console.log(`# ${backend}: series scraped per process: ${series.map((s) => s.value[1]).join(', ')}`);
  for (const s of series)
    assert.ok(Number(s.value[1]) <= seriesBudget, `${s.value[1]} series, over the budget of ${seriesBudget}`);

  // 3. The store stops answering.
  {
    const before = statuses.get(201) ?? 0;
    await d.storeDown();
    const storeGone = Date.now();
    try {
      const unavailable = await firesWithin(prom, 'RelayboxStoreUnavailable', {}, storeGone, 60_000);
      const burn = await firesWithin(prom, 'RelayboxAcceptErrorBudgetBurn', page, storeGone, 60_000);
      const byOperation = await diagnose(prom, 'RelayboxStoreUnavailable');
      assert.ok(
        byOperation.some((s) => s.value > 0 && JSON.parse(s.labels).operation),
        `unavailable by operation: ${JSON.stringify(byOperation)}`,
      );
      const errorShare = await diagnose(prom, 'RelayboxAcceptErrorBudgetBurn');
      assert.ok(
        errorShare.length === 1 && errorShare[0]!.value > 14.4 * 0.001,
        `5xx share: ${JSON.stringify(errorShare)}`,
      );
      assert.ok(
        (statuses.get(503) ?? 0) > 0,
        `sends answered 503 while the store was down: ${JSON.stringify([...statuses])}`,
      );
      await d.storeUp();
      const up = Date.now();
      record(
        backend,
        'RelayboxStoreUnavailable',
        unavailable.seconds,
        await resolvesWithin(prom, 'RelayboxStoreUnavailable', {}, up, 60_000).catch(async (err: Error) =>
          assert.fail(`${err.message}\n${await stillFailing(d, prom)}`),
        ),
      );
      record(
        backend,
        'RelayboxAcceptErrorBudgetBurn',
        burn.seconds,
        await resolvesWithin(prom, 'RelayboxAcceptErrorBudgetBurn', { severity: 'page' }, up, 90_000),
      );
    } finally {
      await d.storeUp();
    }
    await until('sends accepted again', 20_000, async () => ((statuses.get(201) ?? 0) > before + 4 ? true : undefined));
    assert.equal(statuses.get(500) ?? 0, 0, `no send is a 500: ${JSON.stringify([...statuses])}`);
  }

  // 4. The only worker dies: nobody owns a shard while sends keep coming.
  if (d.workers) {
    d.workers.kill();
    const killed = Date.now();
    const unowned = await firesWithin(prom, 'RelayboxShardsUnowned', {}, killed, 60_000);
    const owners = await diagnose(prom, 'RelayboxShardsUnowned');
    assert.ok(
      owners.length > 0 && owners.every((s) => s.value === 0),
      `shards owned by instance: ${JSON.stringify(owners)}`,
    );
    await d.workers.start();
    const started = Date.now();
    record(
      backend,
      'RelayboxShardsUnowned',
      unowned.seconds,
      await resolvesWithin(prom, 'RelayboxShardsUnowned', {}, started, 60_000),
    );
  }
}
let lastProblems: string[] = [];

/** Which process and collection still count store failures after the store came back, and what they said: a failure's evidence. */
async function stillFailing(d: Deployment, prom: Prometheus): Promise<string> {
  const expr =
    'sum by (instance, operation) (increase(relaybox_store_transient_errors_total{outcome="unavailable"}[15s]))';
  const samples = (await prom.query(expr)).result.map((s) => `${JSON.stringify(s.metric)} ${s.value[1]}`);
  return [`${expr}: ${samples.join('; ')}`, 'the service said:', ...d.logs()].join('\n');
}

/** What each organization holds and which relays it has, as the service and Prometheus see it: a failure's evidence. */
async function whoWaits(
  d: Deployment,
  prom: Prometheus,
  orgs: Record<string, Tenant>,
  relays: AnsweringRelay[],
): Promise<string> {
  const lines: string[] = [];
  for (const expr of ['relaybox_tenants_waiting_for_relay', 'relaybox_queue_messages', 'relaybox_relays_connected']) {
    const samples = (await prom.query(expr)).result.map((s) => `${JSON.stringify(s.metric)} ${s.value[1]}`);
    lines.push(`${expr}: ${samples.join('; ')}`);
  }
  for (const [name, org] of Object.entries(orgs)) {
    const get = (path: string) =>
      fetch(`${d.base}${path}`, { headers: { authorization: `Bearer ${org.token}` } }).then((r) => r.text());
    lines.push(`${name} queue: ${await get('/api/v1/messages/queue/stats')}`);
    lines.push(`${name} relays: ${await get('/api/v1/relays')}`);
  }
  lines.push(`sends given to the relays: ${relays.map((r) => r.sends).join(', ')}`);
  lines.push('the service said:', ...d.logs());
  return lines.join('\n');
}

for (const backend of ['embedded', 'redis+mongo'] as const) {
  test(
    `${backend}: each fault pages through a real Prometheus and clears once fixed; every panel shows data`,
    { timeout: 360_000 },
    (t) => alertsFireAndResolve(t, backend),
  );
}

test.after(() => {
  if (timings.length > 0)
    console.log(`# time to firing and to resolved:\n${timings.map((x) => `#   ${JSON.stringify(x)}`).join('\n')}`);
});
