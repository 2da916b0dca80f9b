import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
import { Type } from '@sinclair/typebox';
import { loadConfig } from '../../src/config.ts';
import { negotiateEncoding } from '../../src/http/compression.ts';
import { anyObject, defineRoute } from '../../src/http/route.ts';
import { createHttpServer, type HttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/log.ts';

const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `row_${i}`, name: `Row number ${i}` }));
const csvRows = 3000;

const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/v1/small',
    summary: 'under 1 KiB',
    auth: false,
    schema: { response: { 200: anyObject } },
    handler: (_ctx) => ({ status: 200, body: { data: rows(3) } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/large',
    summary: 'over 1 KiB',
    auth: false,
    schema: { response: { 200: anyObject } },
    handler: (_ctx) => ({ status: 200, body: { data: rows(200) } }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/v1/stream',
    summary: 'streamed CSV',
    auth: false,
    schema: { response: { 200: { description: 'csv', content: { 'text/csv': Type.String() } } } },
    handler: (_ctx) => ({
      status: 200,
      headers: { 'content-type': 'text/csv' },
      stream: (async function* () {
        for (let i = 0; i < csvRows; i += 500)
          yield Array.from({ length: 500 }, (_, j) => `row-${i + j},${'x'.repeat(40)}\n`).join('');
      })(),
    }),
  }),
];

/** A raw GET: node's http client does not decompress, so the bytes on the wire are what is checked. */
function get(
  base: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; raw: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(base + path, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, raw: Buffer.concat(chunks) }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

describe('answer compression', () => {
  let server: HttpServer;
  let base: string;

  before(async () => {
    server = createHttpServer({ config: loadConfig({}), log: createLogger('silent'), routes });
    base = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
  });
  after(() => server.close());

  test('Accept-Encoding is negotiated: br before gzip at equal weight, q=0 refuses, * counts', () => {
    assert.equal(negotiateEncoding('gzip, deflate, br'), 'br');
    assert.equal(negotiateEncoding('gzip'), 'gzip');
    assert.equal(negotiateEncoding('br;q=0.5, gzip;q=0.8'), 'gzip');
    assert.equal(negotiateEncoding('br;q=0, gzip'), 'gzip');
    assert.equal(negotiateEncoding('*'), 'br');
    assert.equal(negotiateEncoding('*, br;q=0'), 'gzip');
    assert.equal(negotiateEncoding('identity'), undefined);
    assert.equal(negotiateEncoding('deflate'), undefined);
    assert.equal(negotiateEncoding(undefined), undefined);
  });

  test('an answer over 1 KiB is gzip or br when accepted, with Vary; identical once decoded', async () => {
    const plain = await get(base, '/api/v1/large', {});
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.ok(plain.raw.length > 1024, `the answer is over 1 KiB (${plain.raw.length})`);
    assert.match(String(plain.headers.vary), /Accept-Encoding/);
    const gz = await get(base, '/api/v1/large', { 'accept-encoding': 'gzip' });
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.match(String(gz.headers.vary), /Accept-Encoding/);
    assert.ok(gz.raw.length < plain.raw.length / 3, `gzip is smaller (${gz.raw.length} < ${plain.raw.length})`);
    assert.deepEqual(zlib.gunzipSync(gz.raw), plain.raw);
    assert.equal(Number(gz.headers['content-length']), gz.raw.length);
    const br = await get(base, '/api/v1/large', { 'accept-encoding': 'gzip, deflate, br' });
    assert.equal(br.headers['content-encoding'], 'br');
    assert.deepEqual(zlib.brotliDecompressSync(br.raw), plain.raw);
  });

  test('an answer under 1 KiB, or a client that does not accept an encoding, gets the plain body', async () => {
    const small = await get(base, '/api/v1/small', { 'accept-encoding': 'gzip, br' });
    assert.equal(small.headers['content-encoding'], undefined);
    assert.ok(small.raw.length < 1024);
    assert.deepEqual(JSON.parse(small.raw.toString()).data.length, 3);
    const identity = await get(base, '/api/v1/large', { 'accept-encoding': 'identity' });
    assert.equal(identity.headers['content-encoding'], undefined);
    assert.equal(JSON.parse(identity.raw.toString()).data.length, 200);
  });

  test('a streamed answer is compressed as it streams, and decodes to every row', async () => {
    for (const [encoding, decode] of [
      ['gzip', zlib.gunzipSync],
      ['br', zlib.brotliDecompressSync],
    ] as const) {
      const res = await get(base, '/api/v1/stream', { 'accept-encoding': encoding });
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-encoding'], encoding);
      assert.equal(res.headers['content-type'], 'text/csv');
      const lines = decode(res.raw).toString().trim().split('\n');
      assert.equal(lines.length, csvRows);
      assert.equal(lines[csvRows - 1], `row-${csvRows - 1},${'x'.repeat(40)}`);
      assert.ok(res.raw.length < csvRows * 10, `compressed (${res.raw.length} bytes)`);
    }
    const plain = await get(base, '/api/v1/stream', {});
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.raw.toString().trim().split('\n').length, csvRows);
  });

  test('fetch decodes a compressed answer transparently', async () => {
    const res = await fetch(`${base}/api/v1/large`, { headers: { 'accept-encoding': 'br' } });
    assert.equal(res.headers.get('content-encoding'), 'br');
    assert.equal(((await res.json()) as { data: unknown[] }).data.length, 200);
  });
});
