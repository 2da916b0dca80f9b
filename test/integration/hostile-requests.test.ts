/**
 * About 9,000 hostile requests on every operation of the OpenAPI document,
 * made from a seed (test/support/hostile-requests.ts), mostly as a real
 * organization owner on the organization's own resources: none may be
 * answered 5xx, every 4xx is RFC 9457 problem details, and the service still
 * answers afterwards. HOSTILE_SEED picks another seed to explore with.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createHmac } from 'node:crypto';
import { problemFaults } from '../support/problem-details.ts';
import { routeFixtures } from '../support/route-fixtures.ts';
import {
  hostileRequests,
  operationsOf,
  type HostileContext,
  type HostileRequest,
  type Operation,
} from '../support/hostile-requests.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

const seed = Number(process.env.HOSTILE_SEED ?? 0x5eed_0038);
const totalRequests = Number(process.env.HOSTILE_REQUESTS ?? 9_000);
/** Requests in flight at once: enough to keep the service busy, few enough for a shared machine. */
const concurrency = 8;

interface Outcome {
  req: HostileRequest;
  status?: number;
  fault?: string;
  ms?: number;
}

// On Redis + MongoDB wire the run is not yet reliable within CI's time on FerretDB (queue stats and the message list
// read every one of the ~10,000 messages a bulk send left queued: answers over 30 s, a run of about 20 minutes on the
// loaded 2-core machine): it runs there when HOSTILE_WIRE=true, and says so when it does not.
const wire = process.env.HOSTILE_WIRE === 'true';
if (!wire && process.env.REDIS_URL)
  console.log('# hostile requests: the Redis + MongoDB wire run is off (HOSTILE_WIRE=true runs it)');

eachBackend((backend) => {
  if (backend !== 'embedded' && !wire) return;
  describe(`hostile requests on every route: no 5xx, every 4xx a problem (${backend})`, () => {
    let app: TestApp;
    let org: Org;
    let ops: Operation[];
    let ctx: HostileContext;

    before(async () => {
      app = await startTestApp(backend);
      org = await signup(app, 'Hostile');
      const other = await signup(app, 'Other');
      ops = operationsOf((await app.request('GET', '/api/v1/openapi.json')).body);
      ctx = await contextOf(app, org, other, ops);
    });
    after(() => app.stop());

    test(`${totalRequests} hostile requests, seed ${seed}`, async (t) => {
      assert.ok(ops.length >= 70, `the document's operations are found (${ops.length})`);
      const requests = hostileRequests(ops, ctx, seed, totalRequests);
      const started = performance.now();
      const outcomes = await inPool(requests, concurrency, (req) => fire(app.base, req));
      const seconds = (performance.now() - started) / 1000;

      const statuses = new Map<number, number>();
      for (const o of outcomes) if (o.status) statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
      const counts = Object.fromEntries([...statuses].sort(([a], [b]) => a - b));
      const closed = outcomes.filter((o) => !o.status && !o.fault).length;
      t.diagnostic(
        `${backend}: ${outcomes.length} requests on ${ops.length} operations in ${seconds.toFixed(1)} s; statuses ${JSON.stringify(counts)}; closed unanswered by the HTTP parser: ${closed}`,
      );

      t.diagnostic(`${backend}: slowest operations (max ms, mean ms, requests): ${slowest(outcomes, 10)}`);

      const faults = outcomes.filter((o) => o.fault);
      if (process.env.HOSTILE_REPORT) {
        const { writeFileSync } = await import('node:fs');
        writeFileSync(
          process.env.HOSTILE_REPORT,
          outcomes
            .map(
              (o) => `${o.ms?.toFixed(0)}\t${o.status ?? '-'}\t${o.req.operation} | ${o.req.what} | ${o.fault ?? ''}`,
            )
            .join('\n'),
        );
      }
      assert.deepEqual(
        faults.slice(0, 15).map((o) => `${o.req.operation} | ${o.req.what} | ${o.fault}`),
        [],
        `${faults.length} of ${outcomes.length} requests got a 5xx, no answer or an error that is not a problem`,
      );
      assert.ok(outcomes.length >= totalRequests, `${outcomes.length} requests, at least ${totalRequests}`);
      const owner = outcomes.filter((o) => o.req.headers.authorization === ctx.owner && o.status !== 401);
      assert.ok(
        owner.length > outcomes.length / 2,
        `most requests are the owner's, past authentication (${owner.length})`,
      );

      // What the hostile requests stored reads back: every read of the organization's lists and resources, as the owner.
      const reads = ops
        .filter((op) => op.method === 'GET' && op.authenticated)
        .map((op): HostileRequest => ({
          operation: op.key,
          what: 'a valid read afterwards',
          method: 'GET',
          path: op.path.replace(/\{([^}]+)\}/g, (_, name: string) => ctx.realParams(op)?.[name] ?? 'none'),
          headers: { authorization: ctx.owner },
        }));
      const readBack = await inPool(reads, concurrency, (req) => fire(app.base, req));
      assert.deepEqual(
        readBack.filter((o) => o.fault).map((o) => `${o.req.operation} | ${o.fault}`),
        [],
        'every read of what was stored answers without a 5xx',
      );

      const health = await app.request('GET', '/healthz');
      assert.equal(health.status, 200, 'the service still answers /healthz');
      const me = await app.request('GET', '/api/v1/me', { token: org.ownerToken });
      assert.equal(me.status, 200, "the owner's credential still works");
    });
  });
});

