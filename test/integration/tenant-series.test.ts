/**
 * Per-organization visibility without per-organization series: 1,000
 * organizations (made through the store: each an organization, its default
 * team and an owner API key, as signup and POST /api/v1/api-keys write them;
 * no user, so no password hash) each create a webhook whose endpoint refuses,
 * send a message that stays queued (no relay is online) and read their
 * statistics. The real service
 * processes are scraped after the first 10 organizations' traffic and after
 * all 1,000's: every process stays under the series budget of
 * docs/operations.md, the count does not grow with organizations, and no
 * label value is an organization id. The platform operators' top view
 * (GET /api/v1/admin/tenants/top) names the busiest of them instead.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { identityCollections } from '../../src/identity/identity-store.ts';
import { newApiKey, newPlatformKey } from '../../src/identity/secrets.ts';
import { newId, nowIso } from '../../src/ids.ts';
import { createLogger } from '../../src/log.ts';
import { platformScope } from '../../src/store/collection.ts';
import { createStore } from '../../src/store/index.ts';
import { freePort } from '../support/prometheus.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { sleep, until } from '../support/until.ts';
import { wireRun } from '../support/wire-run.ts';

/** Series one process may export (docs/operations.md). */
const seriesBudget = 1_500;
/**
 * Series 990 more organizations may add to a process, doing what the first
 * 10 did: bounded label values that show with time and volume (a kind of
 * garbage collection, a store operation first made). A label per
 * organization would add at least 990.
 */
const growthAllowed = 50;
const organizations = 1_000;
/** The one organization with more queued messages than the others: the top view must name it first. */
const busiest = 537;
const platform = newPlatformKey();

const serviceEnv = {
  LOG_LEVEL: 'warn',
  RATE_LIMIT_PER_MINUTE: '6000000',
  RATE_LIMIT_BURST: '1000000',
  AUTH_RATE_LIMIT_PER_MINUTE: '6000000',
  AUTH_RATE_LIMIT_BURST: '1000000',
  WEBHOOK_ALLOW_PRIVATE: 'true',
  // A refused attempt is retried long after the test: each delivery stays pending.
  WEBHOOK_RETRY_BASE_MS: '600000',
  PLATFORM_ADMIN_KEY_HASHES: platform.hash,
  SHUTDOWN_TIMEOUT_MS: '3000',
};

interface Tenant {
  id: string;
  name: string;
  key: string;
}

/** The organizations, each with its default team and an owner API key, written to the store the service will open. */
async function makeOrganizations(env: Record<string, string>): Promise<Tenant[]> {
  const config = loadConfig(env);
  const store = createStore(
    {
      mongoUrl: config.mongoUrl,
      dataDir: config.dataDir,
      pingTimeoutMs: config.storePingTimeoutMs,
      mongoWrites: config.mongoWrites,
    },
    createLogger('silent'),
  );
  const db = identityCollections(store);
  await store.init();
  const tenants: Tenant[] = [];
  try {
    for (let start = 0; start < organizations; start += 50) {
      const batch = Array.from({ length: Math.min(50, organizations - start) }, (_, i) => {
        const now = nowIso();
        const id = newId('org');
        const teamId = newId('team');
        const key = newApiKey();
        const keyId = newId('key');
        const tenant = { id, name: `Tenant ${String(start + i).padStart(4, '0')}`, key: key.raw };
        tenants.push(tenant);
        const scope = { tenantId: id };
        return Promise.all([
          db.organizations.insertOne(scope, {
            id,
            tenantId: id,
            name: tenant.name,
            defaultTeamId: teamId,
            createdAt: now,
            updatedAt: now,
          }),
          db.teams.insertOne(scope, { id: teamId, tenantId: id, name: 'Default', createdAt: now, updatedAt: now }),
          db.apiKeys.insertOne(scope, {
            id: keyId,
            tenantId: id,
            name: 'owner key',
            role: 'owner',
            prefix: key.visiblePrefix,
            hash: key.hash,
            createdAt: now,
            updatedAt: now,
          }),
          db.apiKeyIndex.insertOne(platformScope, {
            id: key.hash,
            tenantId: platformScope.tenantId,
            orgId: id,
            keyId,
          }),
        ]);
      });
      await Promise.all(batch);
    }
  } finally {
    await store.close();
  }
  return tenants;
}

