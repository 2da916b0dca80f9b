/**
 * GET /api/v1/admin/tenants/top on each backend: organizations ranked by
 * queued messages, sent and failed messages of a window and webhook lag,
 * with their names, reached with a platform-admin key only (an
 * organization's owner is 403, no credential 401), bad input a 400.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { newPlatformKey } from '../../src/identity/secrets.ts';
import { createLogger } from '../../src/log.ts';
import { MessageRollups, RollupTally, rollupCollection } from '../../src/messages/message-rollups.ts';
import { sleep, until } from '../support/until.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

const path = '/api/v1/admin/tenants/top';
const platform = newPlatformKey();

eachBackend((backend) => {
  describe(`platform operators' top organizations (${backend})`, () => {
    let t: TestApp;
    let a: Org;
    let b: Org;
    let c: Org;
    const top = (query: string, token = platform.raw) => t.request('GET', `${path}?${query}`, { token });
    const send = (org: Org, n: number) =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          t
            .request('POST', '/api/v1/messages', {
              token: org.ownerToken,
              body: { to: `+1415555${String(1000 + i)}`, body: `queued ${i}` },
            })
            .then((res) => assert.equal(res.status, 201, res.text)),
        ),
      );

    before(async () => {
      t = await startTestApp(backend, {
        PLATFORM_ADMIN_KEY_HASHES: `${newPlatformKey().hash},${platform.hash}`,
        WEBHOOK_ALLOW_PRIVATE: 'true',
        // A refused endpoint's deliveries stay pending for the whole test.
        WEBHOOK_RETRY_BASE_MS: '600000',
      });
      // No relay is online anywhere: every message sent stays queued.
      a = await signup(t, 'Alpha Corp');
      b = await signup(t, 'Beta LLC');
      c = await signup(t, 'Gamma GmbH');
    });
    after(() => t.stop());

    test('no credential or an unknown platform key is 401; an organization owner (token or key) is 403', async () => {
      for (const [token, status] of [
        [undefined, 401],
        ['rbx_platform_not-a-key-of-this-deployment', 401],
        ['rbx_live_not-a-key', 401],
        [a.ownerToken, 403],
        [await apiKey(t, a, 'owner'), 403],
      ] as const) {
        const res = await t.request('GET', `${path}?by=queued`, token ? { token } : {});
        assert.equal(res.status, status, `${token?.slice(0, 14)}: ${res.text}`);
        assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.equal(res.body.error, status === 401 ? 'unauthorized' : 'forbidden');
      }
    });

    test('a bad `by`, `limit` or `window` is a 400 validation_error naming it', async () => {
      for (const [query, field] of [
        ['', '/by'],
        ['by=everything', '/by'],
        ['by=queued&limit=0', '/limit'],
        ['by=queued&limit=101', '/limit'],
        ['by=queued&limit=ten', '/limit'],
        ['by=sent&window=2h', '/window'],
        ['by=queued&window=1h', '/window'],
        ['by=queued&orgId=x', '/orgId'],
      ]) {
        const res = await top(query!);
        assert.equal(res.status, 400, `${query}: ${res.text}`);
        assert.equal(res.body.error, 'validation_error', query);
        assert.ok(
          res.body.details.some((d: { path: string }) => d.path === field),
          `${query}: ${JSON.stringify(res.body.details)}`,
        );
      }
    });

    test('by=queued: the organizations with the most queued messages first, named, cut at `limit`', async () => {
      await send(a, 2);
      await send(b, 5);
      await send(c, 3);
      const res = await top('by=queued');
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.by, 'queued');
      assert.equal(res.body.unit, 'messages');
      assert.equal(res.body.window, null);
      assert.deepEqual(
        res.body.data.map((row: any) => [row.organization.id, row.organization.name, row.value, row.unit]),
        [
          [b.orgId, 'Beta LLC', 5, 'messages'],
          [c.orgId, 'Gamma GmbH', 3, 'messages'],
          [a.orgId, 'Alpha Corp', 2, 'messages'],
        ],
      );
      const two = await top('by=queued&limit=2');
      assert.deepEqual(
        two.body.data.map((row: any) => row.organization.id),
        [b.orgId, c.orgId],
      );
    });

    test('by=sent and by=failed: counted from the statistics rollups over the window', async () => {
      const now = Date.now();
      const tally = new RollupTally();
      const add = (org: Org, outcome: 'sent' | 'failed', n: number, atMs: number) => {
        for (let i = 0; i < n; i++) tally.add(org.orgId, outcome, atMs, {}, 1_000);
      };
      add(a, 'sent', 7, now);
      add(b, 'sent', 4, now - 10 * 60_000);
      add(c, 'sent', 2, now);
      // Two hours ago: outside the last hour, inside the last day.
      add(c, 'sent', 20, now - 2 * 3_600_000);
      add(b, 'failed', 3, now);
      add(c, 'failed', 1, now);
      const rollups = new MessageRollups(rollupCollection(t.app.store), createLogger('silent'));
      await rollups.write(tally);
      await rollups.settled();

      const hour = await top('by=sent');
      assert.equal(hour.status, 200, hour.text);
      assert.equal(hour.body.window, '1h');
      assert.ok(Date.parse(hour.body.from) <= now - 59 * 60_000 && Date.parse(hour.body.from) > now - 61 * 60_000);
      const rows = (res: typeof hour) => res.body.data.map((row: any) => [row.organization.name, row.value]);
      assert.deepEqual(rows(hour), [
        ['Alpha Corp', 7],
        ['Beta LLC', 4],
        ['Gamma GmbH', 2],
      ]);
      assert.deepEqual(rows(await top('by=sent&window=24h')), [
        ['Gamma GmbH', 22],
        ['Alpha Corp', 7],
        ['Beta LLC', 4],
      ]);
      // Alpha failed nothing: it is left out, not answered with 0.
      assert.deepEqual(rows(await top('by=failed&window=1h')), [
        ['Beta LLC', 3],
        ['Gamma GmbH', 1],
      ]);
    });

    test('by=webhook_lag: the organization whose oldest pending delivery waits longest first, in seconds', async () => {
      const hook = (org: Org) =>
        t
          .request('POST', '/api/v1/webhooks', {
            token: org.ownerToken,
            // Nothing listens on port 9 here: every attempt fails and is retried much later.
            body: { url: 'http://127.0.0.1:9/hook', events: ['message.queued'] },
          })
          .then((res) => assert.equal(res.status, 201, res.text));
      await hook(c);
      await hook(a);
      await send(c, 1);
      const lagOf = async () => (await top('by=webhook_lag')).body;
      await until('a delivery of Gamma pending', async () => (await lagOf()).data.length === 1, 20_000);
      await sleep(1_100);
      await send(a, 1);
      await until('a delivery of Alpha pending', async () => (await lagOf()).data.length === 2, 20_000);
      const lag = await lagOf();
      assert.equal(lag.unit, 'seconds');
      assert.deepEqual(
        lag.data.map((row: any) => row.organization.name),
        ['Gamma GmbH', 'Alpha Corp'],
      );
      assert.ok(lag.data[0].value >= lag.data[1].value + 1, JSON.stringify(lag.data));
      assert.ok(lag.data.every((row: any) => row.unit === 'seconds' && row.value >= 0 && row.value < 60));
    });
  });
});
