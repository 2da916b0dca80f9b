import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { identityCollections, loadAccessTokens } from '../../src/identity/index.ts';
import { IdentityService } from '../../src/identity/identity-service.ts';
import type { IdentityCollections, UserDoc } from '../../src/identity/identity-store.ts';
import { nowIso } from '../../src/ids.ts';
import { createLogger } from '../../src/log.ts';
import type { Principal } from '../../src/roles.ts';
import { LocalRateLimiter } from '../../src/runtime/rate-limiter.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';

/** Rounds of each race, each on a fresh organization: enough that a count-then-write check loses at least once. */
const rounds = 50;

eachBackend((backend) => {
  describe(`the last owner under concurrent changes (${backend})`, () => {
    let t: TestApp;
    let db: IdentityCollections;
    let identity: IdentityService;

    before(async () => {
      t = await startTestApp(backend);
      db = identityCollections(t.app.store);
      const c = t.config.identity;
      const tokens = await loadAccessTokens({
        issuer: c.jwtIssuer,
        audience: c.jwtAudience,
        accessTokenTtlSeconds: c.accessTokenTtlSeconds,
        privateKeyPem: c.jwtPrivateKeyPem,
        publicKeyPem: c.jwtPublicKeyPem,
        dataDir: t.config.dataDir,
      });
      identity = new IdentityService(db, tokens, new LocalRateLimiter(), c, createLogger('silent'));
    });
    after(() => t.stop());

    /**
     * An organization stored as one made before this release: two owners, and
     * the organization's document as it was then. Each owner acts with its own
     * principal, as two requests would.
     */
    const twoOwners = async () => {
      const orgId = `org_${randomUUID()}`;
      const now = nowIso();
      const scope = { tenantId: orgId };
      await db.organizations.insertOne(scope, {
        id: orgId,
        tenantId: orgId,
        name: 'Two owners',
        defaultTeamId: `team_${randomUUID()}`,
        createdAt: now,
        updatedAt: now,
      });
      const owner = async (): Promise<Principal & { userId: string }> => {
        const user: UserDoc = {
          id: `usr_${randomUUID()}`,
          tenantId: orgId,
          email: `${randomUUID()}@example.com`,
          passwordHash: 'not used',
          role: 'owner',
          createdAt: now,
          updatedAt: now,
        };
        await db.users.insertOne(scope, user);
        return { tenantId: orgId, role: 'owner', teamId: 'not used', userId: user.id };
      };
      const owners = () => db.users.count(scope, { role: 'owner' });
      return { a: await owner(), b: await owner(), owners };
    };

    /** Both calls at once; the statuses they end with (`ok`, or the error's code). */
    const race = (calls: Promise<unknown>[]) =>
      Promise.all(
        calls.map((call) =>
          call.then(
            () => 'ok',
            (err: { code?: string }) => err.code ?? String(err),
          ),
        ),
      );

    test('the store says whether its updates are compare-and-sets, as the server behaves', async () => {
      const probe = t.app.store.collection<{ id: string; tenantId: string; step: number }>('cas_probe');
      const scope = { tenantId: `probe_${randomUUID()}` };
      let bothApplied = 0;
      for (let i = 0; i < rounds; i++) {
        await probe.insertOne(scope, { id: `${scope.tenantId}:${i}`, tenantId: scope.tenantId, step: 0 });
        const applied = await Promise.all(
          [0, 1].map(() => probe.updateOne(scope, { id: `${scope.tenantId}:${i}`, step: 0 }, { $inc: { step: 1 } })),
        );
        if (applied.every((doc) => doc !== null)) bothApplied++;
      }
      await probe.deleteMany(scope, {});
      assert.equal(
        t.app.store.updatesCompareAndSet,
        bothApplied === 0,
        `both of two updates applied ${bothApplied} times`,
      );
      if (backend === 'embedded') assert.equal(t.app.store.updatesCompareAndSet, true);
    });

    test('two owners demoting each other at once leave exactly one owner', async () => {
      for (let round = 0; round < rounds; round++) {
        const { a, b, owners } = await twoOwners();
        const ends = await race([
          identity.changeMemberRole(a, b.userId, 'admin'),
          identity.changeMemberRole(b, a.userId, 'admin'),
        ]);
        assert.deepEqual([...ends].sort(), ['conflict', 'ok'], `round ${round}`);
        assert.equal(await owners(), 1, `round ${round}: ${ends}`);
      }
    });

    test('two owners removing each other at once leave exactly one owner', async () => {
      for (let round = 0; round < rounds; round++) {
        const { a, b, owners } = await twoOwners();
        const ends = await race([identity.removeMember(a, b.userId), identity.removeMember(b, a.userId)]);
        assert.deepEqual([...ends].sort(), ['conflict', 'ok'], `round ${round}`);
        assert.equal(await owners(), 1, `round ${round}: ${ends}`);
      }
    });

    test('one owner demoted while it removes the other leave exactly one owner', async () => {
      for (let round = 0; round < rounds; round++) {
        const { a, b, owners } = await twoOwners();
        const ends = await race([identity.changeMemberRole(a, b.userId, 'member'), identity.removeMember(b, a.userId)]);
        assert.deepEqual([...ends].sort(), ['conflict', 'ok'], `round ${round}`);
        assert.equal(await owners(), 1, `round ${round}: ${ends}`);
      }
    });

    test('over HTTP, two owners demoting each other at once leave exactly one owner', async () => {
      for (let round = 0; round < rounds; round++) {
        const org = await signup(t, 'Two owners');
        const first = (await t.request('GET', '/api/v1/me', { token: org.ownerToken })).body.user.id as string;
        const email = `second-${randomUUID().slice(0, 8)}@example.com`;
        const made = await t.request('POST', '/api/v1/members', {
          token: org.ownerToken,
          body: { email, password: 'second owner password', role: 'owner' },
        });
        assert.equal(made.status, 201, made.text);
        const login = await t.request('POST', '/api/v1/auth/login', {
          body: { email, password: 'second owner password' },
        });
        const answers = await Promise.all([
          t.request('PATCH', `/api/v1/members/${made.body.id}`, { token: org.ownerToken, body: { role: 'admin' } }),
          t.request('PATCH', `/api/v1/members/${first}`, { token: login.body.accessToken, body: { role: 'admin' } }),
        ]);
        const statuses = answers.map((r) => r.status);
        // The loser is refused: 409 when it checked the owners, 403 when its own demotion already applied.
        assert.equal(statuses.filter((s) => s === 200).length, 1, `round ${round}: ${statuses}`);
        assert.ok(
          statuses.every((s) => [200, 403, 409].includes(s)),
          `round ${round}: ${statuses}`,
        );
        const members = await t.request('GET', '/api/v1/members', { token: org.ownerToken });
        const owners = members.body.data.filter((m: { role: string }) => m.role === 'owner');
        assert.equal(owners.length, 1, `round ${round}: ${statuses}`);
      }
    });
  });
});
