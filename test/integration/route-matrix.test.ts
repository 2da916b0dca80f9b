import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { neededRole } from '../../src/http/server.ts';
import type { RouteDef } from '../../src/http/route.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { routeFixtures } from '../support/route-fixtures.ts';

/** The product's routes that take a credential: everything under /api/v1 but sign-up, login and refresh. */
const authenticated = (routes: RouteDef[]) => routes.filter((r) => r.path.startsWith('/api/v1/') && r.auth !== false);
const hasId = (r: RouteDef) => r.path.includes('/:');
/**
 * Routes whose path holds a value asked about, not a resource of the
 * organization: another organization's call is a lookup of its own (its own
 * kept answers, its own relays), tested where the route is.
 */
const valuePaths = new Set(['GET /api/v1/handles/:handle/availability']);
const label = (r: RouteDef) => `${r.method} ${r.path}`;
const fill = (path: string, params: Record<string, string>) =>
  path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => encodeURIComponent(params[name] ?? `missing-${name}`));

eachBackend((backend) => {
  describe(`route matrices (${backend})`, () => {
    let t: TestApp;
    let a: Org;
    let b: Org;
    let routes: RouteDef[];

    before(async () => {
      t = await startTestApp(backend);
      a = await signup(t, 'Org A');
      b = await signup(t, 'Org B');
      routes = authenticated(t.app.routes);
    });
    after(() => t.stop());

    /** The route called on a resource a fixture made, with `token`. */
    const callOn = (route: RouteDef, made: { params: Record<string, string>; body?: unknown }, token: string) =>
      t.request(route.method, fill(route.path, made.params), { token, body: made.body });

    /** The control: the credential of whoever made a resource reaches it. */
    async function reachesItsOwn(route: RouteDef, org: Org): Promise<void> {
      const own = await callOn(route, await routeFixtures[label(route)]!(t, org), org.ownerToken);
      assert.ok(
        own.status < 400,
        `${label(route)}: the owner reaches its own resource (got ${own.status} ${own.text})`,
      );
    }

    test('every route with an id has a fixture, so no route escapes the matrices', () => {
      const missing = routes
        .filter(hasId)
        .map(label)
        .filter((l) => !routeFixtures[l]);
      assert.deepEqual(missing, [], 'add a fixture in test/support/route-fixtures.ts for each of these');
    });

    test("role matrix: a viewer's write is 403 on every write route", async () => {
      const viewer = await apiKey(t, a, 'viewer');
      const writes = routes.filter((r) => neededRole(r) !== 'viewer');
      assert.ok(writes.length >= 4, 'the write routes are found');
      for (const route of writes) {
        const res = await t.request(route.method, fill(route.path, {}), {
          token: viewer,
          body: route.method === 'GET' ? undefined : {},
        });
        assert.equal(res.status, 403, label(route));
        assert.equal(res.body.error, 'forbidden', label(route));
      }
    });

    test('role matrix: a member is 403 on every admin route (API keys, members, teams...)', async () => {
      const member = await apiKey(t, a, 'member');
      const adminRoutes = routes.filter((r) => neededRole(r) === 'admin' || neededRole(r) === 'owner');
      assert.ok(adminRoutes.some((r) => r.path === '/api/v1/api-keys' && r.method === 'POST'));
      for (const route of adminRoutes) {
        const res = await t.request(route.method, fill(route.path, {}), {
          token: member,
          body: route.method === 'GET' ? undefined : {},
        });
        assert.equal(res.status, 403, label(route));
      }
    });

    test("cross-tenant matrix: organization B's credential on organization A's ids is 404", async () => {
      for (const route of routes.filter((r) => hasId(r) && !valuePaths.has(label(r)))) {
        const fixture = routeFixtures[label(route)]!;
        await reachesItsOwn(route, a);
        const res = await callOn(route, await fixture(t, a), b.ownerToken);
        assert.equal(res.status, 404, `${label(route)} with another organization's id`);
        assert.equal(res.body.error, 'not_found', label(route));
      }
    });

    test('test/live isolation matrix: a test key on live ids, and a live credential on test ids, is 404', async () => {
      const made = await t.request('POST', '/api/v1/api-keys', {
        token: a.ownerToken,
        body: { name: 'test owner', role: 'owner', mode: 'test' },
      });
      assert.equal(made.status, 201, made.text);
      const testOrg: Org = { ...a, orgId: `${a.orgId}_test`, ownerToken: made.body.key };
      // The organization's own records, the same whichever mode asks (keys), or live only (members: 403 in test mode).
      const organizationLevel = [
        'DELETE /api/v1/api-keys/:id',
        'PATCH /api/v1/members/:id',
        'DELETE /api/v1/members/:id',
      ];
      // What only live data has: relays registered by an agent (test data is sent by the built-in relay).
      const liveOnly = ['POST /api/v1/tenants/:tenantId/relay-tokens', 'GET /api/v1/relays/:id'];
      for (const route of routes.filter(hasId)) {
        if (organizationLevel.includes(label(route)) || valuePaths.has(label(route))) continue;
        const fixture = routeFixtures[label(route)]!;
        const fromTest = await callOn(route, await fixture(t, a), testOrg.ownerToken);
        assert.equal(fromTest.status, 404, `${label(route)}: a test key on a live id (${fromTest.text})`);
        if (liveOnly.includes(label(route))) continue;
        await reachesItsOwn(route, testOrg);
        const fromLive = await callOn(route, await fixture(t, testOrg), a.ownerToken);
        assert.equal(fromLive.status, 404, `${label(route)}: a live credential on a test id (${fromLive.text})`);
      }
    });

    test("cross-team matrix: a team's credential on another team's resource is 404", async () => {
      const other = await t.request('POST', '/api/v1/teams', {
        token: a.ownerToken,
        body: { name: `Other ${Date.now()}` },
      });
      assert.equal(other.status, 201);
      const teamRoutes = routes.filter((r) => hasId(r) && r.teamScoped);
      assert.ok(teamRoutes.length >= 3, 'team-scoped routes with ids are found');
      for (const route of teamRoutes) {
        const made = await routeFixtures[label(route)]!(t, a);
        const res = await t.request(route.method, fill(route.path, made.params), {
          token: a.ownerToken,
          body: made.body,
          headers: { 'x-team-id': other.body.id },
        });
        assert.equal(res.status, 404, `${label(route)} from another team`);
      }
    });
  });
});
