import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { httpRequest, rawExchange } from '../support/raw-http.ts';
import { apiKey, eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';

const message = JSON.stringify({ to: '+14155550100', body: 'framing test' });

eachBackend((backend) => {
  describe(`requests a proxy could read differently, pipelined or malformed (${backend})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(backend);
    });
    after(() => app.stop());

    /** A fresh organization's member key and how many messages it has stored. */
    async function sender() {
      const key = await apiKey(app, await signup(app), 'member');
      const stored = async () => (await app.request('GET', '/api/v1/messages', { token: key })).body.pagination.total as number;
      const send = (extra: [string, string][] = [], body = message) =>
        httpRequest('POST', '/api/v1/messages', [['Host', 'relaybox.test'], ['Authorization', `Bearer ${key}`], ['Content-Type', 'application/json'], ...extra], body);
      return { key, stored, send };
    }

    test('a send on a raw connection is answered 201 and stored (the baseline the cases below differ from)', async () => {
      const s = await sender();
      const res = await rawExchange(app.base, s.send([['Content-Length', String(message.length)]]), 1_000);
      assert.deepEqual(res.statuses, [201]);
      assert.equal(await s.stored(), 1);
    });

    test('two Content-Length headers are 400 and the connection is closed; nothing after the head is read as a request', async () => {
      const smuggled = httpRequest('GET', '/healthz', [['Host', 'relaybox.test']]);
      const res = await rawExchange(app.base, httpRequest('POST', '/api/v1/auth/login', [['Host', 'relaybox.test'], ['Content-Type', 'application/json'], ['Content-Length', '0'], ['Content-Length', String(smuggled.length)]], smuggled));
      assert.deepEqual(res.statuses, [400], res.text);
      assert.match(res.text, /"error":"bad_request"/);
      assert.ok(res.closed, 'connection closed');
    });

    test('two equal Content-Length headers are refused before the handler runs: nothing is stored', async () => {
      const s = await sender();
      const res = await rawExchange(app.base, s.send([['Content-Length', String(message.length)], ['Content-Length', String(message.length)]]));
      assert.deepEqual(res.statuses, [400], res.text);
      assert.ok(res.closed);
      assert.equal(await s.stored(), 0);
    });

    test('Content-Length with Transfer-Encoding is closed unanswered by uWS; a transfer coding other than chunked is 400 and closed', async () => {
      const s = await sender();
      const both = await rawExchange(app.base, s.send([['Content-Length', String(message.length)], ['Transfer-Encoding', 'chunked']], `${message.length.toString(16)}\r\n${message}\r\n0\r\n\r\n`));
      assert.deepEqual(both.statuses, [], both.text);
      assert.ok(both.closed);
      const gzip = await rawExchange(app.base, s.send([['Transfer-Encoding', 'gzip']], ''));
      assert.deepEqual(gzip.statuses, [400], gzip.text);
      assert.ok(gzip.closed);
      assert.equal(await s.stored(), 0);
    });

    test('two Host headers are 400 and closed', async () => {
      const res = await rawExchange(app.base, httpRequest('GET', '/healthz', [['Host', 'relaybox.test'], ['Host', 'elsewhere.test']]));
      assert.deepEqual(res.statuses, [400], res.text);
      assert.ok(res.closed);
    });

    test('a send pipelined with another request in one write is never stored without its answer', async () => {
      const s = await sender();
      const pipelined = s.send([['Content-Length', String(message.length)]]) + httpRequest('GET', '/healthz', [['Host', 'relaybox.test']]);
      for (let round = 0; round < 3; round++) {
        const before = await s.stored();
        const res = await rawExchange(app.base, pipelined, 2_000);
        const answeredSends = res.statuses.length > 0 && res.statuses[0] === 201 ? 1 : 0;
        assert.deepEqual(res.statuses, [201, 200].slice(0, res.statuses.length), `answers in order: ${res.text}`);
        assert.equal((await s.stored()) - before, answeredSends, `stored sends match answered ones (answers: ${res.statuses.join(',') || 'none'})`);
      }
    });

    test('a method a path does not serve is 405 with Allow; an unknown path stays 404', async () => {
      const put = await app.request('PUT', '/healthz', { body: {} });
      assert.equal(put.status, 405);
      assert.equal(put.body.error, 'method_not_allowed');
      assert.equal(put.headers.get('allow'), 'GET');
      const del = await app.request('DELETE', '/api/v1/messages');
      assert.equal(del.status, 405);
      assert.deepEqual(del.headers.get('allow')!.split(', ').sort(), ['GET', 'POST']);
      const item = await app.request('POST', '/api/v1/messages/msg_x/status');
      assert.equal(item.status, 405);
      assert.equal(item.headers.get('allow'), 'GET');
      assert.equal((await app.request('GET', '/api/v1/nothing-here')).status, 404);
    });

    test('header fields over MAX_HEADER_BYTES are 431 and the connection is closed', async () => {
      const res = await rawExchange(app.base, httpRequest('GET', '/healthz', [['Host', 'relaybox.test'], ['X-Padding', 'a'.repeat(app.config.maxHeaderBytes)]]));
      assert.deepEqual(res.statuses, [431], res.text);
      assert.ok(res.closed);
      const fits = await rawExchange(app.base, httpRequest('GET', '/healthz', [['Host', 'relaybox.test'], ['X-Padding', 'a'.repeat(app.config.maxHeaderBytes - 100)]]), 500);
      assert.deepEqual(fits.statuses, [200]);
    });

    test('what uWebSockets.js drops without an answer (docs/operations.md tells a proxy in front to normalize these)', async () => {
      const unknownMethod = await rawExchange(app.base, httpRequest('FROB', '/healthz', [['Host', 'relaybox.test']]), 1_000);
      assert.deepEqual(unknownMethod.statuses, []);
      assert.ok(unknownMethod.closed);
      const http10 = await rawExchange(app.base, 'GET /healthz HTTP/1.0\r\nHost: relaybox.test\r\n\r\n', 600);
      assert.deepEqual(http10.statuses, []);
      const noHost = await rawExchange(app.base, 'GET /healthz HTTP/1.1\r\n\r\n', 600);
      assert.deepEqual(noHost.statuses, []);
      const manyLines = await rawExchange(app.base, httpRequest('GET', '/healthz', [['Host', 'relaybox.test'], ...Array.from({ length: 48 }, (_, i): [string, string] => [`X-Line-${i}`, 'v'])]), 600);
      assert.deepEqual(manyLines.statuses, []);
    });
  });
});
