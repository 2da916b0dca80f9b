import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { runAdmin } from '../support/admin-cli.ts';
import { eachBackend, signup, startTestApp } from '../support/test-app.ts';

/** One request back every 2 s: the burst of 20 must be spent before one comes back, even on a loaded machine. */
const limits = { RATE_LIMIT_PER_MINUTE: '30', RATE_LIMIT_BURST: '20' };

eachBackend((backend) => {
  describe(`rate limit per organization (${backend})`, () => {
    test('20 pass at once, the 21st is 429 with Retry-After, then requests pass again; headers on every answer', async (t) => {
      const app = await startTestApp(backend, limits);
      t.after(() => app.stop());
      const org = await signup(app);
      const other = await signup(app, 'Unaffected');
      const burst = await Promise.all(
        Array.from({ length: 20 }, () => app.request('GET', '/api/v1/me', { token: org.ownerToken })),
      );
      assert.deepEqual(
        burst.map((r) => r.status),
        Array(20).fill(200),
      );
      for (const res of burst) {
        assert.equal(res.headers.get('ratelimit-limit'), '30');
        assert.equal(res.headers.get('ratelimit-policy'), '30;w=60;burst=20');
        assert.ok(res.headers.get('ratelimit-remaining') !== null && res.headers.get('ratelimit-reset') !== null);
      }
      const refused = await app.request('GET', '/api/v1/me', { token: org.ownerToken });
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error, 'rate_limited');
      assert.match(
        refused.body.message,
        /30 requests a minute \(burst 20\)/,
        'the 429 text states the policy the headers state',
      );
      assert.equal(refused.headers.get('ratelimit-limit'), '30');
      assert.equal(refused.headers.get('ratelimit-policy'), '30;w=60;burst=20');
      assert.equal(refused.body.statusCode, 429);
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${retryAfter}`);
      assert.equal(refused.headers.get('ratelimit-remaining'), '0');
      assert.equal(
        (await app.request('GET', '/api/v1/me', { token: other.ownerToken })).status,
        200,
        'another organization has its own budget',
      );
      await sleep(retryAfter * 1000);
      assert.equal(
        (await app.request('GET', '/api/v1/me', { token: org.ownerToken })).status,
        200,
        'passes again after Retry-After',
      );
    });

    test('the first request answers figures of one quota: Limit 30, Remaining 29, Reset one interval, the window in Policy', async (t) => {
      const app = await startTestApp(backend, limits);
      t.after(() => app.stop());
      const org = await signup(app);
      const first = await app.request('GET', '/api/v1/me', { token: org.ownerToken });
      assert.equal(first.status, 200);
      const figures = (res: typeof first) =>
        ['ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'].map((h) =>
          res.headers.get(h),
        );
      // One request of 30 a minute is held for 2 s (60 s / 30): 29 of the 30 are left, all of them again in 2 s.
      assert.deepEqual(figures(first), ['30;w=60;burst=20', '30', '29', '2']);
      const second = await app.request('GET', '/api/v1/me', { token: org.ownerToken });
      assert.equal(second.headers.get('ratelimit-remaining'), '28');
      assert.ok(['3', '4'].includes(second.headers.get('ratelimit-reset')!), figures(second).join(' '));
    });

    test("the organization's own limit overrides the default", async (t) => {
      const app = await startTestApp(backend, limits);
      t.after(() => app.stop());
      const org = await signup(app);
      if (backend === 'redis+mongo') {
        // The operator's command, as a process of its own against the same database.
        const admin = await runAdmin(['rate-limit', '--org', org.orgId, '--per-minute', '6', '--burst', '3'], {
          MONGODB_URL: app.config.mongoUrl!,
        });
        assert.equal(admin.code, 0, admin.output);
        assert.match(admin.output, /6 requests a minute, burst 3/);
        assert.equal(
          (
            await runAdmin(['rate-limit', '--org', org.orgId, '--per-minute', 'lots'], {
              MONGODB_URL: app.config.mongoUrl!,
            })
          ).code,
          2,
        );
        assert.equal(
          (
            await runAdmin(['rate-limit', '--org', 'org_missing', '--per-minute', '1', '--burst', '1'], {
              MONGODB_URL: app.config.mongoUrl!,
            })
          ).code,
          1,
        );
      } else {
        // The embedded store belongs to the running process: the same update the command makes, made in it.
        await app.app.store
          .collection('organizations')
          .updateOne({ tenantId: org.orgId }, { id: org.orgId }, { $set: { rateLimit: { perMinute: 6, burst: 3 } } });
      }
      await sleep(app.config.identity.credentialCacheMs + 50);
      const statuses = [];
      for (let i = 0; i < 4; i++)
        statuses.push((await app.request('GET', '/api/v1/me', { token: org.ownerToken })).status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
    });
  });
});

const perAddress = { AUTH_RATE_LIMIT_PER_MINUTE: '6', AUTH_RATE_LIMIT_BURST: '10' };
const password = 'correct horse battery';
const signupBody = () => ({
  organizationName: 'Burst',
  email: `burst-${randomUUID().slice(0, 8)}@example.com`,
  password,
});
const count = (results: { status: number }[], status: number) => results.filter((r) => r.status === status).length;

eachBackend((backend) => {
  describe(`signup, login and refresh are limited per client address (${backend})`, () => {
    test('30 signups at once from one address: the burst of 10 is created, the rest are 429 with Retry-After and the policy', async (t) => {
      const app = await startTestApp(backend, perAddress);
      t.after(() => app.stop());
      const results = await Promise.all(
        Array.from({ length: 30 }, () => app.request('POST', '/api/v1/auth/signup', { body: signupBody() })),
      );
      t.diagnostic(
        `30 signups from one address: ${count(results, 201)} created, ${count(results, 429)} refused with 429`,
      );
      assert.equal(count(results, 201), 10, results.map((r) => r.status).join(','));
      assert.equal(count(results, 429), 20);
      for (const res of results) {
        assert.equal(res.headers.get('ratelimit-policy'), '6;w=60;burst=10');
        assert.equal(res.headers.get('ratelimit-limit'), '6');
        assert.ok(res.headers.get('ratelimit-remaining') !== null && res.headers.get('ratelimit-reset') !== null);
        if (res.status === 429) {
          assert.ok(Number(res.headers.get('retry-after')) >= 1);
          assert.equal(res.body.error, 'rate_limited');
        }
      }
    });

    test('logins and refreshes from one address are limited beyond the per-email limit; another address has its own budget', async (t) => {
      const app = await startTestApp(backend, { ...perAddress, TRUSTED_PROXY_HOPS: '1' });
      t.after(() => app.stop());
      const from = (address: string) => ({ 'x-forwarded-for': address });
      const logins = [];
      for (let i = 0; i < 12; i++)
        logins.push(
          await app.request('POST', '/api/v1/auth/login', {
            body: { email: `nobody-${i}@example.com`, password },
            headers: from('203.0.113.7'),
          }),
        );
      assert.deepEqual(
        logins.map((r) => r.status),
        [...Array(10).fill(401), 429, 429],
        'distinct emails: only the address limit applies',
      );
      const refreshes = [];
      for (let i = 0; i < 12; i++)
        refreshes.push(
          await app.request('POST', '/api/v1/auth/refresh', {
            body: { refreshToken: `bogus-${i}` },
            headers: from('203.0.113.7'),
          }),
        );
      assert.deepEqual(
        refreshes.map((r) => r.status),
        [...Array(10).fill(401), 429, 429],
      );
      assert.equal(
        (
          await app.request('POST', '/api/v1/auth/login', {
            body: { email: 'nobody@example.com', password },
            headers: from('198.51.100.1'),
          })
        ).status,
        401,
        'another address is not limited',
      );
      const sameEmail = [];
      for (let i = 0; i < 6; i++)
        sameEmail.push(
          (
            await app.request('POST', '/api/v1/auth/login', {
              body: { email: 'target@example.com', password },
              headers: from('198.51.100.2'),
            })
          ).status,
        );
      assert.deepEqual(sameEmail, [401, 401, 401, 401, 401, 429], 'the per-email limit still applies first');
    });
  });
});

describe('two frontends share one budget and see one revocation', () => {
  test('signups from one address through two frontends draw on one budget', async (t) => {
    if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
      if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
      return t.skip('REDIS_URL/MONGODB_URL not set');
    }
    const one = await startTestApp('redis+mongo', perAddress);
    t.after(() => one.stop());
    const two = await startTestApp('redis+mongo', {
      ...perAddress,
      RUNTIME_KEY_PREFIX: one.config.runtime.keyPrefix,
      MONGODB_URL: one.config.mongoUrl!,
      DATA_DIR: one.config.dataDir,
    });
    t.after(() => two.http.close().then(() => two.app.close()));
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        (i % 2 ? one : two).request('POST', '/api/v1/auth/signup', { body: signupBody() }),
      ),
    );
    assert.equal(count(results, 201), 10);
    assert.equal(count(results, 429), 20);
  });

  test('requests through two frontends on one Redis draw on one organization budget', async (t) => {
    if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
      if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
      return t.skip('REDIS_URL/MONGODB_URL not set');
    }
    const one = await startTestApp('redis+mongo', limits);
    t.after(() => one.stop());
    // The second frontend shares the first one's Redis prefix and database: another process of the same deployment.
    const twoEnv = {
      ...limits,
      RUNTIME_KEY_PREFIX: one.config.runtime.keyPrefix,
      MONGODB_URL: one.config.mongoUrl!,
      DATA_DIR: one.config.dataDir,
    };
    const two = await startTestApp('redis+mongo', twoEnv);
    t.after(() => two.http.close().then(() => two.app.close()));
    const org = await signup(one);
    const results = await Promise.all(
      Array.from({ length: 24 }, (_, i) => (i % 2 ? one : two).request('GET', '/api/v1/me', { token: org.ownerToken })),
    );
    const passed = results.filter((r) => r.status === 200).length;
    assert.equal(passed, 20, 'one burst of 20 across both frontends');
    assert.equal(results.filter((r) => r.status === 429).length, 4);
  });

  test('an API key revoked through one frontend fails on every frontend once the revoke has answered', async (t) => {
    if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
      if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
      return t.skip('REDIS_URL/MONGODB_URL not set');
    }
    const one = await startTestApp('redis+mongo');
    t.after(() => one.stop());
    const two = await startTestApp('redis+mongo', {
      RUNTIME_KEY_PREFIX: one.config.runtime.keyPrefix,
      MONGODB_URL: one.config.mongoUrl!,
      DATA_DIR: one.config.dataDir,
    });
    t.after(() => two.http.close().then(() => two.app.close()));
    const org = await signup(one);
    const created = await one.request('POST', '/api/v1/api-keys', {
      token: org.ownerToken,
      body: { name: 'to revoke' },
    });
    assert.equal(
      (await two.request('GET', '/api/v1/me', { token: created.body.key })).status,
      200,
      'the other frontend has it cached now',
    );
    // Callers on both frontends keep using the key while it is revoked; what counts is every request sent after the revoke answered.
    let answered = false;
    let stop = false;
    const afterRevoke: number[] = [];
    const useKey = async (frontend: typeof one) => {
      while (!stop) {
        const sentAfter = answered;
        const { status } = await frontend.request('GET', '/api/v1/me', { token: created.body.key });
        if (sentAfter) afterRevoke.push(status);
      }
    };
    const callers = [useKey(two), useKey(two), useKey(one), useKey(two)];
    await sleep(200);
    const revoke = await one.request('DELETE', `/api/v1/api-keys/${created.body.id}`, { token: org.ownerToken });
    answered = true;
    assert.equal(revoke.status, 204);
    await sleep(1_500);
    stop = true;
    await Promise.all(callers);
    t.diagnostic(
      `requests sent after the revoke answered: ${afterRevoke.length}, of which 200: ${afterRevoke.filter((s) => s === 200).length}`,
    );
    assert.ok(afterRevoke.length >= 8, `${afterRevoke.length} requests after the revoke`);
    assert.equal(afterRevoke.filter((s) => s === 200).length, 0, `statuses after the revoke: ${afterRevoke.join(',')}`);
    assert.ok(afterRevoke.every((s) => s === 401));
  });
});
