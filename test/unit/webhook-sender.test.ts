import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { WebhookSender } from '../../src/webhooks/webhook-sender.ts';

test('an attempt answers status, error and Retry-After as the delivery log records them; a redirect is an answer', async () => {
  const hung: ServerResponse[] = [];
  const seen: Array<Record<string, string | string[] | undefined>> = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on('end', () => {
      if (req.url === '/hang') return void hung.push(res);
      if (req.url === '/redirect') return void res.writeHead(302, { location: '/ok' }).end();
      if (req.url === '/busy') return void res.writeHead(429, { 'retry-after': '7' }).end();
      if (req.url === '/big') return void res.writeHead(200).end(Buffer.alloc(1024 * 1024));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 300 });
  try {
    const ok = await sender.attempt(`${base}/ok?x=1`, { 'webhook-id': 'evt_1' }, '{"a":1}');
    assert.deepEqual([ok.ok, ok.responseStatus, ok.error], [true, 204, null]);
    assert.equal(seen[0]!['user-agent'], 'Relaybox-Webhooks/1');
    assert.equal(seen[0]!['content-length'], '7');
    assert.equal(seen[0]!['webhook-id'], 'evt_1');

    const redirect = await sender.attempt(`${base}/redirect`, {}, '{}');
    assert.deepEqual([redirect.ok, redirect.responseStatus, redirect.error], [false, 302, 'HTTP 302']);
    assert.equal(seen.length, 2, 'the redirect is not followed');

    const busy = await sender.attempt(`${base}/busy`, {}, '{}');
    assert.deepEqual([busy.responseStatus, busy.retryAfterMs], [429, 7_000]);

    const big = await sender.attempt(`${base}/big`, {}, '{}');
    assert.deepEqual([big.ok, big.responseStatus], [true, 200], 'a long answer is cut, its status kept');

    const hang = await sender.attempt(`${base}/hang`, {}, '{}');
    assert.deepEqual([hang.ok, hang.responseStatus, hang.error], [false, null, 'no answer within 300 ms']);

    const refused = await sender.attempt('http://127.0.0.1:1/', {}, '{}');
    assert.equal(refused.responseStatus, null);
    assert.match(refused.error!, /^ECONNREFUSED: /);

    assert.equal((await sender.attempt('ftp://example.com/', {}, '{}')).error, 'url must be an http or https URL');
  } finally {
    sender.close();
    for (const res of hung) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
