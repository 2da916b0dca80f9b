import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
import { Type } from '@sinclair/typebox';
import { loadConfig } from '../../src/config.ts';
import { AppError } from '../../src/errors.ts';
import { paginate, paginationQuery } from '../../src/http/pagination.ts';
import { anyObject, defineRoute, noContent } from '../../src/http/route.ts';
import { createHttpServer, type HttpServer } from '../../src/http/server.ts';
import { strictObject } from '../../src/http/validation.ts';
import { createLogger } from '../../src/log.ts';
import { httpRequest, rawExchange, rawGet } from '../support/raw-http.ts';

const streamed = { description: 'text', content: { 'text/plain': Type.String() } };
const json = async (res: Response): Promise<any> => res.json();

let slowWrites = 0;
/**
 * 13 s in all: past uWS's 10 s HTTP timeout, which its timer (4 s ticks)
 * fires between 8 and 12 s after it is armed.
 */
const slowStreamRows = 26;
const slowStreamGapMs = 500;

const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/v1/things',
    summary: 'create a thing',
    auth: false,
    schema: {
      body: strictObject({ name: Type.String({ maxLength: 50 }), size: Type.Optional(Type.Integer({ minimum: 0 })) }),
      response: { 201: anyObject },
    },
    handler: (ctx) => ({ status: 201, body: { ...ctx.body } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/things',
    summary: 'list things',
    auth: false,
    schema: {
      query: strictObject({ ...paginationQuery, kind: Type.Optional(Type.String({ maxLength: 20 })) }),
      response: { 200: anyObject },
    },
    handler: (ctx) => ({ status: 200, body: paginate([ctx.query], 1, ctx.query.page, ctx.query.limit) }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/things/:id',
    summary: 'one thing',
    auth: false,
    schema: { params: strictObject({ id: Type.String({ maxLength: 64 }) }), response: { 200: anyObject } },
    handler: (ctx) => ({ status: 200, body: { id: ctx.params.id } }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/v1/things/:id/parts',
    summary: 'params, query and body at once',
    auth: false,
    schema: {
      params: strictObject({ id: Type.String({ pattern: '^t_' }) }),
      query: strictObject({ dryRun: Type.Optional(Type.Boolean()) }),
      body: strictObject({
        name: Type.String({ maxLength: 5 }),
        sizes: Type.Array(Type.Integer({ minimum: 0 }), { maxItems: 3 }),
      }),
      response: { 201: anyObject },
    },
    handler: (ctx) => ({ status: 201, body: { id: ctx.params.id, dryRun: ctx.query.dryRun ?? false, ...ctx.body } }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/v1/things/:id',
    summary: 'delete',
    auth: false,
    schema: { response: { 204: noContent } },
    handler: (_ctx) => ({ status: 204 }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/boom',
    summary: 'throws',
    auth: false,
    schema: { response: {} },
    handler: () => {
      throw new Error('secret internals at /srv/app.ts:42');
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/busy',
    summary: 'throws a 429',
    auth: false,
    schema: { response: {} },
    handler: () => {
      throw new AppError('rate_limited', 'slow down', { retryAfterSeconds: 2.2 });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/private',
    summary: 'needs auth',
    schema: { response: { 200: anyObject } },
    handler: (_ctx) => ({ status: 200, body: {} }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/slow',
    summary: 'answers late',
    auth: false,
    schema: { response: { 200: anyObject } },
    handler: async (_ctx) => {
      await new Promise((r) => setTimeout(r, 30));
      return { status: 200, body: { ok: true } };
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/v1/slow-writes',
    summary: 'records a write, answers late',
    auth: false,
    schema: { response: { 201: anyObject } },
    handler: async (_ctx) => {
      slowWrites++;
      await new Promise((r) => setTimeout(r, 400));
      return { status: 201, body: { ok: true } };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/broken-stream',
    summary: 'fails mid-stream',
    auth: false,
    schema: { response: { 200: streamed } },
    handler: (_ctx) => ({
      status: 200,
      stream: (async function* () {
        yield 'first row\n';
        await new Promise((r) => setTimeout(r, 10));
        throw new Error('the store went away');
      })(),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/stream',
    summary: 'streams',
    auth: false,
    schema: { response: { 200: streamed } },
    handler: (_ctx) => ({
      status: 200,
      headers: { 'content-type': 'text/csv' },
      stream: (async function* () {
        for (let i = 0; i < 2000; i++) yield `row-${i},${'x'.repeat(100)}\n`;
      })(),
    }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/slow-stream',
    summary: 'streams for longer than uWS lets a connection idle',
    auth: false,
    schema: { response: { 200: streamed } },
    handler: (_ctx) => ({
      status: 200,
      headers: { 'content-type': 'text/csv' },
      stream: (async function* () {
        for (let i = 0; i < slowStreamRows; i++) {
          yield `row-${i}\n`;
          await new Promise((r) => setTimeout(r, slowStreamGapMs));
        }
      })(),
    }),
  }),
];

describe('HTTP server', () => {
  let server: HttpServer;
  let base: string;
  let ready = true;
  const crashes: unknown[] = [];
  const onCrash = (err: unknown) => crashes.push(err);

  before(async () => {
    process.on('uncaughtException', onCrash);
    process.on('unhandledRejection', onCrash);
    const config = { ...loadConfig({}), maxBodyBytes: 1024 };
    server = createHttpServer({
      config,
      log: createLogger('silent'),
      routes,
      readinessChecks: [
        {
          name: 'store',
          check: async () => {
            if (!ready) throw new Error('down');
          },
        },
      ],
    });
    base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
  });

  after(async () => {
    await server.close();
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
    assert.deepEqual(crashes, [], 'no uncaught errors');
  });

  const post = (path: string, body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    fetch(base + path, { method: 'POST', body, headers });

  test('a valid body is accepted and every answer has a request id', async () => {
    const res = await post('/api/v1/things', JSON.stringify({ name: 'a', size: 2 }));
    assert.equal(res.status, 201);
    assert.deepEqual(await json(res), { name: 'a', size: 2 });
    assert.ok(res.headers.get('x-request-id'));
    const echoed = await fetch(base + '/healthz', { headers: { 'x-request-id': 'abc-123' } });
    assert.equal(echoed.headers.get('x-request-id'), 'abc-123');
    const refused = await fetch(base + '/healthz', { headers: { 'x-request-id': 'not a valid id, has spaces' } });
    assert.notEqual(refused.headers.get('x-request-id'), 'not a valid id, has spaces');
  });

  test('a 400 lists every violation of the path, the query and the body in details, each with its path', async () => {
    const res = await post(
      '/api/v1/things/x_1/parts?dryRun=maybe&extra=1',
      JSON.stringify({ name: 'too long a name', sizes: [1, -2, 3, -4], colour: 'red' }),
    );
    assert.equal(res.status, 400);
    const body = await json(res);
    assert.equal(body.error, 'validation_error');
    const paths = body.details.map((d: { path: string }) => d.path).sort();
    assert.deepEqual(paths, ['/colour', '/dryRun', '/extra', '/id', '/name', '/sizes', '/sizes/1', '/sizes/3']);
    assert.ok(body.details.every((d: { message: string }) => d.message.length > 0));
    assert.match(body.message, /and 7 more/);
    const good = await post('/api/v1/things/t_1/parts?dryRun=true', JSON.stringify({ name: 'ok', sizes: [1] }));
    assert.equal(good.status, 201);
    assert.deepEqual(await json(good), { id: 't_1', dryRun: true, name: 'ok', sizes: [1] });
  });

  test('malformed JSON is a 400 validation_error', async () => {
    const res = await post('/api/v1/things', '{"name": ');
    assert.equal(res.status, 400);
    const body = await json(res);
    assert.equal(body.error, 'validation_error');
    assert.equal(body.statusCode, 400);
    assert.ok(res.headers.get('x-request-id'));
  });

  test('a body over the limit is a 413, with or without Content-Length', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(2000) });
    const res = await post('/api/v1/things', big);
    assert.equal(res.status, 413);
    assert.equal((await json(res)).error, 'payload_too_large');
    assert.ok(res.headers.get('x-request-id'));
    const chunked = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        base + '/api/v1/things',
        { method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
        (r) => {
          r.resume();
          resolve(r.statusCode!);
        },
      );
      req.on('error', reject);
      for (let i = 0; i < 10; i++) req.write('x'.repeat(300));
      req.end();
    });
    assert.equal(chunked, 413);
  });

  test('unknown fields, wrong types and missing fields are 400 naming the field', async () => {
    let body = await await json(await post('/api/v1/things', JSON.stringify({ name: 'a', colour: 'red' })));
    assert.equal(body.error, 'validation_error');
    assert.equal(body.details[0].path, '/colour');
    body = await await json(await post('/api/v1/things', JSON.stringify({ size: 'big' })));
    assert.deepEqual(body.details.map((d: { path: string }) => d.path).sort(), ['/name', '/size']);
    const res = await fetch(base + '/api/v1/things?page=abc');
    assert.equal(res.status, 400);
    assert.equal((await json(res)).details[0].path, '/page');
  });

  test('a body that is not JSON is a 415', async () => {
    const res = await post('/api/v1/things', 'name=a', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(res.status, 415);
    assert.equal((await json(res)).error, 'unsupported_media_type');
  });

  test('pagination defaults to page 1 limit 20 and refuses a limit above 100', async () => {
    const body = await await json(await fetch(base + '/api/v1/things'));
    assert.deepEqual(body.pagination, { page: 1, limit: 20, total: 1, totalPages: 1 });
    assert.equal((await fetch(base + '/api/v1/things?limit=100&page=3')).status, 200);
    const res = await fetch(base + '/api/v1/things?limit=101');
    assert.equal(res.status, 400);
    assert.equal((await json(res)).details[0].path, '/limit');
    assert.equal((await fetch(base + '/api/v1/things?limit=0')).status, 400);
  });

  test('unknown routes are 404 not_found; params and DELETE routes work', async () => {
    const res = await fetch(base + '/api/v1/nowhere');
    assert.equal(res.status, 404);
    assert.equal(res.headers.get('content-type'), 'application/problem+json');
    const problem = await json(res);
    assert.deepEqual(Object.keys(problem).sort(), [
      'detail',
      'error',
      'instance',
      'message',
      'status',
      'statusCode',
      'title',
      'type',
    ]);
    assert.ok(res.headers.get('x-request-id'));
    assert.equal(problem.instance, res.headers.get('x-request-id'));
    assert.deepEqual(await json(await fetch(base + '/api/v1/things/a%20b')), { id: 'a b' });
    assert.equal((await fetch(base + '/api/v1/things/x', { method: 'DELETE' })).status, 204);
  });

  test('a handler that throws is a 500 internal_error without internals', async () => {
    const res = await fetch(base + '/api/v1/boom');
    assert.equal(res.status, 500);
    const text = await res.text();
    const body = JSON.parse(text);
    assert.equal(body.error, 'internal_error');
    assert.doesNotMatch(text, /secret internals|app\.ts|at /);
    assert.ok(res.headers.get('x-request-id'));
  });

  test('a 429 carries Retry-After in whole seconds', async () => {
    const res = await fetch(base + '/api/v1/busy');
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '3');
  });

  test('a route that needs a credential answers 401 without one', async () => {
    const res = await fetch(base + '/api/v1/private');
    assert.equal(res.status, 401);
    assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="relaybox"');
    assert.equal((await json(res)).error, 'unauthorized');
  });

  test('1,000 requests with a third aborted by the client leave the server up and serving', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 50 });
    const one = (i: number) =>
      new Promise<void>((resolve) => {
        const abort = i % 3 === 0;
        const path = i % 2 ? '/api/v1/slow' : '/api/v1/things';
        const req = http.request(
          base + path,
          {
            method: i % 2 ? 'GET' : 'POST',
            agent: abort ? undefined : agent,
            headers: { 'content-type': 'application/json' },
          },
          (res) => {
            res.resume();
            res.on('end', resolve);
            res.on('error', () => resolve());
          },
        );
        req.on('error', () => resolve());
        if (i % 2 === 0) req.write('{"name":');
        if (abort)
          setTimeout(() => {
            req.destroy();
            resolve();
          }, 5);
        else {
          if (i % 2 === 0) req.write('"n"}');
          req.end();
        }
      });
    for (let batch = 0; batch < 10; batch++)
      await Promise.all(Array.from({ length: 100 }, (_, i) => one(batch * 100 + i)));
    agent.destroy();
    const res = await fetch(base + '/api/v1/slow');
    assert.equal(res.status, 200);
    assert.equal((await fetch(base + '/healthz')).status, 200);
    assert.deepEqual(crashes, []);
  });

  test('a malformed escape in a path or query is an answer, not a crash', async () => {
    const path = await fetch(base + '/api/v1/things/%E0%A4%A');
    assert.equal(path.status, 200);
    assert.equal((await json(path)).id, '%E0%A4%A');
    const query = await fetch(base + '/api/v1/things?kind=%E0%A4%A');
    assert.ok(query.status === 200 || query.status === 400, `query answered ${query.status}`);
    assert.equal((await fetch(base + '/healthz')).status, 200, 'still serving');
  });

  test('a stream that fails midway cuts the connection instead of leaving the client waiting', async () => {
    const res = await fetch(base + '/api/v1/broken-stream', { signal: AbortSignal.timeout(5_000) });
    assert.equal(res.status, 200);
    await assert.rejects(
      res.text(),
      (err: Error) => err.name !== 'TimeoutError',
      'the body ends in an error, not a hang',
    );
    assert.equal((await fetch(base + '/healthz')).status, 200, 'still serving');
  });

  test('a request pipelined in a later read, while a write is still being handled, waits and is answered after it, in order', async () => {
    const before = slowWrites;
    const write = httpRequest('POST', '/api/v1/slow-writes', [
      ['Host', 'x'],
      ['Content-Length', '0'],
    ]);
    const next = httpRequest('GET', '/api/v1/things/one', [['Host', 'x']]);
    const res = await rawExchange(base, [write, next, next], 3_000, 150);
    assert.deepEqual(res.statuses, [201, 200, 200], res.text);
    assert.equal(slowWrites - before, 1);
  });

  test('answers can be streamed', async () => {
    const res = await fetch(base + '/api/v1/stream');
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.equal(text.split('\n').filter(Boolean).length, 2000);
    assert.ok(text.startsWith('row-0,'));
  });

  test("a stream that lasts longer than uWS's 10 s HTTP timeout arrives whole, plain, gzip or br", async () => {
    const decoders = { identity: (raw: Buffer) => raw, gzip: zlib.gunzipSync, br: zlib.brotliDecompressSync };
    await Promise.all(
      Object.entries(decoders).map(async ([encoding, decode]) => {
        const res = await rawGet(base + '/api/v1/slow-stream', { 'accept-encoding': encoding });
        assert.equal(res.status, 200);
        assert.equal(res.headers['content-encoding'], encoding === 'identity' ? undefined : encoding);
        const rows = decode(res.raw).toString().split('\n').filter(Boolean);
        assert.equal(rows.length, slowStreamRows, `${encoding}: every row`);
      }),
    );
  });

  test('metrics carry the route pattern, readyz follows its checks', async () => {
    await fetch(base + '/api/v1/things/some-id');
    const metrics = await (await fetch(base + '/metrics')).text();
    assert.match(
      metrics,
      /relaybox_http_request_duration_seconds_count\{route="\/api\/v1\/things\/:id",method="GET",status="200"\}/,
    );
    assert.doesNotMatch(metrics, /some-id/);
    assert.match(metrics, /process_cpu_user_seconds_total/);
    assert.equal((await fetch(base + '/readyz')).status, 200);
    ready = false;
    const res = await fetch(base + '/readyz');
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('content-type'), 'application/problem+json');
    const body = await json(res);
    assert.equal(body.error, 'service_unavailable');
    assert.equal(body.type, '/errors/service_unavailable');
    assert.equal(body.status, 503);
    assert.match(body.message, /store/);
    ready = true;
  });

  test('the OpenAPI document describes every route with its parameters', async () => {
    const doc = await await json(await fetch(base + '/api/v1/openapi.json'));
    assert.equal(doc.openapi, '3.1.0');
    for (const r of routes) {
      const path = r.path.replace(/:([a-z]+)/g, '{$1}');
      assert.ok(doc.paths[path]?.[r.method.toLowerCase()], `${r.method} ${path} documented`);
    }
    const one = doc.paths['/api/v1/things/{id}'].get;
    const own = (params: Array<{ in: string }>) => params.filter((p) => p.in === 'path' || p.in === 'query');
    assert.deepEqual(
      own(one.parameters).map((p: any) => [p.name, p.in]),
      [['id', 'path']],
    );
    const list = doc.paths['/api/v1/things'].get;
    assert.deepEqual(
      own(list.parameters)
        .map((p: any) => p.name)
        .sort(),
      ['kind', 'limit', 'page'],
    );
    assert.deepEqual(
      own(list.parameters).filter((p: any) => p.required),
      [],
      'page and limit have defaults: not required',
    );
    assert.ok(doc.paths['/api/v1/things'].post.requestBody);
  });
});
