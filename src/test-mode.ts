/**
 * Test mode: the test data of organization X is a tenant of its own, `X_test`
 * (the organization's id and a fixed suffix), made with the organization's
 * first test key. A test key resolves to it, so every tenant-scoped query,
 * stream, webhook, statistic, rate limit and actor keeps test data and live
 * data apart with no filter of its own; whether a tenant is a test one is
 * read from its id, with no lookup.
 */
export const testTenantSuffix = '_test';

export type KeyMode = 'live' | 'test';

/** The tenant holding the test data of the organization whose (live) tenant id this is. */
export function testTenantOf(tenantId: string): string {
  return isTestTenant(tenantId) ? tenantId : `${tenantId}${testTenantSuffix}`;
}

export function isTestTenant(tenantId: string): boolean {
  return tenantId.endsWith(testTenantSuffix);
}

/** The organization's own tenant: where its members, API keys and teams of live data are. */
export function liveTenantOf(tenantId: string): string {
  return isTestTenant(tenantId) ? tenantId.slice(0, -testTenantSuffix.length) : tenantId;
}

/** `livemode` of what a tenant holds: false for test data. */
export function livemodeOf(tenantId: string): boolean {
  return !isTestTenant(tenantId);
}

/**
 * The pace a tenant's lines follow where neither the organization nor the
 * number sets one. Test data has no quiet hours by default, so a test send
 * is delivered whatever the hour (its magic recipients' numbers tell no time
 * zone, so the night would be the line's zone's), and no unanswered cap, as
 * a magic recipient other than `+15005550004` never replies: a test suite's
 * sixth message to `+15005550001` would wait for ever. A test key sets
 * either to try it.
 */
export function defaultPaceOf<P extends { quietHours: unknown; unansweredCap: number }>(
  tenantId: string,
  defaults: P,
): P {
  return isTestTenant(tenantId) ? { ...defaults, quietHours: false, unansweredCap: Number.MAX_SAFE_INTEGER } : defaults;
}
