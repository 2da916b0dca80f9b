/**
 * The relay agent as a Mac gets it: the server builds the npm package on
 * first request and serves it under /downloads (tarball, SHA-256, index);
 * `npm install URL` into an empty folder installs it with only what the
 * registry and the tarball hold, and the installed command answers --help,
 * registers against the server in simulator mode and passes `doctor --json`.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { request, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

const run = promisify(execFile);
const registry = process.env.npm_config_registry || 'https://registry.npmjs.org/';

/** Whether the npm registry answers: the install needs the agent's dependencies from it. */
async function registryAnswers(): Promise<boolean> {
  try {
    const res = await fetch(new URL('-/ping', registry), { signal: AbortSignal.timeout(5_000) });
    return res.ok;
  } catch {
    return false;
  }
}

describe('the relay agent package served by the server', () => {
  let t: TestApp;
  let dir: string;
  before(async () => {
    t = await startTestApp('embedded');
    dir = await mkdtemp(join(tmpdir(), 'relaybox-agent-install-'));
  });
  after(async () => {
    await t.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('the index names the versioned tarball; the tarball and its SHA-256 are immutable, and match', async () => {
    const manifest = JSON.parse(await readFile('packages/relay-agent/package.json', 'utf8')) as { version: string };
    const fileName = `relaybox-relay-${manifest.version}.tgz`;
    const index = await t.request('GET', '/downloads/relaybox-relay.json');
    assert.equal(index.status, 200, index.text);
    assert.equal(index.headers.get('cache-control'), 'no-cache');
    assert.deepEqual(Object.keys(index.body).sort(), ['name', 'sha256', 'size', 'url', 'version']);
    assert.equal(index.body.version, manifest.version);
    assert.equal(index.body.url, `${t.base}/downloads/${fileName}`);

    // Asked with compression: a gzip file goes out as it is.
    const tarball = await fetch(index.body.url, { headers: { 'accept-encoding': 'br, gzip' } });
    assert.equal(tarball.status, 200);
    assert.equal(tarball.headers.get('content-type'), 'application/gzip');
    assert.equal(tarball.headers.get('content-encoding'), null);
    assert.equal(tarball.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    const bytes = Buffer.from(await tarball.arrayBuffer());
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    assert.equal(bytes.length, index.body.size);
    assert.equal(index.body.sha256, sha256);
    assert.equal(tarball.headers.get('etag'), `"${sha256}"`);

    const checksum = await t.request('GET', `/downloads/${fileName}.sha256`);
    assert.equal(checksum.status, 200);
    assert.equal(checksum.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(checksum.text, `${sha256}  ${fileName}\n`);

    const again = await t.request('GET', `/downloads/${fileName}`, { headers: { 'if-none-match': `"${sha256}"` } });
    assert.equal(again.status, 304);

    // Kept under the data directory, named by its sources: a restart serves the same bytes without building.
    const kept = (await readdir(join(t.config.dataDir, 'build'))).filter((f) => f.endsWith('.tgz'));
    assert.equal(kept.length, 1);
    assert.ok(kept[0]!.startsWith(`relaybox-relay-${manifest.version}-`), kept[0]);
  });

  test('an unknown version or any other name is a 404 problem, never a file of the server', async () => {
    for (const path of [
      '/downloads/relaybox-relay-0.0.0-unknown.tgz',
      '/downloads/relaybox-relay-0.0.0-unknown.tgz.sha256',
      '/downloads/package.json',
      '/downloads/..%2F..%2Fpackage.json',
      '/downloads/..%2Fbuild%2Frelaybox-relay.tgz',
      '/downloads/%2Fetc%2Fpasswd',
    ]) {
      const res = await t.request('GET', path);
      assert.equal(res.status, 404, path);
      assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/, path);
      assert.equal(res.body.error, 'not_found', path);
    }
  });

  test(
    'npm install of the URL into an empty folder: --help, connect --simulate registers, doctor --json passes',
    { timeout: 120_000 },
    async (c) => {
      if (!(await registryAnswers())) {
        if (process.env.CI === 'true') throw new Error(`the npm registry ${registry} does not answer`);
        c.skip(`the npm registry ${registry} does not answer: the agent's dependencies come from it`);
        return;
      }
      const index = await t.request('GET', '/downloads/relaybox-relay.json');
      const project = join(dir, 'mac');
      await mkdir(project);
      // Asynchronous: the server answering the download runs in this process. Dependencies already in npm's cache are not fetched again.
      await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', index.body.url], {
        cwd: project,
        timeout: 90_000,
      });
      const bin = join(project, 'node_modules/.bin/relaybox-relay');
      const installed = JSON.parse(
        await readFile(join(project, 'node_modules/relaybox-relay/package.json'), 'utf8'),
      ) as { version: string; dependencies: Record<string, string> };
      assert.equal(installed.version, index.body.version);
      assert.ok(!('tsx' in installed.dependencies), 'the package runs without tsx');

      const help = await run(bin, ['--help'], { timeout: 30_000 });
      assert.match(help.stdout, /^Usage:\n {2}relaybox-relay /);

      // The packed agent registers with a dashboard token, its simulated chat.db in its state directory.
      const org = await signup(t, 'Install Org');
      const token = await t.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, {
        token: org.ownerToken,
        body: {},
      });
      assert.equal(token.status, 201, token.text);
      const stateDir = join(dir, 'state');
      const server = `${t.base.replace(/^http/, 'ws')}/api/v1/relays/connect`;
      const agent = spawn(
        bin,
        ['connect', '--simulate', '--server', server, '--state-dir', stateDir, '--name', 'packed'],
        {
          env: { ...process.env, RELAYBOX_TOKEN: token.body.token },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let output = '';
      agent.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      agent.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((done) => agent.once('exit', (code) => done(code)));
      try {
        // Online on the server, and its credential stored (the server counts it online before the agent writes it).
        await until(
          `the packed agent online (${output})`,
          async () => {
            const relays = await request(t.base, 'GET', '/api/v1/relays', { token: org.ownerToken });
            const online = relays.body.data?.some(
              (r: { name: string; status: string }) => r.name === 'packed' && r.status === 'online',
            );
            return (
              online &&
              (await stat(join(stateDir, 'relay.json')).then(
                () => true,
                () => false,
              ))
            );
          },
          30_000,
        );
      } finally {
        agent.kill('SIGTERM');
        await exited;
      }

      // The simulator commands find the same simulated chat.db through --state-dir.
      await run(bin, ['simulate-inbound', '--state-dir', stateDir, '--from', '+14155550123', '--body', 'hello'], {
        timeout: 30_000,
      });
      // Exit code 1 when a check fails: the report says which.
      const doctor = await run(bin, ['doctor', '--simulate', '--json', '--state-dir', stateDir], {
        timeout: 60_000,
      }).catch((err: { code: number; stdout: string }) => ({ stdout: err.stdout, exitCode: err.code }));
      const report = JSON.parse(doctor.stdout) as { ok: boolean; checks: Array<{ name: string; result: string }> };
      assert.deepEqual(
        report.checks.map((check) => [check.name, check.result]),
        [
          ['chat-db', 'ok'],
          ['automation', 'ok'],
          ['imessage-account', 'ok'],
          ['server', 'ok'],
          ['clock', 'ok'],
          ['disk', 'ok'],
        ],
        doctor.stdout,
      );
      assert.equal(report.ok, true);
      assert.equal('exitCode' in doctor ? doctor.exitCode : 0, 0);
    },
  );
});
