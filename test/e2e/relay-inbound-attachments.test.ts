/**
 * Received attachments through the real relay agent in simulator mode over
 * the WebSocket: a 20 MB file attached to a received message is recorded
 * `pending` with the message, uploaded once by the agent over HTTP, and
 * downloads byte-identical through its signed link, with the agent's and the
 * server's memory far below the file's size during the transfer; a tampered
 * or expired link is 403, another organization cannot list it (404), a file
 * over the limit fails with its reason, an upload the server could not store
 * is tried again, and a restarted agent uploads nothing twice. The Mac's path
 * is never in an answer.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { simulateInbound } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { loadAccessTokens } from '../../src/identity/jwt.ts';
import { AttachmentLinks } from '../../src/messages/attachment-links.ts';
import { simulatorArgs, startAgent } from '../support/fake-relay-server.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

const mb = 1024 * 1024;
const friend = '+14155550177';

/** Peak and current resident memory of a process (Linux /proc), in bytes. */
async function memoryOf(pid: number): Promise<{ peak: number; now: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { peak: kb('VmHWM'), now: kb('VmRSS') };
}

/** A file of `size` random bytes, made by another process (this one's memory stays as it was); its SHA-256. */
async function randomFile(path: string, size: number): Promise<string> {
  const out = await open(path, 'w');
  const child = spawn('head', ['-c', String(size), '/dev/urandom'], { stdio: ['ignore', out.fd, 'inherit'] });
  const [code] = (await once(child, 'exit')) as [number];
  await out.close();
  assert.equal(code, 0);
  return sha256Of(path);
}

