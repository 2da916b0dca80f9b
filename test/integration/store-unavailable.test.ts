import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../../src/log.ts';
import { createStore } from '../../src/store/index.ts';
import { cuttableLink } from '../support/cuttable-link.ts';
import { signup, startTestApp, withDatabase } from '../support/test-app.ts';
import { waitFor } from './runtime-contract.ts';

async function transientCount(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return [...text.matchAll(/^relaybox_store_transient_errors_total\{[^}]*outcome="unavailable"[^}]*\} (\d+)/gm)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}

/** An app on Redis + MongoDB wire whose MongoDB connections go through a link the test cuts; undefined when skipped. */
async function behindCuttableLink(t: TestContext, name: string) {
  if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
    if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
    t.skip('REDIS_URL/MONGODB_URL not set');
    return undefined;
  }
  const link = await cuttableLink(new URL(process.env.MONGODB_URL));
  const db = `relaybox_${name}_${Date.now().toString(36)}`;
  const app = await startTestApp('redis+mongo', { MONGODB_URL: withDatabase(`mongodb://127.0.0.1:${link.port}/`, db) });
  t.after(async () => {
    await link.restore().catch(() => undefined);
    await app.stop();
    await link.cut();
  });
  return { link, app };
}

type Logged = {
  msg: string;
  from?: string;
  to?: string;
  error?: string | null;
  restarted?: boolean;
  outstandingMs?: number;
};

/** A store on the MongoDB wire server through a link the test cuts, logging warnings into `logged`; undefined when skipped. */
async function storeBehindLink(t: TestContext, name: string, opts: { wedgedCheckMs?: number } = {}) {
  if (!process.env.MONGODB_URL) {
    if (process.env.CI === 'true') throw new Error('MONGODB_URL must be set in CI');
    t.skip('MONGODB_URL not set');
    return undefined;
  }
  const link = await cuttableLink(new URL(process.env.MONGODB_URL));
  const logged: Logged[] = [];
  const out = new PassThrough().on('data', (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) if (line) logged.push(JSON.parse(line));
  });
  const store = createStore(
    {
      mongoUrl: withDatabase(`mongodb://127.0.0.1:${link.port}/`, `relaybox_${name}_${Date.now().toString(36)}`),
      dataDir: '',
      pingTimeoutMs: 1_000,
      mongoWrites: { writeConcern: 1, retryWrites: false },
      ...opts,
    },
    createLogger('warn', 'store-test', out),
  );
  const probes = store.collection<{ id: string; tenantId: string }>('probes');
  t.after(async () => {
    await link.restore().catch(() => undefined);
    await store.close();
    await link.cut();
  });
  await store.init();
  const probe = () => probes.findOne({ tenantId: 'org_probe' }, { id: 'p1' });
  assert.equal(await probe(), null);
  return { link, logged, probe };
}

test('an unreachable MongoDB wire server is a 503 with Retry-After, counted, and service resumes when it is back', async (t) => {
  const run = await behindCuttableLink(t, 'unavail');
  if (!run) return;
  const { link, app } = run;
  const org = await signup(app);
  assert.equal((await app.request('GET', '/api/v1/contacts', { token: org.ownerToken })).status, 200);
  const before = await transientCount(app.base);

  await link.cut();
  await sleep(app.config.identity.credentialCacheMs + 100);
  const down = await app.request('GET', '/api/v1/contacts', { token: org.ownerToken });
  assert.equal(down.status, 503, down.text);
  assert.equal(down.body.error, 'service_unavailable');
  assert.ok(Number(down.headers.get('retry-after')) >= 1);
  assert.ok((await transientCount(app.base)) > before, 'counted in relaybox_store_transient_errors_total');

  await link.restore();
  let status = 0;
  for (let i = 0; i < 40 && status !== 200; i++) {
    status = (await app.request('GET', '/api/v1/contacts', { token: org.ownerToken })).status;
    if (status !== 200) await sleep(250);
  }
  assert.equal(status, 200, 'answers again once the store is back');
});