/** The `n` operations whose slowest answer took longest, with their mean and count: where a slow run spends its time. */
function slowest(outcomes: Outcome[], n: number): string {
  const byOp = new Map<string, { max: number; total: number; count: number }>();
  for (const o of outcomes) {
    const s = byOp.get(o.req.operation) ?? { max: 0, total: 0, count: 0 };
    s.max = Math.max(s.max, o.ms ?? 0);
    s.total += o.ms ?? 0;
    s.count++;
    byOp.set(o.req.operation, s);
  }
  return [...byOp]
    .sort(([, a], [, b]) => b.max - a.max)
    .slice(0, n)
    .map(([op, s]) => `${op} ${s.max.toFixed(0)}/${(s.total / s.count).toFixed(0)}/${s.count}`)
    .join('; ');
}

/** Runs `work` on every item, `size` at a time, keeping the items' order in the results. */
async function inPool<T, R>(items: T[], size: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: size }, worker));
  return results;
}

async function fire(base: string, req: HostileRequest): Promise<Outcome> {
  const t0 = performance.now();
  const o = await fire1(base, req);
  o.ms = performance.now() - t0;
  return o;
}
async function fire1(base: string, req: HostileRequest): Promise<Outcome> {
  let res: Response;
  let text: string;
  try {
    res = await fetch(base + req.path, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(30_000),
    });
    // Inside the time limit too: an answer whose body does not arrive is a fault naming its request.
    text = await res.text();
  } catch (err) {
    const e = err as Error & { cause?: Error };
    if (req.parserMayClose && /other side closed|ECONNRESET/.test(e.cause?.message ?? '')) return { req };
    return { req, fault: `no answer: ${e.message}${e.cause ? ` (${e.cause.message})` : ''}` };
  }
  if (res.status >= 500) return { req, status: res.status, fault: `${res.status} ${text.slice(0, 200)}` };
  if (res.status < 400) return { req, status: res.status };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text.slice(0, 200);
  }
  const faults = problemFaults({
    status: res.status,
    contentType: res.headers.get('content-type'),
    requestId: res.headers.get('x-request-id'),
    body,
  });
  return faults.length === 0
    ? { req, status: res.status }
    : { req, status: res.status, fault: `${res.status}: ${faults.join('; ')}` };
}