interface Deployment {
  base: string;
  /** Each process's /metrics. */
  scrapes: Array<{ name: string; url: string }>;
}

async function call(base: string, method: string, path: string, token: string, body?: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, text, body: text ? JSON.parse(text) : undefined };
}

/** What each organization does: a webhook that fails, a message or more that stay queued, a look at its statistics. */
async function traffic(base: string, tenants: Tenant[], from: number, to: number): Promise<void> {
  let next = from;
  const worker = async () => {
    for (let i = next++; i < to; i = next++) {
      const { key } = tenants[i]!;
      const hook = await call(base, 'POST', '/api/v1/webhooks', key, {
        // Nothing listens on port 9 here: each attempt is refused.
        url: 'http://127.0.0.1:9/hook',
        events: ['message.queued'],
      });
      assert.equal(hook.status, 201, hook.text);
      for (let n = 0; n < (i === busiest ? 5 : 1); n++) {
        const sent = await call(base, 'POST', '/api/v1/messages', key, { to: '+14155550100', body: `from ${i}` });
        assert.equal(sent.status, 201, sent.text);
      }
      const stats = await call(base, 'GET', '/api/v1/stats/messages', key);
      assert.equal(stats.status, 200, stats.text);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

interface Scrape {
  series: number;
  retrying: number;
  text: string;
}

async function scrape(url: string): Promise<Scrape> {
  const text = await (await fetch(url)).text();
  const samples = text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));
  const retrying = samples
    .filter((line) => line.startsWith('relaybox_webhook_deliveries_total{outcome="retrying"}'))
    .reduce((n, line) => n + Number(line.split(' ').pop()), 0);
  return { series: samples.length, retrying, text };
}

/** Each sample's name and labels. */
const seriesOf = (text: string) =>
  text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => line.slice(0, line.lastIndexOf(' ')));

/** Every label value of every sample in an exposition. */
function labelValues(text: string): string[] {
  const values: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const labels = /^[a-zA-Z_:][a-zA-Z0-9_:]*\{(.*)\} /.exec(line)?.[1];
    if (labels) for (const m of labels.matchAll(/[a-zA-Z_][a-zA-Z0-9_]*="((?:[^"\\]|\\.)*)"/g)) values.push(m[1]!);
  }
  return values;
}

