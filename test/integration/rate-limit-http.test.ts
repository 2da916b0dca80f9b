import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { sleep } from '../../src/runtime/actor-host.ts';
import { eachBackend, signup, startTestApp } from '../support/test-app.ts';

function runAdmin(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/admin/cli.ts', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c));
    child.stderr.on('data', (c: Buffer) => (output += c));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

const limits = { RATE_LIMIT_PER_MINUTE: '100', RATE_LIMIT_BURST: '20' };

eachBackend((backend) => {
  describe(`rate limit per organization (${backend})`, () => {
    test('20 pass at once, the 21st is 429 with Retry-After, then requests pass again; headers on every answer', async (t) => {
      const app = await startTestApp(backend, limits);
      t.after(() => app.stop());
      const org = await signup(app);
      const other = await signup(app, 'Unaffected');
      const burst = await Promise.all(Array.from({ length: 20 }, () => app.request('GET', '/api/v1/me', { token: org.ownerToken })));
      assert.deepEqual(burst.map((r) => r.status), Array(20).fill(200));
      for (const res of burst) {
        assert.equal(res.headers.get('ratelimit-limit'), '20');
        assert.ok(res.headers.get('ratelimit-remaining') !== null && res.headers.get('ratelimit-reset') !== null);
      }
      const refused = await app.request('GET', '/api/v1/me', { token: org.ownerToken });
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error, 'rate_limited');
      assert.equal(refused.body.statusCode, 429);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${retryAfter}`);
      assert.equal(refused.headers.get('ratelimit-remaining'), '0');
      assert.equal((await app.request('GET', '/api/v1/me', { token: other.ownerToken })).status, 200, 'another organization has its own budget');
      await sleep(retryAfter * 1000);
      assert.equal((await app.request('GET', '/api/v1/me', { token: org.ownerToken })).status, 200, 'passes again after Retry-After');
    });

    test('the organization\'s own limit overrides the default', async (t) => {
      const app = await startTestApp(backend, limits);
      t.after(() => app.stop());
      const org = await signup(app);
      if (backend === 'redis+mongo') {
        // The operator's command, as a process of its own against the same database.
        const admin = await runAdmin(['rate-limit', '--org', org.orgId, '--per-minute', '60', '--burst', '3'], { MONGODB_URL: app.config.mongoUrl! });
        assert.equal(admin.code, 0, admin.output);
        assert.match(admin.output, /60 requests a minute, burst 3/);
        assert.equal((await runAdmin(['rate-limit', '--org', org.orgId, '--per-minute', 'lots'], { MONGODB_URL: app.config.mongoUrl! })).code, 2);
        assert.equal((await runAdmin(['rate-limit', '--org', 'org_missing', '--per-minute', '1', '--burst', '1'], { MONGODB_URL: app.config.mongoUrl! })).code, 1);
      } else {
        // The embedded store belongs to the running process: the same update the command makes, made in it.
        await app.app.store.collection('organizations').updateOne({ tenantId: org.orgId }, { id: org.orgId }, { $set: { rateLimit: { perMinute: 60, burst: 3 } } });
      }
      await sleep(app.config.identity.credentialCacheMs + 50);
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await app.request('GET', '/api/v1/me', { token: org.ownerToken })).status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
    });
  });
});

describe('two frontends share one budget and see one revocation', () => {
  test('requests through two frontends on one Redis draw on one organization budget', async (t) => {
    if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
      if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
      return t.skip('REDIS_URL/MONGODB_URL not set');
    }
    const one = await startTestApp('redis+mongo', limits);
    t.after(() => one.stop());
    // The second frontend shares the first one's Redis prefix and database: another process of the same deployment.
    const twoEnv = { ...limits, RUNTIME_KEY_PREFIX: one.config.runtime.keyPrefix, MONGODB_URL: one.config.mongoUrl!, DATA_DIR: one.config.dataDir };
    const two = await startTestApp('redis+mongo', twoEnv);
    t.after(() => two.http.close().then(() => two.app.close()));
    const org = await signup(one);
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 2 ? one : two).request('GET', '/api/v1/me', { token: org.ownerToken })));
    const passed = results.filter((r) => r.status === 200).length;
    assert.equal(passed, 20, 'one burst of 20 across both frontends');
    assert.equal(results.filter((r) => r.status === 429).length, 4);
  });

  test('an API key revoked through one frontend fails on the other within one second', async (t) => {
    if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
      if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
      return t.skip('REDIS_URL/MONGODB_URL not set');
    }
    const one = await startTestApp('redis+mongo');
    t.after(() => one.stop());
    const two = await startTestApp('redis+mongo', { RUNTIME_KEY_PREFIX: one.config.runtime.keyPrefix, MONGODB_URL: one.config.mongoUrl!, DATA_DIR: one.config.dataDir });
    t.after(() => two.http.close().then(() => two.app.close()));
    const org = await signup(one);
    const created = await one.request('POST', '/api/v1/api-keys', { token: org.ownerToken, body: { name: 'to revoke' } });
    assert.equal((await two.request('GET', '/api/v1/me', { token: created.body.key })).status, 200, 'the other frontend has it cached now');
    assert.equal((await one.request('DELETE', `/api/v1/api-keys/${created.body.id}`, { token: org.ownerToken })).status, 204);
    const revokedAt = Date.now();
    assert.equal((await one.request('GET', '/api/v1/me', { token: created.body.key })).status, 401, 'at once on the frontend that revoked it');
    let status = 200;
    while (status === 200 && Date.now() - revokedAt < 3_000) {
      status = (await two.request('GET', '/api/v1/me', { token: created.body.key })).status;
      if (status === 200) await sleep(50);
    }
    assert.equal(status, 401);
    assert.ok(Date.now() - revokedAt <= 1_100, `refused after ${Date.now() - revokedAt} ms`);
  });
});
