import assert from 'node:assert/strict';
import { readdir, readFile, rm, mkdtemp } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { downloadAttachments, maxAttachmentBytes } from '../../packages/relay-agent/src/attachment-download.ts';

async function serve(t: TestContext): Promise<{ base: string; dir: string }> {
  const server: Server = createServer((req, res) => {
    if (req.url === '/photo%20one.png') return res.end('PNGDATA');
    if (req.url === '/declared-huge') {
      res.writeHead(200, { 'content-length': String(2_000) });
      return res.end('x'.repeat(2_000));
    }
    if (req.url === '/streamed-huge') {
      res.writeHead(200); // chunked: no Content-Length to check up front
      res.write('y'.repeat(600));
      res.write('y'.repeat(600));
      return res.end();
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-attach-'));
  t.after(async () => {
    server.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, dir };
}

test('attachments are downloaded to local files and cleanup deletes them', async (t) => {
  const { base, dir } = await serve(t);
  const result = await downloadAttachments([`${base}/photo%20one.png`], { dir });
  assert.ok(result.ok);
  assert.equal(result.paths.length, 1);
  assert.match(result.paths[0]!, /1-photo_one\.png$/);
  assert.equal(await readFile(result.paths[0]!, 'utf8'), 'PNGDATA');
  await result.cleanup();
  assert.deepEqual(await readdir(dir), []);
});

test('too large by Content-Length or while streaming, bad scheme, or HTTP error: the send fails and nothing is left behind', async (t) => {
  const { base, dir } = await serve(t);
  const cases: Array<[string[], RegExp]> = [
    [[`${base}/declared-huge`], /larger than 1000 bytes/],
    [[`${base}/photo%20one.png`, `${base}/streamed-huge`], /attachment 2: larger than 1000 bytes/],
    [['file:///etc/passwd'], /only http and https/],
    [['ftp://example.com/a'], /only http and https/],
    [['not a url'], /not a URL/],
    [[`${base}/missing`], /HTTP 404/],
  ];
  for (const [urls, message] of cases) {
    const result = await downloadAttachments(urls, { dir, maxBytes: 1_000 });
    assert.equal(result.ok, false, urls.join(' '));
    if (!result.ok) assert.match(result.error, message);
  }
  assert.deepEqual(await readdir(dir), [], 'no partial files remain');
});

test('the default attachment size cap is 100 MiB', () => {
  assert.equal(maxAttachmentBytes, 100 * 1024 * 1024);
});
