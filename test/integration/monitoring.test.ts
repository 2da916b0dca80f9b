/**
 * The monitoring kept as code (monitoring/relaybox-rules.yml and the
 * Grafana dashboard monitoring/relaybox-dashboard.json): promtool
 * checks the rules and runs their unit tests (monitoring/relaybox-rules.test.yml:
 * every alert fires on a series that should page or ticket and stays silent
 * on a healthy one), and every metric the rules and the dashboard read is one a running
 * service exports, so a renamed metric breaks the build, not the pager.
 * promtool comes from Debian's `prometheus` package (`.ci/run` installs it);
 * outside CI a machine without it skips the promtool checks, saying why.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { test, type TestContext } from 'node:test';
import { startTestApp, type Backend } from '../support/test-app.ts';

const dir = resolve(import.meta.dirname, '..', '..', 'monitoring');
const rulesFile = join(dir, 'relaybox-rules.yml');
const dashboardFile = join(dir, 'relaybox-dashboard.json');

/** Every query of the dashboard (Grafana JSON): its panels' targets. */
function dashboardQueries(): string[] {
  const dashboard = JSON.parse(readFileSync(dashboardFile, 'utf8')) as {
    panels: Array<{ title: string; targets?: Array<{ expr: string }> }>;
  };
  return dashboard.panels.flatMap((p) => (p.targets ?? []).map((q) => q.expr));
}

function promtool(t: TestContext, args: string[]): { status: number | null; output: string } | undefined {
  const run = spawnSync('promtool', args, { cwd: dir, encoding: 'utf8' });
  if (run.error) {
    if (process.env.CI === 'true')
      assert.fail('promtool is missing in CI: .ci/run installs it (Debian package prometheus)');
    t.skip('promtool not found (apt-get install prometheus)');
    return undefined;
  }
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

test('promtool accepts the rules and their unit tests pass', (t) => {
  const checked = promtool(t, ['check', 'rules', rulesFile]);
  if (!checked) return;
  assert.equal(checked.status, 0, checked.output);
  const tested = promtool(t, ['test', 'rules', join(dir, 'relaybox-rules.test.yml')]);
  assert.equal(tested?.status, 0, tested?.output);
});

test('every alert has its runbook page, and a unit test where it fires', () => {
  const rules = readFileSync(rulesFile, 'utf8');
  const tests = readFileSync(join(dir, 'relaybox-rules.test.yml'), 'utf8');
  const alerts = new Set([...rules.matchAll(/^\s+- alert: (\S+)$/gm)].map((m) => m[1]!));
  assert.ok(alerts.size >= 11, `${alerts.size} alerts`);
  // Absolute, so Alertmanager shows a link: the operator's base (an external label) before the page's path in the repository.
  const base = '{{ $externalLabels.runbook_base_url }}/';
  const urls = [...rules.matchAll(/runbook_url: '([^']+)'$/gm)].map((m) => m[1]!);
  assert.equal(urls.length, [...rules.matchAll(/^\s+- alert: /gm)].length, 'every alert rule names a runbook');
  for (const url of new Set(urls)) {
    assert.ok(url.startsWith(base), `${url} starts with the configurable base`);
    const page = url.slice(base.length);
    assert.match(page, /^docs\/runbooks\/Relaybox\w+\.md$/);
    assert.ok(existsSync(join(dir, '..', page)), `${page} exists`);
  }
  const expected = [...tests.matchAll(/runbook_url: (\S+)$/gm)].map((m) => m[1]!);
  assert.ok(
    expected.length > 0 && expected.every((url) => /^https:\/\/[^/]+\/.+\/docs\/runbooks\//.test(url)),
    'the unit tests expect absolute links',
  );
  for (const alert of alerts) {
    assert.ok(urls.includes(`${base}docs/runbooks/${alert}.md`), `${alert} has a page of its own`);
    // A test case that expects it: its name followed by a non-empty list of expected alerts.
    assert.match(
      tests,
      new RegExp(`alertname: ${alert}\\n\\s+exp_alerts:\\n\\s+- exp_labels:`),
      `a unit test fires ${alert}`,
    );
  }
});

test('every metric the rules and the dashboard read is exported by a running service, every recorded series they use is recorded', async (t) => {
  const rules = readFileSync(rulesFile, 'utf8');
  const queries = dashboardQueries();
  assert.ok(queries.length >= 10, `the dashboard has ${queries.length} queries`);
  const recorded = new Set([...rules.matchAll(/^\s+- record: (\S+)$/gm)].map((m) => m[1]!));
  const usedRecords = new Set(queries.flatMap((q) => [...q.matchAll(/\b(relaybox:[a-z0-9_:]+)\b/g)].map((m) => m[1]!)));
  assert.deepEqual(
    [...usedRecords].filter((r) => !recorded.has(r)),
    [],
    'series the dashboard reads that no rule records',
  );
  const used = new Set(
    [rules, ...queries].flatMap((text) =>
      [...text.matchAll(/\b((?:relaybox|nodejs|process)_[a-z0-9_]+)\b/g)].map((m) =>
        m[1]!.replace(/_(bucket|count|sum)$/, ''),
      ),
    ),
  );
  const backends: Backend[] =
    process.env.REDIS_URL && process.env.MONGODB_URL ? ['embedded', 'redis+mongo'] : ['embedded'];
  const exported = new Set<string>();
  for (const backend of backends) {
    const app = await startTestApp(backend);
    try {
      const text = (await app.request('GET', '/metrics')).text;
      for (const m of text.matchAll(/^# TYPE (\S+) /gm)) exported.add(m[1]!);
    } finally {
      await app.stop();
    }
  }
  // Shards exist only where actors run on Redis Streams.
  const wireOnly = new Set(['relaybox_runtime_owned_shards']);
  const missing = [...used].filter((name) => !exported.has(name) && !(backends.length === 1 && wireOnly.has(name)));
  if (backends.length === 1)
    t.diagnostic(`REDIS_URL/MONGODB_URL not set: not checked on the wire backend (${[...wireOnly].join(', ')})`);
  assert.ok(
    used.has('relaybox_http_request_duration_seconds') && used.has('relaybox_messages_total'),
    `the metric names read from the rules: ${[...used].join(', ')}`,
  );
  assert.deepEqual(missing, [], 'metrics the rules or the dashboard read that no service exports');
});