async function measure(backend: string, deployment: Deployment, tenants: Tenant[]): Promise<void> {
  const { base, scrapes } = deployment;
  const retrying = async () =>
    (await Promise.all(scrapes.map((s) => scrape(s.url)))).reduce((k, s) => k + s.retrying, 0);
  /** Scrapes once at least `n` webhook attempts were refused and their count has stood still for 5 s (at most 2 minutes). */
  const settled = async (n: number) => {
    await until(`${n} webhook attempts refused and set to retry`, async () => (await retrying()) >= n, 120_000);
    const deadline = Date.now() + 120_000;
    let last = -1;
    let since = Date.now();
    while (Date.now() < deadline && Date.now() - since < 5_000) {
      const now = await retrying();
      if (now !== last) [last, since] = [now, Date.now()];
      await sleep(1_000);
    }
    console.log(`# ${backend}: ${last} webhook attempts refused when scraped`);
    return Promise.all(scrapes.map(async (s) => ({ name: s.name, ...(await scrape(s.url)) })));
  };
  await traffic(base, tenants, 0, 10);
  const few = await settled(10);
  const started = Date.now();
  await traffic(base, tenants, 10, organizations);
  const trafficMs = Date.now() - started;
  const many = await settled(10);
  const ids = new Set(tenants.map((x) => x.id));
  for (const [i, s] of many.entries()) {
    const before = few[i]!.series;
    console.log(
      `# ${backend} ${s.name}: ${before} series after 10 organizations' traffic, ${s.series} after ${organizations}'s (traffic of 990 in ${trafficMs} ms)`,
    );
    assert.ok(s.series <= seriesBudget, `${s.name}: ${s.series} series, over the budget of ${seriesBudget}`);
    const had = new Set(seriesOf(few[i]!.text));
    const added = seriesOf(s.text).filter((key) => !had.has(key));
    assert.ok(
      s.series - before <= growthAllowed,
      `${s.name}: ${s.series - before} series more with 990 more organizations (allowed: ${growthAllowed}):\n${added.join('\n')}`,
    );
    const values = labelValues(s.text);
    assert.ok(values.length > 100, `${s.name}: the labels are read (${values.length})`);
    const named = values.filter((v) => ids.has(v) || /\borg_[A-Za-z0-9_-]{16,}/.test(v));
    assert.deepEqual(named, [], `${s.name}: no label value is an organization id`);
  }

  // Where the organizations are named instead: the operators' top view.
  for (const by of ['queued', 'webhook_lag', 'sent'] as const) {
    const asked = Date.now();
    const top = await call(base, 'GET', `/api/v1/admin/tenants/top?by=${by}&limit=100`, platform.raw);
    const ms = Date.now() - asked;
    assert.equal(top.status, 200, top.text);
    console.log(
      `# ${backend}: GET /api/v1/admin/tenants/top?by=${by}&limit=100 over ${organizations} organizations: ${ms} ms`,
    );
    if (by === 'queued') {
      assert.equal(top.body.data.length, 100);
      assert.deepEqual(top.body.data[0], {
        organization: { id: tenants[busiest]!.id, name: tenants[busiest]!.name },
        value: 5,
        unit: 'messages',
      });
      assert.ok(top.body.data.slice(1).every((row: { value: number }) => row.value === 1));
    }
    if (by === 'webhook_lag') {
      assert.equal(top.body.data.length, 100);
      // The first organizations' deliveries are the oldest pending.
      const first = new Set(tenants.slice(0, 10).map((x) => x.id));
      assert.ok(
        top.body.data.slice(0, 10).every((row: { organization: { id: string } }) => first.has(row.organization.id)),
        JSON.stringify(top.body.data.slice(0, 10)),
      );
    }
    if (by === 'sent') assert.deepEqual(top.body.data, [], 'nothing was sent: no relay is online');
  }
}

test('1,000 organizations: each process stays under the series budget and no label holds an organization id (embedded)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-series-'));
  let service: ServiceProcess | undefined;
  t.after(async () => {
    await service?.terminate();
    await rm(dir, { recursive: true, force: true });
  });
  // CI exports REDIS_URL and MONGODB_URL: the embedded run must not inherit them.
  const env = { ...serviceEnv, REDIS_URL: '', MONGODB_URL: '', DATA_DIR: dir };
  const tenants = await makeOrganizations(env);
  service = await startServiceProcess('all', env, 60_000);
  const base = `http://127.0.0.1:${service.port}`;
  await measure('embedded', { base, scrapes: [{ name: 'all', url: `${base}/metrics` }] }, tenants);
});

test('1,000 organizations: each process stays under the series budget and no label holds an organization id (Redis + MongoDB wire)', async (t) => {
  const procs: ServiceProcess[] = [];
  const run = await wireRun(t, 'series', () => {
    for (const p of procs) p.child.kill('SIGKILL');
  });
  if (!run) return;
  t.after(async () => {
    for (const p of procs) await p.terminate();
  });
  const env = { ...serviceEnv, ...run.env, WEBHOOK_SECRET_KEY: randomBytes(32).toString('hex') };
  const tenants = await makeOrganizations(env);
  const metricsPort = await freePort();
  procs.push(await startServiceProcess('worker', { ...env, METRICS_PORT: String(metricsPort) }, 60_000));
  const web = await startServiceProcess('web', env, 60_000);
  procs.push(web);
  const base = `http://127.0.0.1:${web.port}`;
  await measure(
    'redis+mongo',
    {
      base,
      scrapes: [
        { name: 'web', url: `${base}/metrics` },
        { name: 'worker', url: `http://127.0.0.1:${metricsPort}/metrics` },
      ],
    },
    tenants,
  );
});