/** What the generator takes from the running service: credentials good and bad, real resources, real cursors. */
async function contextOf(app: TestApp, org: Org, other: Org, ops: Operation[]): Promise<HostileContext> {
  const owner = `Bearer ${org.ownerToken}`;
  const real = new Map<string, Record<string, string>>();
  for (const op of ops) {
    const fixture = routeFixtures[`${op.method} ${op.path.replace(/\{([^}]+)\}/g, ':$1')}`];
    if (fixture) real.set(op.key, (await fixture(app, org)).params);
  }
  const otherContact = await app.request('POST', '/api/v1/contacts', {
    token: other.ownerToken,
    body: { firstName: 'Other' },
  });
  const otherIds = [
    ...new Set([...real.values()].flatMap((p) => Object.values(p))),
    other.orgId,
    other.teamId,
    otherContact.body.id,
  ];

  const cursors: string[] = [];
  for (const token of [org.ownerToken, other.ownerToken]) {
    for (const name of ['Ada', 'Grace'])
      await app.request('POST', '/api/v1/contacts', { token, body: { firstName: name } });
    for (const list of ['/api/v1/contacts?limit=1', '/api/v1/messages?limit=1', '/api/v1/conversations?limit=1']) {
      const page = await app.request('GET', list, { token });
      if (page.body?.nextCursor) cursors.push(page.body.nextCursor);
    }
  }
  assert.ok(cursors.length >= 2, 'real cursors are found');

  const viewer = await apiKey(app, org, 'viewer');
  const revoked = await app.request('POST', '/api/v1/api-keys', { token: org.ownerToken, body: { name: 'revoked' } });
  await app.request('DELETE', `/api/v1/api-keys/${revoked.body.id}`, { token: org.ownerToken });
  const [header, payload] = org.ownerToken.split('.');
  const unsigned = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${payload}.`;
  const flipped = `${org.ownerToken.slice(0, -3)}${org.ownerToken.endsWith('A') ? 'B' : 'A'}${org.ownerToken.slice(-2)}`;
  const forged = `${header}.${payload}.${createHmac('sha256', 'secret').update(`${header}.${payload}`).digest('base64url')}`;
  const badCredentials: HostileContext['badCredentials'] = [
    ['none', undefined],
    ['empty', ''],
    ['the scheme alone', 'Bearer'],
    ['the scheme and a space', 'Bearer '],
    ['Basic credentials', `Basic ${Buffer.from('owner:password').toString('base64')}`],
    ['a token without its scheme', org.ownerToken],
    ['a lower-case scheme', `bearer ${org.ownerToken}`],
    ['a token with one character changed', `Bearer ${flipped}`],
    ['a truncated token', `Bearer ${org.ownerToken.slice(0, -5)}`],
    ['a token with text after it', `Bearer ${org.ownerToken}x`],
    ['an unsigned token (alg none)', `Bearer ${unsigned}`],
    ['a token signed with another key', `Bearer ${forged}`],
    ['a token whose payload is not JSON', `Bearer ${header}.${Buffer.from('not json').toString('base64url')}.sig`],
    ['8,000 characters', `Bearer ${'a'.repeat(8000)}`],
    ['two tokens', `Bearer ${org.ownerToken}, Bearer ${org.ownerToken}`],
    ['a refresh token', `Bearer ${org.refreshToken}`],
    ['a revoked API key', `Bearer ${revoked.body.key}`],
    ['an API key with another secret', `Bearer ${revoked.body.key.slice(0, -4)}AAAA`],
    ['a viewer API key', `Bearer ${viewer}`],
    ["another organization's owner", `Bearer ${other.ownerToken}`],
    ['Latin-1 bytes', 'Bearer \u00ff\u00fe\u00e9'],
  ];
  const routes = new Map(app.http.routes.map((r) => [`${r.method} ${r.path}`, r]));
  return {
    owner,
    badCredentials,
    realParams: (op) => real.get(op.key),
    otherIds,
    cursors,
    maxBodyBytes: (op) =>
      routes.get(`${op.method} ${op.path.replace(/\{([^}]+)\}/g, ':$1')}`)?.maxBodyBytes ?? app.config.maxBodyBytes,
    maxHeaderBytes: app.config.maxHeaderBytes,
  };
}
