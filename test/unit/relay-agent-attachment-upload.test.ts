/**
 * The agent's attachment uploader against a local HTTP server: the relay
 * credential and the file's length go with each PUT, a 5xx is tried again,
 * 413 ends it, a missing file is reported as unavailable, and a new
 * uploader on the same journal (a restart) uploads nothing finished again.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createAgentLogger } from '../../packages/relay-agent/src/agent-logger.ts';
import { AttachmentUploader } from '../../packages/relay-agent/src/attachment-upload.ts';
import { until } from '../support/until.ts';

interface Seen {
  guid: string;
  authorization: string | undefined;
  length: string | undefined;
  unavailable: string | undefined;
  bytes: number;
}

test('uploads once with the credential, retries a 5xx, stops at 413, and a restart uploads nothing twice', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-uploader-'));
  const seen: Seen[] = [];
  let failNext = 1;
  const server = createServer((req: IncomingMessage, res) => {
    let bytes = 0;
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      const guid = decodeURIComponent(req.url!.split('/').pop()!);
      seen.push({
        guid,
        authorization: req.headers.authorization,
        length: req.headers['content-length'],
        unavailable: req.headers['x-relaybox-unavailable'] as string | undefined,
        bytes,
      });
      if (guid === 'G-RETRY' && failNext-- > 0) return void res.writeHead(503).end('{"detail":"busy"}');
      if (guid === 'G-HUGE') return void res.writeHead(413).end('{"detail":"too large"}');
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ready"}');
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  t.after(async () => {
    server.close();
    await rm(dir, { recursive: true, force: true });
  });
  const port = (server.address() as AddressInfo).port;
  const logger = createAgentLogger('silent', 'json');
  const make = () =>
    new AttachmentUploader({
      journalPath: join(dir, 'uploads.json'),
      serverUrl: `ws://127.0.0.1:${port}/api/v1/relays/connect`,
      credential: () => ({ relayId: 'relay_1', secret: 's3cret' }),
      logger,
      retryBaseMs: 10,
      retryCapMs: 20,
    });
  await writeFile(join(dir, 'a.png'), Buffer.alloc(300 * 1024, 7));
  await writeFile(join(dir, 'b.txt'), 'retry me');
  await writeFile(join(dir, 'huge.bin'), 'pretend this is large');

  const first = make();
  await first.load();
  await first.add([
    { guid: 'G-A', path: join(dir, 'a.png') },
    { guid: 'G-RETRY', path: join(dir, 'b.txt') },
    { guid: 'G-HUGE', path: join(dir, 'huge.bin') },
    { guid: 'G-GONE', path: join(dir, 'not-there.jpg') },
  ]);
  await until('every upload finished', async () => first.pending === 0, 10_000);
  await first.stop();

  const a = seen.find((s) => s.guid === 'G-A')!;
  assert.equal(a.authorization, 'Bearer relay_1:s3cret');
  assert.equal(a.length, String(300 * 1024));
  assert.equal(a.bytes, 300 * 1024);
  assert.equal(seen.filter((s) => s.guid === 'G-RETRY').length, 2, 'a 503 is tried again');
  assert.equal(seen.filter((s) => s.guid === 'G-HUGE').length, 1, '413 ends it');
  const gone = seen.find((s) => s.guid === 'G-GONE')!;
  assert.match(gone.unavailable ?? '', /not on the Mac/);
  assert.equal(gone.bytes, 0);

  // A restart: the journal says what is done; the same rows acked again add nothing.
  const count = seen.length;
  const second = make();
  await second.load();
  second.wake();
  await second.add([{ guid: 'G-A', path: join(dir, 'a.png') }]);
  await new Promise((r) => setTimeout(r, 200));
  await second.stop();
  assert.equal(seen.length, count, 'nothing uploaded twice');
});
