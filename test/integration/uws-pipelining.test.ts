import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import uWS, { type us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import { httpRequest, rawExchange } from '../support/raw-http.ts';

/**
 * What uWebSockets.js itself does with pipelined and conflicting requests,
 * on a bare app with none of the service's code: the limits the frontend
 * (src/http/server.ts) is built around, and that docs/operations.md tells a
 * proxy in front to absorb. Its HttpContext closes a connection when it
 * parses a request head while the previous answer on that connection is
 * still pending ("denying async pipelining"; only answers given before the
 * next head is parsed are pipelined), and its parser drops a head with
 * Content-Length and Transfer-Encoding before any handler sees it. If an
 * upgrade changes either, these tests fail: the frontend can then answer
 * every pipelined request, and this file and the docs say what changed.
 */
describe('uWebSockets.js on its own: pipelining and conflicting framing', () => {
  let listen: us_listen_socket | undefined;
  let base = '';
  /** What the handlers saw, in order: `request <path>`, `aborted <path>`. */
  const seen: string[] = [];

  before(async () => {
    const app = uWS.App();
    app.any('/*', (res, req) => {
      const path = req.getUrl();
      seen.push(`request ${path}`);
      let aborted = false;
      res.onAborted(() => {
        aborted = true;
        seen.push(`aborted ${path}`);
      });
      const answer = () => !aborted && res.cork(() => res.end(path));
      res.onData((_chunk, isLast) => {
        if (!isLast) return;
        if (path.startsWith('/later')) setTimeout(answer, 20);
        else answer();
      });
    });
    const port = await new Promise<number>((resolve, reject) =>
      app.listen('127.0.0.1', 0, (socket) => {
        if (!socket) return reject(new Error('could not listen'));
        listen = socket;
        resolve(uWS.us_socket_local_port(socket));
      }),
    );
    base = `http://127.0.0.1:${port}`;
  });
  after(() => listen && uWS.us_listen_socket_close(listen));

  const host: [string, string] = ['Host', 'uws.test'];
  const get = (path: string) => httpRequest('GET', path, [host]);
  const post = (path: string, body: string, extra: [string, string][] = []) =>
    httpRequest('POST', path, [host, ['Content-Length', String(body.length)], ...extra], body);

  test('requests answered before the next head is parsed are all answered, in order, in one write', async () => {
    seen.length = 0;
    const res = await rawExchange(base, post('/now-1', 'a') + get('/now-2') + post('/now-3', 'b'), 500);
    assert.deepEqual(res.statuses, [200, 200, 200], res.text);
    assert.equal(res.closed, false);
    assert.deepEqual(seen, ['request /now-1', 'request /now-2', 'request /now-3']);
  });

  test('a request pipelined behind a pending answer closes the connection unanswered, and its handler never runs', async () => {
    for (const second of [get('/now-2'), post('/now-2', 'b')]) {
      seen.length = 0;
      const res = await rawExchange(base, post('/later-1', 'a') + second, 500);
      assert.deepEqual(res.statuses, [], res.text);
      assert.equal(res.closed, true);
      assert.deepEqual(seen, ['request /later-1', 'aborted /later-1']);
    }
  });

  test('the same requests in separate writes, each after the answer before it, are answered', async () => {
    seen.length = 0;
    const res = await rawExchange(base, [post('/later-1', 'a'), post('/later-2', 'b')], 500, 100);
    assert.deepEqual(res.statuses, [200, 200], res.text);
  });

  test('Content-Length with Transfer-Encoding, in either order: closed with no byte written, before any handler runs', async () => {
    for (const extra of [
      [['Transfer-Encoding', 'chunked']],
      [
        ['Transfer-Encoding', 'chunked'],
        ['Content-Length', '5'],
      ],
    ] as [string, string][][]) {
      seen.length = 0;
      const head =
        extra.length === 1
          ? post('/now-1', '0\r\n\r\n', extra)
          : httpRequest('POST', '/now-1', [host, ...extra], '0\r\n\r\n');
      const res = await rawExchange(base, head, 500);
      assert.equal(res.text, '');
      assert.equal(res.closed, true);
      assert.deepEqual(seen, []);
    }
  });

  test('an answer ended at once with Connection: close does not stop the parse: a request after it in the same read still runs', async () => {
    seen.length = 0;
    const app = uWS.App();
    app.any('/*', (res, req) => {
      seen.push(`request ${req.getUrl()}`);
      res.onAborted(() => undefined);
      res.end('refused', true);
    });
    const socket = await new Promise<us_listen_socket>((resolve) => app.listen('127.0.0.1', 0, (s) => resolve(s)));
    try {
      const res = await rawExchange(
        `http://127.0.0.1:${uWS.us_socket_local_port(socket)}`,
        get('/refused') + get('/smuggled'),
        500,
      );
      assert.deepEqual(seen, ['request /refused', 'request /smuggled']);
      assert.deepEqual(res.statuses, [200, 200], res.text);
    } finally {
      uWS.us_listen_socket_close(socket);
    }
  });
});
