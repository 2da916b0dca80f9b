import type { Org, TestApp } from './test-app.ts';

/** What one route needs to be called on a real resource of `org`: its path params and, for writes, a valid body. */
export type RouteFixture = (t: TestApp, org: Org) => Promise<{ params: Record<string, string>; body?: unknown }>;

async function created(t: TestApp, org: Org, path: string, body: unknown): Promise<any> {
  const res = await t.request('POST', path, { token: org.ownerToken, body });
  if (res.status !== 201) throw new Error(`fixture POST ${path}: ${res.status} ${res.text}`);
  return res.body;
}

/**
 * One entry per route with an id, keyed "METHOD /path". The route matrices
 * fail for a route that has none, so every new route is covered.
 */
export const routeFixtures: Record<string, RouteFixture> = {
  'DELETE /api/v1/api-keys/:id': async (t, org) => ({ params: { id: (await created(t, org, '/api/v1/api-keys', { name: 'fixture' })).id } }),
};

export { created };