/** Downloads `url` into `path` with curl; answers the answer's head. */
async function curl(url: string, path: string): Promise<string> {
  const child = spawn('curl', ['-sS', '--max-time', '60', '-D', '-', '-o', path, url], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let head = '';
  child.stdout.on('data', (c: Buffer) => (head += c.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  assert.equal(code, 0, `curl exited with ${code}`);
  return head;
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** The collector, called on purpose: what is measured is memory held, not garbage not yet collected. */
setFlagsFromString('--expose_gc');
const collect = runInNewContext('gc') as () => void;

/**
 * Samples this process's memory (the server runs in it) while `run` runs,
 * collecting garbage before each sample: the most its buffers held above
 * the start (`arrayBuffers`: what uWS chunks, file reads and writes take),
 * and the highest resident size above the start.
 */
async function peakGrowth<T>(run: () => Promise<T>): Promise<{ value: T; buffers: number; rss: number }> {
  collect();
  const start = process.memoryUsage();
  const peak = { buffers: 0, rss: 0 };
  const sample = () => {
    collect();
    const now = process.memoryUsage();
    peak.buffers = Math.max(peak.buffers, now.arrayBuffers - start.arrayBuffers);
    peak.rss = Math.max(peak.rss, now.rss - start.rss);
  };
  const timer = setInterval(sample, 50);
  try {
    const value = await run();
    sample();
    return { value, ...peak };
  } finally {
    clearInterval(timer);
  }
}

/** The command line of an agent in simulator mode registering with the organization's new relay token. */
async function agentArgs(app: TestApp, org: Org, dir: string) {
  const token = await app.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken });
  assert.equal(token.status, 201, token.text);
  return simulatorArgs(`${app.base.replace('http', 'ws')}/api/v1/relays/connect`, dir, token.body.token);
}

eachBackend((backend) => {
  describe(`received attachments (${backend})`, { timeout: 300_000 }, () => {
    test('a 20 MB attachment is uploaded once and downloads byte-identical through its signed link', async (t) => {
      const app = await startTestApp(backend, { ATTACHMENT_MAX_BYTES: String(25 * mb) });
      const dir = await mkdtemp(join(tmpdir(), 'relaybox-attachments-'));
      const org = await signup(app);
      const call = (method: string, path: string, token = org.ownerToken) => app.request(method, path, { token });
      const { args, chatDb } = await agentArgs(app, org, dir);
      let agent = startAgent(args);
      t.after(async () => {
        agent.child.kill('SIGKILL');
        await Promise.all([app.stop(), rm(dir, { recursive: true, force: true })]);
      });
      await until('the agent registered', async () => agent.output().includes('credential-stored'), 30_000);
      const received = async (body: string) =>
        ((await call('GET', '/api/v1/messages?direction=received')).body.data as any[]).find((m) => m.body === body);
      const attachmentsOf = async (id: string) => (await call('GET', `/api/v1/messages/${id}/attachments`)).body.data;

      // 1. A 20 MB file arrives: the message is stored with the file's name only, then the bytes follow.
      const bigPath = join(dir, 'Library', 'holiday video.mov');
      await mkdir(join(dir, 'Library'));
      const bigHash = await randomFile(bigPath, 20 * mb);
      const agentBefore = await memoryOf(agent.child.pid!);
      const { value: message, ...serverUp } = await peakGrowth(async () => {
        await simulateInbound(chatDb, { from: friend, body: 'the video', attachments: [bigPath] });
        const m = await until('the message received', () => received('the video'), 30_000);
        await until('the attachment ready', async () => (await attachmentsOf(m.id))[0]?.status === 'ready', 60_000);
        return m;
      });
      const agentAfter = await memoryOf(agent.child.pid!);
      assert.deepEqual(message.attachments, ['holiday video.mov']);
      const shown = JSON.stringify(await call('GET', `/api/v1/messages/${message.id}`));
      assert.ok(!shown.includes(dir), 'the Mac path is never shown');
      const [entry] = await attachmentsOf(message.id);
      assert.equal(entry.filename, 'holiday video.mov');
      assert.equal(entry.mimeType, 'video/quicktime');
      assert.equal(entry.size, 20 * mb);
      assert.ok(!JSON.stringify(entry).includes(dir));
      assert.ok(Date.parse(entry.expiresAt) > Date.now() + 50 * 60_000, 'valid about an hour');

      // 2. The download streams the same bytes, with its length, in bounded memory.
      // Downloaded by curl, another process: what this process holds meanwhile is the server's.
      const downloaded = join(dir, 'downloaded.mov');
      const { value: headers, ...serverDown } = await peakGrowth(() => curl(entry.url, downloaded));
      assert.match(headers, /^HTTP\/1\.1 200/);
      assert.equal(await sha256Of(downloaded), bigHash, 'byte-identical');
      assert.match(headers, new RegExp(`^content-length: ${20 * mb}\r?$`, 'mi'));
      assert.match(headers, /^content-type: video\/quicktime\r?$/im);
      assert.match(headers, /^content-disposition: attachment; filename="holiday video.mov"/im);
      const agentGrowth = agentAfter.peak - agentBefore.peak;
      const inMb = (bytes: number) => (bytes / mb).toFixed(1);
      console.log(
        `# ${backend}, 20 MB: server resident growth ${inMb(serverUp.rss)} MB (upload) and ${inMb(serverDown.rss)} MB (download), buffers at most ${inMb(serverUp.buffers)} and ${inMb(serverDown.buffers)} MB (not yet swept counted); agent peak resident growth ${inMb(agentGrowth)} MB`,
      );
      // Well below the file's 20 MB: a few chunks at a time, whatever the size.
      assert.ok(agentGrowth < 5 * mb, `the agent's peak memory grew ${agentGrowth} bytes for a 20 MB upload`);
      assert.ok(serverUp.rss < 8 * mb, `the server's memory grew ${serverUp.rss} bytes during the upload`);
      assert.ok(serverDown.rss < 8 * mb, `the server's memory grew ${serverDown.rss} bytes during the download`);

      // 3. A tampered link and an expired one (genuinely signed, an hour old) are refused.
      const tampered = entry.url.replace(/.$/, (c: string) => (c === 'A' ? 'B' : 'A'));
      assert.equal((await fetch(tampered)).status, 403);
      const tokens = await loadAccessTokens({
        issuer: app.config.identity.jwtIssuer,
        audience: app.config.identity.jwtAudience,
        accessTokenTtlSeconds: app.config.identity.accessTokenTtlSeconds,
        privateKeyPem: app.config.identity.jwtPrivateKeyPem,
        publicKeyPem: app.config.identity.jwtPublicKeyPem,
        dataDir: app.config.dataDir,
      });
      const past = new AttachmentLinks(tokens.deriveSecret('attachment-links'), () => Date.now() - 2 * 3600_000);
      const genuine = new AttachmentLinks(tokens.deriveSecret('attachment-links'));
      assert.equal((await fetch(past.link(app.base, org.orgId, message.id, 0).url)).status, 403);
      assert.equal((await fetch(genuine.link(app.base, org.orgId, message.id, 0).url)).status, 200);

      // 4. Another organization's key cannot list it, nor reach it by its link's claims.
      const other = await signup(app, 'Other');
      assert.equal((await call('GET', `/api/v1/messages/${message.id}/attachments`, other.ownerToken)).status, 404);
      assert.equal((await fetch(genuine.link(app.base, other.orgId, message.id, 0).url)).status, 404);

      // 5. Over the limit: refused (413), the attachment failed with its reason, never tried again.
      const hugePath = join(dir, 'Library', 'huge.bin');
      await writeFile(hugePath, '');
      await truncate(hugePath, 26 * mb);
      await simulateInbound(chatDb, { from: friend, body: 'too big', attachments: [hugePath] });
      const huge = await until('the too-big message', () => received('too big'), 30_000);
      const [failed] = await until(
        'the too-big attachment failed',
        async () => ((await attachmentsOf(huge.id))[0]?.status === 'failed' ? attachmentsOf(huge.id) : undefined),
        30_000,
      );
      assert.match(failed.reason, /larger than 26214400 bytes/);
      assert.equal(failed.url, null);
      // Refused for good: 413, or 409 (failed) when the answer came after the connection was cut under the body.
      await until(
        'the agent done with it',
        async () => /"event":"attachment.refused".*"status":(413|409)/.test(agent.output()),
        30_000,
      );

      // 6. A restart: what was uploaded is not uploaded again.
      assert.equal(agent.output().match(/"event":"attachment.uploaded"/g)?.length, 1);
      agent.child.kill('SIGTERM');
      assert.equal(await agent.exited, 0, agent.output());
      agent = startAgent(args);
      await until('the restarted agent online', async () => agent.output().includes('"event":"online"'), 30_000);
      await simulateInbound(chatDb, { from: friend, body: 'after the restart' });
      await until('the message after the restart', () => received('after the restart'), 30_000);
      assert.doesNotMatch(agent.output(), /attachment\.upload/);
      const [still] = await attachmentsOf(message.id);
      assert.equal(still.status, 'ready');
      await curl(still.url, downloaded);
      assert.equal(await sha256Of(downloaded), bigHash);

      // 7. An upload the server cannot store (embedded: its directory cannot be made) is tried again until it can.
      if (backend === 'embedded') {
        const bucket = join(app.config.dataDir, 'attachments');
        await rm(bucket, { recursive: true, force: true });
        await writeFile(bucket, 'in the way');
        const smallPath = join(dir, 'Library', 'note.txt');
        await writeFile(smallPath, 'hello, attached');
        await simulateInbound(chatDb, { from: friend, body: 'a note', attachments: [smallPath] });
        await until('an upload retried', async () => agent.output().includes('attachment.upload-retry'), 30_000);
        await rm(bucket, { force: true });
        const note = await until('the note', () => received('a note'), 30_000);
        await until('the note ready', async () => (await attachmentsOf(note.id))[0]?.status === 'ready', 60_000);
        const text = await (await fetch((await attachmentsOf(note.id))[0].url)).text();
        assert.equal(text, 'hello, attached');
      }
    });
  });
});
