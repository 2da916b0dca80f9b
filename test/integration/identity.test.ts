import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generateKeyPair, importJWK, SignJWT, UnsecuredJWT } from 'jose';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

eachBackend((backend) => {
  describe(`identity (${backend})`, () => {
    let t: TestApp;
    const logLines: string[] = [];
    let org: Org;

    before(async () => {
      t = await startTestApp(backend, {}, { logLines });
      org = await signup(t, 'Acme');
    });
    after(() => t.stop());

    const signingKey = async () => {
      const stored = JSON.parse(await readFile(join(t.config.dataDir, 'jwt-signing-key.json'), 'utf8'));
      return importJWK(stored.privateJwk, 'EdDSA');
    };

    test('signup answers the user, organization, default team and a working session', async () => {
      const res = await t.request('POST', '/api/v1/auth/signup', {
        body: { organizationName: 'Beta', email: 'Someone@Example.com', password: 'long enough password' },
      });
      assert.equal(res.status, 201);
      assert.equal(res.body.user.email, 'someone@example.com');
      assert.equal(res.body.user.role, 'owner');
      assert.equal(res.body.organization.name, 'Beta');
      assert.ok(res.body.team.id);
      assert.equal(res.body.expiresIn, 900);
      assert.equal(res.body.user.passwordHash, undefined);
      const me = await t.request('GET', '/api/v1/me', { token: res.body.accessToken });
      assert.equal(me.status, 200);
      assert.equal(me.body.organization.id, res.body.organization.id);
      assert.equal(me.body.role, 'owner');
      assert.deepEqual(
        me.body.teams.map((x: { id: string }) => x.id),
        [res.body.team.id],
      );
      const again = await t.request('POST', '/api/v1/auth/signup', {
        body: { organizationName: 'Gamma', email: 'someone@example.com', password: 'long enough password' },
      });
      assert.equal(again.status, 409, 'one account per email');
      assert.equal(again.body.error, 'conflict');
    });

    test('signup validates its fields', async () => {
      for (const body of [
        { organizationName: 'X', email: 'not-an-email', password: 'long enough password' },
        { organizationName: 'X', email: 'a@b.co', password: 'short' },
        { organizationName: '', email: 'a@b.co', password: 'long enough password' },
        { organizationName: 'X', email: 'a@b.co', password: 'long enough password', admin: true },
      ]) {
        const res = await t.request('POST', '/api/v1/auth/signup', { body });
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'validation_error');
      }
    });

    test('authentication matrix: every bad credential is a 401', async () => {
      const revoked = await t.request('POST', '/api/v1/api-keys', {
        token: org.ownerToken,
        body: { name: 'soon revoked' },
      });
      assert.equal((await t.request('GET', '/api/v1/me', { token: revoked.body.key })).status, 200);
      assert.equal(
        (await t.request('DELETE', `/api/v1/api-keys/${revoked.body.id}`, { token: org.ownerToken })).status,
        204,
      );

      const key = await signingKey();
      const claims = { org: org.orgId, role: 'owner' };
      const owner = (await t.request('GET', '/api/v1/me', { token: org.ownerToken })).body.user.id as string;
      const base = (subject = owner) =>
        new SignJWT(claims)
          .setProtectedHeader({ alg: 'EdDSA' })
          .setSubject(subject)
          .setIssuer(t.config.identity.jwtIssuer);
      const noSuchMember = await base('usr_x')
        .setAudience(t.config.identity.jwtAudience)
        .setExpirationTime('5m')
        .sign(key);
      const expired = await base()
        .setAudience(t.config.identity.jwtAudience)
        .setIssuedAt(Math.floor(Date.now() / 1000) - 3600)
        .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
        .sign(key);
      const wrongAudience = await base().setAudience('another-api').setExpirationTime('5m').sign(key);
      const other = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
      const otherKey = await base()
        .setAudience(t.config.identity.jwtAudience)
        .setExpirationTime('5m')
        .sign(other.privateKey);
      const none = new UnsecuredJWT(claims)
        .setSubject(owner)
        .setIssuer(t.config.identity.jwtIssuer)
        .setAudience(t.config.identity.jwtAudience)
        .setExpirationTime('5m')
        .encode();
      const valid = await base().setAudience(t.config.identity.jwtAudience).setExpirationTime('5m').sign(key);
      assert.equal(
        (await t.request('GET', '/api/v1/me', { token: valid })).status,
        200,
        'the control: a well-made token passes',
      );

      const cases: Array<[string, Record<string, string>]> = [
        ['no header', {}],
        ['malformed header', { authorization: 'Basic dXNlcjpwYXNz' }],
        ['empty bearer', { authorization: 'Bearer ' }],
        ['unknown key', { authorization: 'Bearer rbx_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }],
        ['revoked key', { authorization: `Bearer ${revoked.body.key}` }],
        ['expired JWT', { authorization: `Bearer ${expired}` }],
        ['alg none', { authorization: `Bearer ${none}` }],
        ['JWT signed with another key', { authorization: `Bearer ${otherKey}` }],
        ['wrong audience', { authorization: `Bearer ${wrongAudience}` }],
        ['a well-made token of no member of the organization', { authorization: `Bearer ${noSuchMember}` }],
      ];
      for (const [name, headers] of cases) {
        const res = await t.request('GET', '/api/v1/me', { headers });
        assert.equal(res.status, 401, name);
        assert.deepEqual(
          Object.keys(res.body).sort(),
          ['detail', 'error', 'instance', 'message', 'status', 'statusCode', 'title', 'type'],
          name,
        );
        assert.equal(res.body.error, 'unauthorized', name);
        // RFC 6750, 3.1: a request without a bearer token gets the bare challenge, a refused token invalid_token.
        const tokenGiven = /^Bearer \S/.test(headers.authorization ?? '');
        assert.equal(
          res.headers.get('www-authenticate'),
          tokenGiven ? 'Bearer realm="relaybox", error="invalid_token"' : 'Bearer realm="relaybox"',
          name,
        );
      }
    });

    test('an API key gives the same access as a JWT of its role', async () => {
      const key = await apiKey(t, org, 'admin');
      const viaKey = await t.request('GET', '/api/v1/me', { token: key });
      assert.equal(viaKey.status, 200);
      assert.equal(viaKey.body.organization.id, org.orgId);
      assert.equal(viaKey.body.role, 'admin');
      assert.equal((await t.request('GET', '/api/v1/teams', { token: key })).status, 200);
    });

    test('API keys: raw value once, never listed, never logged; revoke is immediate', async () => {
      const created = await t.request('POST', '/api/v1/api-keys', {
        token: org.ownerToken,
        body: { name: 'ci', role: 'member' },
      });
      assert.equal(created.status, 201);
      const raw: string = created.body.key;
      assert.match(raw, /^rb_live_[A-Za-z0-9_-]{43}$/);
      assert.ok(raw.startsWith(created.body.prefix));
      assert.deepEqual(Object.keys(created.body).sort(), ['createdAt', 'id', 'key', 'mode', 'name', 'prefix', 'role']);
      const listed = await t.request('GET', '/api/v1/api-keys', { token: org.ownerToken });
      assert.equal(listed.status, 200);
      assert.ok(listed.body.data.some((k: { id: string }) => k.id === created.body.id));
      assert.ok(!listed.text.includes(raw.slice(12)), 'the raw key is not in the list');
      assert.ok(listed.body.data.every((k: Record<string, unknown>) => k.key === undefined && k.hash === undefined));
      await t.request('GET', '/api/v1/me', { token: raw });
      await t.request('GET', '/api/v1/me', { headers: { authorization: `Bearer ${raw}x` } });
      assert.equal(
        (await t.request('DELETE', `/api/v1/api-keys/${created.body.id}`, { token: org.ownerToken })).status,
        204,
      );
      const after = await t.request('GET', '/api/v1/me', { token: raw });
      assert.equal(after.status, 401);
      assert.ok(!after.text.includes(raw.slice(12)), 'the raw key is not in the error');
      assert.equal(
        (await t.request('DELETE', `/api/v1/api-keys/${created.body.id}`, { token: org.ownerToken })).status,
        404,
        'revoking twice',
      );
      assert.ok(logLines.length > 0, 'the app did log');
      assert.ok(!logLines.some((l) => l.includes(raw.slice(12))), 'the raw key never reaches a log line');
    });

    test('login: the same 401 for an unknown email and a wrong password, in similar time', async () => {
      const ok = await t.request('POST', '/api/v1/auth/login', {
        body: { email: org.email.toUpperCase(), password: org.password },
      });
      assert.equal(ok.status, 200);
      assert.ok(ok.body.accessToken && ok.body.refreshToken);
      const timed = async (email: string) => {
        const started = performance.now();
        const res = await t.request('POST', '/api/v1/auth/login', { body: { email, password: 'wrong password!' } });
        return { res, ms: performance.now() - started };
      };
      // Its own account: five failures use up that email's login budget.
      const timedOrg = await signup(t, 'Timed');
      const unknown: number[] = [];
      const wrong: number[] = [];
      // Five of each, alternating, so a pause of the machine moves one sample, not the median.
      for (let i = 0; i < 5; i++) {
        const u = await timed(`nobody-${i}@example.com`);
        const w = await timed(timedOrg.email);
        assert.equal(u.res.status, 401);
        assert.equal(w.res.status, 401);
        assert.deepEqual(
          { ...u.res.body, instance: undefined },
          { ...w.res.body, instance: undefined },
          'identical answers but for the request id',
        );
        unknown.push(u.ms);
        wrong.push(w.ms);
      }
      const median = (xs: number[]) => xs.sort((a, b) => a - b)[2]!;
      const ratio = median(unknown) / median(wrong);
      assert.ok(
        ratio > 0.4 && ratio < 2.5,
        `unknown email ${median(unknown).toFixed(1)} ms vs wrong password ${median(wrong).toFixed(1)} ms`,
      );
    });

    test('login: 5 failures a minute per email and address, then 429 with Retry-After', async () => {
      const victim = await signup(t, 'Throttled');
      for (let i = 0; i < 5; i++) {
        assert.equal(
          (
            await t.request('POST', '/api/v1/auth/login', {
              body: { email: victim.email, password: 'wrong password!' },
            })
          ).status,
          401,
          `failure ${i + 1}`,
        );
      }
      const refused = await t.request('POST', '/api/v1/auth/login', {
        body: { email: victim.email, password: victim.password },
      });
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error, 'rate_limited');
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      const otherEmail = await t.request('POST', '/api/v1/auth/login', {
        body: { email: org.email, password: org.password },
      });
      assert.equal(otherEmail.status, 200, 'another email is not affected');
    });

    test('refresh rotates; reusing a used token revokes the whole family', async () => {
      const session = await t.request('POST', '/api/v1/auth/login', {
        body: { email: org.email, password: org.password },
      });
      const first = session.body.refreshToken;
      const rotated = await t.request('POST', '/api/v1/auth/refresh', { body: { refreshToken: first } });
      assert.equal(rotated.status, 200);
      assert.notEqual(rotated.body.refreshToken, first);
      assert.equal((await t.request('GET', '/api/v1/me', { token: rotated.body.accessToken })).status, 200);
      const reuse = await t.request('POST', '/api/v1/auth/refresh', { body: { refreshToken: first } });
      assert.equal(reuse.status, 401, 'a used token is dead');
      const second = await t.request('POST', '/api/v1/auth/refresh', {
        body: { refreshToken: rotated.body.refreshToken },
      });
      assert.equal(second.status, 401, 'the reuse revoked the newest token of the family too');
      assert.equal(
        (await t.request('POST', '/api/v1/auth/refresh', { body: { refreshToken: 'made-up' } })).status,
        401,
      );
    });

    test('logout ends the session of its refresh token', async () => {
      const session = await t.request('POST', '/api/v1/auth/login', {
        body: { email: org.email, password: org.password },
      });
      const out = await t.request('POST', '/api/v1/auth/logout', {
        token: session.body.accessToken,
        body: { refreshToken: session.body.refreshToken },
      });
      assert.equal(out.status, 204);
      assert.equal(
        (await t.request('POST', '/api/v1/auth/refresh', { body: { refreshToken: session.body.refreshToken } })).status,
        401,
      );
    });

    test("a member's role changes and its removal apply to its next request; nobody manages a role above its own, and the last owner stays", async () => {
      const team = await signup(t, 'Roles');
      const admin = await apiKey(t, team, 'admin');
      const add = async (role: string) => {
        const email = `r-${Math.random().toString(36).slice(2)}@example.com`;
        const made = await t.request('POST', '/api/v1/members', {
          token: team.ownerToken,
          body: { email, password: 'member password', role },
        });
        assert.equal(made.status, 201, made.text);
        const login = await t.request('POST', '/api/v1/auth/login', { body: { email, password: 'member password' } });
        return {
          id: made.body.id as string,
          email,
          token: login.body.accessToken as string,
          refresh: login.body.refreshToken as string,
        };
      };
      const writer = await add('member');
      const send = (token: string) =>
        t.request('POST', '/api/v1/messages', { token, body: { to: '+14155550100', body: 'hi' } });
      assert.equal((await send(writer.token)).status, 201);
      const demoted = await t.request('PATCH', `/api/v1/members/${writer.id}`, {
        token: admin,
        body: { role: 'viewer' },
      });
      assert.equal(demoted.status, 200, demoted.text);
      assert.equal(demoted.body.role, 'viewer');
      assert.equal((await send(writer.token)).status, 403, 'the token signed as a member now acts as a viewer');
      assert.equal((await t.request('GET', '/api/v1/me', { token: writer.token })).body.role, 'viewer');

      const owner = (await t.request('GET', '/api/v1/me', { token: team.ownerToken })).body.user.id as string;
      assert.equal(
        (await t.request('PATCH', `/api/v1/members/${owner}`, { token: admin, body: { role: 'member' } })).status,
        403,
        'an admin cannot change an owner',
      );
      assert.equal(
        (await t.request('PATCH', `/api/v1/members/${writer.id}`, { token: admin, body: { role: 'owner' } })).status,
        403,
        'nor grant owner',
      );
      const last = await t.request('PATCH', `/api/v1/members/${owner}`, {
        token: team.ownerToken,
        body: { role: 'admin' },
      });
      assert.equal(last.status, 409, 'the last owner stays an owner');
      assert.match(last.body.message, /keep an owner/);
      assert.equal((await t.request('DELETE', `/api/v1/members/${owner}`, { token: team.ownerToken })).status, 409);
      assert.equal(
        (await t.request('PATCH', `/api/v1/members/${writer.id}`, { token: writer.token, body: { role: 'member' } }))
          .status,
        403,
        'a viewer manages nobody',
      );
      for (const body of [{ role: 'king' }, { role: 'member', email: 'x@example.com' }, {}]) {
        assert.equal(
          (await t.request('PATCH', `/api/v1/members/${writer.id}`, { token: admin, body })).status,
          400,
          JSON.stringify(body),
        );
      }
      const foreign = await signup(t, 'Elsewhere');
      assert.equal(
        (
          await t.request('PATCH', `/api/v1/members/${writer.id}`, {
            token: foreign.ownerToken,
            body: { role: 'member' },
          })
        ).status,
        404,
        "another organization's member is not found",
      );
      assert.equal(
        (await t.request('DELETE', `/api/v1/members/${writer.id}`, { token: foreign.ownerToken })).status,
        404,
      );

      assert.equal((await t.request('DELETE', `/api/v1/members/${writer.id}`, { token: admin })).status, 204);
      assert.equal(
        (await t.request('GET', '/api/v1/me', { token: writer.token })).status,
        401,
        'its access token stops at once',
      );
      assert.equal(
        (await t.request('POST', '/api/v1/auth/refresh', { body: { refreshToken: writer.refresh } })).status,
        401,
        'and its session',
      );
      assert.equal(
        (await t.request('POST', '/api/v1/auth/login', { body: { email: writer.email, password: 'member password' } }))
          .status,
        401,
        'and its sign-in',
      );
      assert.equal((await t.request('DELETE', `/api/v1/members/${writer.id}`, { token: admin })).status, 404);
      assert.ok(
        !(await t.request('GET', '/api/v1/members', { token: admin })).body.data.some(
          (m: { id: string }) => m.id === writer.id,
        ),
      );
      const again = await t.request('POST', '/api/v1/members', {
        token: admin,
        body: { email: writer.email, password: 'member password', role: 'member' },
      });
      assert.equal(again.status, 201, 'its email may join again');

      const second = await add('owner');
      assert.equal(
        (await t.request('PATCH', `/api/v1/members/${owner}`, { token: second.token, body: { role: 'admin' } })).status,
        200,
        'with a second owner the first may step down',
      );
    });

    test('members and teams: admins manage them, roles cannot be raised above the granter', async () => {
      const admin = await apiKey(t, org, 'admin');
      const member = await t.request('POST', '/api/v1/members', {
        token: admin,
        body: { email: `m-${Date.now()}@example.com`, password: 'member password', role: 'member' },
      });
      assert.equal(member.status, 201);
      assert.equal(member.body.role, 'member');
      assert.equal(member.body.passwordHash, undefined);
      const owner = await t.request('POST', '/api/v1/members', {
        token: admin,
        body: { email: `o-${Date.now()}@example.com`, password: 'owner password', role: 'owner' },
      });
      assert.equal(owner.status, 403, 'an admin cannot make an owner');
      const login = await t.request('POST', '/api/v1/auth/login', {
        body: { email: member.body.email, password: 'member password' },
      });
      assert.equal(login.status, 200);
      const members = await t.request('GET', '/api/v1/members', { token: login.body.accessToken });
      assert.ok(members.body.data.some((m: { id: string }) => m.id === member.body.id));
      const team = await t.request('POST', '/api/v1/teams', { token: admin, body: { name: 'Support' } });
      assert.equal(team.status, 201);
      assert.deepEqual(Object.keys(team.body).sort(), ['createdAt', 'id', 'name', 'updatedAt']);
      const teams = await t.request('GET', '/api/v1/teams', { token: admin });
      assert.ok(teams.body.data.some((x: { id: string }) => x.id === team.body.id));
      const me = await t.request('GET', '/api/v1/me', { token: admin, headers: { 'x-team-id': team.body.id } });
      assert.equal(me.status, 200, 'a team of the organization can be picked');
      const foreign = await signup(t, 'Foreign');
      const cross = await t.request('GET', '/api/v1/me', { token: admin, headers: { 'x-team-id': foreign.teamId } });
      assert.equal(cross.status, 404, "another organization's team is not found");
    });
  });
});
