import type { TestContext } from 'node:test';

/**
 * The URL of a backing service for an integration test. Outside CI a missing
 * service skips the test with the reason printed; in CI it is a failure.
 */
export function serviceUrl(t: TestContext, name: 'REDIS_URL' | 'MONGODB_URL', localDefault?: string): string | undefined {
  const url = process.env[name] || (process.env.CI === 'true' ? undefined : localDefault);
  if (url) return url;
  if (process.env.CI === 'true') throw new Error(`${name} is not set: CI must run this test against a real service`);
  t.skip(`${name} not set: start the service (see README) to run this test`);
  return undefined;
}
