import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { serviceUrl } from '../support/services.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

async function get(port: number, path: string): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON (metrics)
  }
  return { status: res.status, body, headers: res.headers };
}

test('the embedded default starts in one process, serves, and stops cleanly on SIGTERM', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-e2e-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const svc = await startServiceProcess('all', { DATA_DIR: dataDir, REDIS_URL: '', MONGODB_URL: '' });
  t.after(() => svc.child.kill('SIGKILL'));
  const port = svc.port!;
  assert.ok(port > 0, 'prints the port it listens on');
  const started = JSON.parse(svc.lines.find((l) => l.includes('listening on'))!);
  assert.equal(started.transport, 'local');
  assert.equal(started.store, 'embedded');

  assert.equal((await get(port, '/healthz')).status, 200);
  const ready = await get(port, '/readyz');
  assert.equal(ready.status, 200);
  const openapi = await get(port, '/api/v1/openapi.json');
  assert.equal(openapi.status, 200);
  assert.equal(openapi.body.openapi, '3.1.0');
  const missing = await get(port, '/api/v1/no-such-thing');
  assert.equal(missing.status, 404);
  assert.equal(missing.body.error, 'not_found');
  assert.ok(missing.headers.get('x-request-id'));
  const metrics = await get(port, '/metrics');
  assert.match(metrics.body, /relaybox_http_request_duration_seconds_bucket\{[^}]*route="\/healthz"/);

  const { code, ms } = await svc.terminate();
  assert.equal(code, 0, 'exits 0 on SIGTERM');
  assert.ok(ms < 10_000, `stopped in ${ms} ms`);
});

test('web and worker roles run as separate processes on Redis and MongoDB wire', async (t) => {
  const redisUrl = await serviceUrl(t, 'REDIS_URL');
  const mongoUrl = await serviceUrl(t, 'MONGODB_URL');
  if (!redisUrl || !mongoUrl) return;
  const db = `relaybox_e2e_${Math.random().toString(36).slice(2, 8)}`;
  const env = {
    REDIS_URL: redisUrl,
    MONGODB_URL: mongoUrl.replace(/\/[^/]*$/, `/${db}`),
    RUNTIME_KEY_PREFIX: `e2e-${Math.random().toString(36).slice(2, 8)}`,
  };
  const procs: ServiceProcess[] = [];
  t.after(() => procs.forEach((p) => p.child.kill('SIGKILL')));
  const worker = await startServiceProcess('worker', env);
  procs.push(worker);
  const web = await startServiceProcess('web', env);
  procs.push(web);
  const started = JSON.parse(web.lines.find((l) => l.includes('listening on'))!);
  assert.equal(started.transport, 'redis');
  assert.equal(started.store, 'mongodb');
  const ready = await get(web.port!, '/readyz');
  assert.equal(ready.status, 200, JSON.stringify(ready.body));

  for (const p of [web, worker]) {
    const { code, ms } = await p.terminate();
    assert.equal(code, 0);
    assert.ok(ms < 10_000, `stopped in ${ms} ms`);
  }
});

test('a role other than all without REDIS_URL refuses to start with a clear message', async () => {
  await assert.rejects(startServiceProcess('worker', { REDIS_URL: '', MONGODB_URL: '' }, 15_000), /needs REDIS_URL/);
});
