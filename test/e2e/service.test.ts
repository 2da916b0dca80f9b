import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { parseClusterNodes } from '../../src/runtime/redis-client.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { deleteClusterPrefix } from '../support/redis-cluster.ts';
import { serviceUrl } from '../support/services.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { request } from '../support/test-app.ts';
import { until } from '../support/until.ts';

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

  // Test mode across the split: the built-in relay is held by the web process (where relay sockets are), the
  // relay and tenant actors run on the worker, and a test key's message is delivered with no agent anywhere.
  const base = `http://127.0.0.1:${web.port}`;
  const signup = await request(base, 'POST', '/api/v1/auth/signup', {
    body: { organizationName: 'Split', email: `split-${Date.now()}@example.com`, password: 'a long password' },
  });
  assert.equal(signup.status, 201, signup.text);
  const key = await request(base, 'POST', '/api/v1/api-keys', {
    token: signup.body.accessToken,
    body: { name: 'test', mode: 'test' },
  });
  assert.equal(key.status, 201, key.text);
  const sent = await request(base, 'POST', '/api/v1/messages', {
    token: key.body.key,
    body: { to: '+15005550001', body: 'split' },
  });
  assert.equal(sent.status, 201, sent.text);
  await until(
    'the test message delivered',
    async () =>
      (await request(base, 'GET', `/api/v1/messages/${sent.body.id}/status`, { token: key.body.key })).body.status ===
      'delivered',
    30_000,
  );

  for (const p of [web, worker]) {
    const { code, ms } = await p.terminate();
    assert.equal(code, 0);
    assert.ok(ms < 10_000, `stopped in ${ms} ms`);
  }
});

test('on a Redis Cluster (REDIS_CLUSTER_NODES) one process serves the API; REDIS_URL at a cluster node is refused naming REDIS_CLUSTER_NODES', async (t) => {
  const nodes = await serviceUrl(t, 'REDIS_CLUSTER_NODES');
  const mongoUrl = await serviceUrl(t, 'MONGODB_URL');
  if (!nodes || !mongoUrl) return;
  const suffix = Math.random().toString(36).slice(2, 8);
  const db = `relaybox_e2e_${suffix}`;
  const env = {
    REDIS_URL: '',
    REDIS_CLUSTER_NODES: nodes,
    MONGODB_URL: mongoUrl.replace(/\/[^/]*$/, `/${db}`),
    RUNTIME_KEY_PREFIX: `e2e-${suffix}`,
  };
  t.after(async () => {
    await deleteClusterPrefix(parseClusterNodes(nodes), env.RUNTIME_KEY_PREFIX);
    const store = new MongoStore(env.MONGODB_URL, db, loadConfig({}).storePingTimeoutMs, loadConfig({}).mongoWrites);
    await store
      .init()
      .then(() => store.dropDatabase())
      .finally(() => store.close())
      .catch(() => undefined);
  });
  const svc = await startServiceProcess('all', env);
  t.after(() => svc.child.kill('SIGKILL'));
  const port = svc.port!;
  assert.equal((await get(port, '/readyz')).status, 200);
  const signup = await fetch(`http://127.0.0.1:${port}/api/v1/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      organizationName: 'Cluster',
      email: `cluster-${suffix}@example.com`,
      password: 'a long password',
    }),
  });
  assert.equal(signup.status, 201);
  const { accessToken } = (await signup.json()) as { accessToken: string };
  const sent = await fetch(`http://127.0.0.1:${port}/api/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${accessToken}` },
    body: JSON.stringify({ to: '+14155550100', body: 'hello' }),
  });
  assert.equal(sent.status, 201);
  assert.equal(((await sent.json()) as { status: string }).status, 'queued');
  const { code } = await svc.terminate();
  assert.equal(code, 0);

  const seed = nodes.split(',')[0]!.trim();
  await assert.rejects(
    startServiceProcess('all', { ...env, REDIS_CLUSTER_NODES: '', REDIS_URL: `redis://${seed}` }, 15_000),
    /REDIS_URL points at a Redis Cluster node: set REDIS_CLUSTER_NODES/,
  );
});

test('a role other than all without REDIS_URL refuses to start with a clear message', async () => {
  await assert.rejects(
    startServiceProcess('worker', { REDIS_URL: '', MONGODB_URL: '' }, 15_000),
    /needs REDIS_URL or REDIS_CLUSTER_NODES/,
  );
});