test('sends while MongoDB is cut are each a 503 problem with Retry-After, never a 500', async (t) => {
  const run = await behindCuttableLink(t, 'unavail_send');
  if (!run) return;
  const { link, app } = run;
  const org = await signup(app);
  const send = (i: number, key?: string) =>
    app.request('POST', '/api/v1/messages', {
      token: org.ownerToken,
      headers: key ? { 'idempotency-key': key } : {},
      body: { to: `+1415555${String(100 + (i % 100)).padStart(4, '0')}`, body: `while cut ${i}` },
    });
  assert.equal((await send(0)).status, 201, 'a send is accepted while the store answers');

  // Sends in flight as the link is cut, and sends after it: every one is a 201 or a 503 problem.
  const during = Array.from({ length: 8 }, (_, i) => send(1 + i, i % 2 ? `cut-${i}` : undefined));
  await link.cut();
  const after = await Promise.all(Array.from({ length: 6 }, (_, i) => send(20 + i, i % 2 ? `after-${i}` : undefined)));
  for (const res of [...(await Promise.all(during)), ...after]) {
    assert.ok(res.status === 201 || res.status === 503, `${res.status} ${res.text.slice(0, 300)}`);
    if (res.status !== 503) continue;
    assert.equal(res.headers.get('content-type'), 'application/problem+json');
    assert.equal(res.body.error, 'service_unavailable', res.text);
    assert.ok(Number(res.headers.get('retry-after')) >= 1, 'Retry-After');
  }
  assert.ok(
    after.every((res) => res.status === 503),
    `every send after the cut is a 503: ${after.map((r) => r.status)}`,
  );
});

test('a MongoDB server lost, and reached again, is each a warning in the log with why; its first answer is not', async (t) => {
  const run = await storeBehindLink(t, 'lost');
  if (!run) return;
  const { link, logged, probe } = run;
  assert.equal(logged.length, 0, `reaching the server the first time is no warning: ${JSON.stringify(logged)}`);

  await link.cut();
  // A read meets the cut at once (the driver's own check would within its heartbeat).
  await waitFor(
    async () => {
      await probe().catch(() => undefined);
      return logged.length > 0;
    },
    15_000,
    'a warning that the server is not reached',
  );
  const lost = logged[0]!;
  assert.equal(lost.msg, 'the MongoDB server is not reached');
  assert.equal(lost.to, 'Unknown');
  assert.ok(lost.error, 'with the error that lost it');

  await link.restore();
  // Reads make the driver check the server every half second; 40 s leave room for a check the cut wedged (26 s).
  const found = () => logged.find((l) => l.msg === 'the MongoDB server answers again');
  await waitFor(
    async () => {
      await probe().catch(() => undefined);
      return found() !== undefined;
    },
    40_000,
    'a warning that the server answers again',
  );
  assert.equal(found()!.from, 'Unknown');
  assert.equal(await probe(), null, 'and it does');
  // Lost once, found once; between them at most the report of a check the cut wedged.
  const said = logged.map((l) => l.msg).filter((msg) => !msg.includes('check of a server never ended'));
  assert.deepEqual(said, ['the MongoDB server is not reached', 'the MongoDB server answers again']);
});

test('a check of the MongoDB server that does not end is reported and its monitor started again; the store answers once the server does', async (t) => {
  // Shorter than the driver's 3 s limit on a check, so a server that never answers keeps a check running past it.
  const run = await storeBehindLink(t, 'wedged', { wedgedCheckMs: 1_500 });
  if (!run) return;
  const { link, logged, probe } = run;

  link.stall();
  const wedged = (l: Logged) => l.msg.includes('check of a server never ended');
  await waitFor(
    async () => {
      await probe().catch(() => undefined);
      return logged.some(wedged);
    },
    20_000,
    'a check that does not end, reported',
  );
  const report = logged.find(wedged)!;
  assert.equal(report.restarted, true, JSON.stringify(report));
  assert.ok(report.outstandingMs! >= 1_500);

  await link.restore();
  let answer: unknown = 'no answer';
  await waitFor(
    async () => {
      answer = await probe().catch(() => 'no answer');
      return answer === null;
    },
    40_000,
    'the store answers again',
  );
});
