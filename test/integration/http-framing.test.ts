import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { httpRequest, RawConnection, rawExchange } from '../support/raw-http.ts';
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
      const stored = async () =>
        (await app.request('GET', '/api/v1/messages', { token: key })).body.pagination.total as number;
      const send = (extra: [string, string][] = [], body = message) =>
        httpRequest(
          'POST',
          '/api/v1/messages',
          [
            ['Host', 'relaybox.test'],
            ['Authorization', `Bearer ${key}`],
            ['Content-Type', 'application/json'],
            ...extra,
          ],
          body,
        );
      return { key, stored, send };
    }

    test('a send on a raw connection is answered 201 and stored (the baseline the cases below differ from)', async () => {
      const s = await sender();
      const res = await rawExchange(app.base, s.send([['Content-Length', String(message.length)]]), 1_000);
      assert.deepEqual(res.statuses, [201]);
      assert.equal(await s.stored(), 1);
    });

    test('two Content-Length headers with a request after the head: the connection is closed, and nothing after the head is read as a request', async () => {
      const smuggled = httpRequest('GET', '/healthz', [['Host', 'relaybox.test']]);
      const res = await rawExchange(
        app.base,
        httpRequest(
          'POST',
          '/api/v1/auth/login',
          [
            ['Host', 'relaybox.test'],
            ['Content-Type', 'application/json'],
            ['Content-Length', '0'],
            ['Content-Length', String(smuggled.length)],
          ],
          smuggled,
        ),
      );
      // In one read with the refused head, the smuggled request makes uWS close the connection before the 400 is written.
      assert.deepEqual(res.statuses, [], res.text);
      assert.ok(res.closed, 'connection closed');
      const alone = await rawExchange(
        app.base,
        httpRequest('POST', '/api/v1/auth/login', [
          ['Host', 'relaybox.test'],
          ['Content-Type', 'application/json'],
          ['Content-Length', '0'],
          ['Content-Length', '0'],
        ]),
      );
      assert.deepEqual(alone.statuses, [400], alone.text);
      assert.match(alone.text, /"error":"bad_request"/);
      assert.ok(alone.closed, 'connection closed');
    });

    test('two equal Content-Length headers are refused before the handler runs: nothing is stored', async () => {
      const s = await sender();
      const res = await rawExchange(
        app.base,
        s.send([
          ['Content-Length', String(message.length)],
          ['Content-Length', String(message.length)],
        ]),
      );
      assert.deepEqual(res.statuses, [400], res.text);
      assert.ok(res.closed);
      assert.equal(await s.stored(), 0);
    });

    test('Content-Length with Transfer-Encoding is closed unanswered by uWS; a transfer coding other than chunked is 400 and closed', async () => {
      const s = await sender();
      const both = await rawExchange(
        app.base,
        s.send(
          [
            ['Content-Length', String(message.length)],
            ['Transfer-Encoding', 'chunked'],
          ],
          `${message.length.toString(16)}\r\n${message}\r\n0\r\n\r\n`,
        ),
      );
      assert.deepEqual(both.statuses, [], both.text);
      assert.ok(both.closed);
      const gzip = await rawExchange(app.base, s.send([['Transfer-Encoding', 'gzip']], ''));
      assert.deepEqual(gzip.statuses, [400], gzip.text);
      assert.ok(gzip.closed);
      assert.equal(await s.stored(), 0);
    });

    test('two Host headers are 400 and closed', async () => {
      const res = await rawExchange(
        app.base,
        httpRequest('GET', '/healthz', [
          ['Host', 'relaybox.test'],
          ['Host', 'elsewhere.test'],
        ]),
      );
      assert.deepEqual(res.statuses, [400], res.text);
      assert.ok(res.closed);
    });

    test('a send pipelined with another request in one write is never stored without its answer', async () => {
      const s = await sender();
      const send = s.send([['Content-Length', String(message.length)]]);
      const pairs: [string, string, number[]][] = [
        ['a send, then /healthz', send + httpRequest('GET', '/healthz', [['Host', 'relaybox.test']]), [201, 200]],
        ['two sends', send + send, [201, 201]],
      ];
      for (const [what, pipelined, inOrder] of pairs)
        for (let round = 0; round < 3; round++) {
          const before = await s.stored();
          const res = await rawExchange(app.base, pipelined, 2_000);
          const answeredSends = res.statuses.filter((status) => status === 201).length;
          assert.deepEqual(
            res.statuses,
            inOrder.slice(0, res.statuses.length),
            `${what}, answers in order: ${res.text}`,
          );
          assert.equal(
            (await s.stored()) - before,
            answeredSends,
            `${what}: stored sends match answered ones (answers: ${res.statuses.join(',') || 'none'})`,
          );
        }
    });

    test('requests pipelined in one write whose answers are ready before the next head is read are all answered in order', async () => {
      const health = httpRequest('GET', '/healthz', [['Host', 'relaybox.test']]);
      const res = await rawExchange(app.base, health + health + health, 1_000);
      assert.deepEqual(res.statuses, [200, 200, 200], res.text);
      assert.equal(res.closed, false);
    });

    test('two different Content-Length values, in either order, are 400 and closed; nothing is stored', async () => {
      const s = await sender();
      for (const lengths of [
        [String(message.length), '5'],
        ['5', String(message.length)],
      ]) {
        const res = await rawExchange(app.base, s.send(lengths.map((l): [string, string] => ['Content-Length', l])));
        assert.deepEqual(res.statuses, [400], res.text);
        assert.match(res.text, /"error":"bad_request"/);
        assert.match(res.text, /more than one Content-Length/);
        assert.ok(res.closed, 'connection closed');
      }
      assert.equal(await s.stored(), 0);
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
      const res = await rawExchange(
        app.base,
        httpRequest('GET', '/healthz', [
          ['Host', 'relaybox.test'],
          ['X-Padding', 'a'.repeat(app.config.maxHeaderBytes)],
        ]),
      );
      assert.deepEqual(res.statuses, [431], res.text);
      assert.ok(res.closed);
      const fits = await rawExchange(
        app.base,
        httpRequest('GET', '/healthz', [
          ['Host', 'relaybox.test'],
          ['X-Padding', 'a'.repeat(app.config.maxHeaderBytes - 100)],
        ]),
        500,
      );
      assert.deepEqual(fits.statuses, [200]);
    });

    test('on 8 keep-alive connections at once, refused heads mixed with ordinary requests, every request is answered', async () => {
      const s = await sender();
      const auth: [string, string] = ['Authorization', `Bearer ${s.key}`];
      const host: [string, string] = ['Host', 'relaybox.test'];
      const json: [string, string] = ['Content-Type', 'application/json'];
      const length = (body: string): [string, string] => ['Content-Length', String(Buffer.byteLength(body))];
      const shapes: [string, string][] = [
        ['a list', httpRequest('GET', '/api/v1/messages', [host, auth])],
        [
          'two Idempotency-Key',
          httpRequest(
            'POST',
            '/api/v1/messages',
            [host, auth, json, length(message), ['Idempotency-Key', 'a'], ['Idempotency-Key', 'b']],
            message,
          ),
        ],
        ['PATCH', httpRequest('PATCH', '/api/v1/webhooks/wh_none/toggle', [host, auth, json, length('{}')], '{}')],
        ['OPTIONS', httpRequest('OPTIONS', '/api/v1/messages', [host, auth])],
        ['two Authorization', httpRequest('GET', '/api/v1/messages', [host, auth, ['Authorization', 'Bearer nope']])],
        [
          'two X-Team-Id',
          httpRequest('GET', '/api/v1/contacts', [host, auth, ['X-Team-Id', 'team_a'], ['X-Team-Id', 'team_b']]),
        ],
        ['two Host', httpRequest('GET', '/healthz', [host, ['Host', 'elsewhere.test']])],
        [
          'two Content-Length',
          httpRequest('POST', '/api/v1/messages', [host, auth, json, length(message), length(message)], message),
        ],
        [
          'header fields too large',
          httpRequest('GET', '/healthz', [host, ['X-Padding', 'a'.repeat(app.config.maxHeaderBytes)]]),
        ],
        ['/healthz', httpRequest('GET', '/healthz', [host])],
      ];
      const connections = 8;
      const rounds = 6;
      const unanswered: string[] = [];
      const statuses = new Map<string, Set<number>>();
      await Promise.all(
        Array.from({ length: connections }, async (_, c) => {
          let conn = await RawConnection.open(app.base);
          try {
            for (let i = 0; i < rounds * shapes.length; i++) {
              // Each connection walks the shapes from its own offset, so every pairing of shapes meets on the wire.
              const [name, data] = shapes[(i + c) % shapes.length]!;
              if (conn.ended) conn = await RawConnection.open(app.base);
              const answer = await conn.exchange(data);
              if (!answer) {
                unanswered.push(`${name} (connection ${c}, request ${i})`);
                continue;
              }
              statuses.set(name, (statuses.get(name) ?? new Set()).add(answer.status));
              if (answer.closes) {
                conn.close();
                conn = await RawConnection.open(app.base);
              }
            }
          } finally {
            conn.close();
          }
        }),
      );
      console.log(
        `# ${connections * rounds * shapes.length} requests on ${connections} connections: ${[...statuses].map(([name, seen]) => `${name} ${[...seen].join('/')}`).join(', ')}`,
      );
      assert.deepEqual(unanswered, [], `${unanswered.length} requests had their connection closed without an answer`);
      for (const [name, seen] of statuses)
        assert.ok(
          [...seen].every((status) => status < 500),
          `${name}: ${[...seen].join(', ')}`,
        );
      assert.deepEqual([...statuses.get('two Host')!], [400]);
      assert.deepEqual([...statuses.get('two Content-Length')!], [400]);
      assert.deepEqual([...statuses.get('header fields too large')!], [431]);
    });

    test('what uWebSockets.js drops without an answer (docs/operations.md tells a proxy in front to normalize these)', async () => {
      const unknownMethod = await rawExchange(
        app.base,
        httpRequest('FROB', '/healthz', [['Host', 'relaybox.test']]),
        1_000,
      );
      assert.deepEqual(unknownMethod.statuses, []);
      assert.ok(unknownMethod.closed);
      const http10 = await rawExchange(app.base, 'GET /healthz HTTP/1.0\r\nHost: relaybox.test\r\n\r\n', 600);
      assert.deepEqual(http10.statuses, []);
      const noHost = await rawExchange(app.base, 'GET /healthz HTTP/1.1\r\n\r\n', 600);
      assert.deepEqual(noHost.statuses, []);
      const manyLines = await rawExchange(
        app.base,
        httpRequest('GET', '/healthz', [
          ['Host', 'relaybox.test'],
          ...Array.from({ length: 48 }, (_, i): [string, string] => [`X-Line-${i}`, 'v']),
        ]),
        600,
      );
      assert.deepEqual(manyLines.statuses, []);
    });
  });
});
