import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { cuttableLink } from '../support/cuttable-link.ts';
import { signup, startTestApp, withDatabase } from '../support/test-app.ts';

async function transientCount(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return [...text.matchAll(/^relaybox_store_transient_errors_total\{[^}]*outcome="unavailable"[^}]*\} (\d+)/gm)].reduce(
    (sum, m) => sum + Number(m[1]),
    0,
  );
}

test('an unreachable MongoDB wire server is a 503 with Retry-After, counted, and service resumes when it is back', async (t) => {
  if (!process.env.REDIS_URL || !process.env.MONGODB_URL) {
    if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
    return t.skip('REDIS_URL/MONGODB_URL not set');
  }
  const link = await cuttableLink(new URL(process.env.MONGODB_URL));
  const db = `relaybox_unavail_${Date.now().toString(36)}`;
  const app = await startTestApp('redis+mongo', { MONGODB_URL: withDatabase(`mongodb://127.0.0.1:${link.port}/`, db) });
  t.after(async () => {
    await link.restore().catch(() => undefined);
    await app.stop();
    await link.cut();
  });
  const org = await signup(app);
  assert.equal((await app.request('GET', '/api/v1/contacts', { token: org.ownerToken })).status, 200);
  const before = await transientCount(app.base);

  await link.cut();
  await sleep(app.config.identity.credentialCacheMs + 100);
  const down = await app.request('GET', '/api/v1/contacts', { token: org.ownerToken });
  assert.equal(down.status, 503, down.text);
  assert.equal(down.body.error, 'service_unavailable');
  assert.ok(Number(down.headers.get('retry-after')) >= 1);
  assert.ok((await transientCount(app.base)) > before, 'counted in relaybox_store_transient_errors_total');

  await link.restore();
  let status = 0;
  for (let i = 0; i < 40 && status !== 200; i++) {
    status = (await app.request('GET', '/api/v1/contacts', { token: org.ownerToken })).status;
    if (status !== 200) await sleep(250);
  }
  assert.equal(status, 200, 'answers again once the store is back');
});
