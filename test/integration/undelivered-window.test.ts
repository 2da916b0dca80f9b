/**
 * The organization's undelivered window: its setting (GET and PUT
 * /api/v1/organization/delivery), and a sent message its relay never
 * reports delivered marked undelivered once that window passes, at the
 * tenant's sweep, with one message.undelivered; another organization keeps
 * the default window.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';

eachBackend((backend) => {
  describe(`undelivered window (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    before(async () => {
      t = await startTestApp(backend, { TENANT_SWEEP_MS: '200' });
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });
    const call = (org: Org, method: string, path: string, body?: unknown, token = org.ownerToken) =>
      t.request(method, path, { token, body });

    test('the setting: the default until an admin sets it, bad input is a 400, a member may not set it', async () => {
      const org = await signup(t);
      const other = await signup(t);
      assert.deepEqual((await call(org, 'GET', '/api/v1/organization/delivery')).body, {
        undeliveredAfterSeconds: 600,
      });
      for (const body of [{ undeliveredAfterSeconds: 0 }, { undeliveredAfterSeconds: 604_801 }, { window: 5 }, {}]) {
        const bad = await call(org, 'PUT', '/api/v1/organization/delivery', body);
        assert.equal(bad.status, 400, JSON.stringify(body));
        assert.equal(bad.headers.get('content-type'), 'application/problem+json');
      }
      const member = await apiKey(t, org, 'member');
      const refused = await call(org, 'PUT', '/api/v1/organization/delivery', { undeliveredAfterSeconds: 60 }, member);
      assert.equal(refused.status, 403);
      const set = await call(org, 'PUT', '/api/v1/organization/delivery', { undeliveredAfterSeconds: 60 });
      assert.deepEqual([set.status, set.body], [200, { undeliveredAfterSeconds: 60 }]);
      assert.deepEqual((await call(org, 'GET', '/api/v1/organization/delivery', undefined, member)).body, {
        undeliveredAfterSeconds: 60,
      });
      assert.deepEqual((await call(other, 'GET', '/api/v1/organization/delivery')).body, {
        undeliveredAfterSeconds: 600,
      });
    });

    test('a message sent and never reported delivered is undelivered after its organization window, once', async () => {
      const short = await signup(t);
      const usual = await signup(t);
      await call(short, 'PUT', '/api/v1/organization/delivery', { undeliveredAfterSeconds: 1 });
      const sentOnly = async (org: Org) => {
        const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 10 });
        relays.push(relay);
        await relay.connect();
        const id = (await call(org, 'POST', '/api/v1/messages', { to: '+14155550100', body: 'hello' })).body
          .id as string;
        await until('handed to the relay', async () => relay.sends.some((s) => s.messageId === id), 10_000);
        await relay.report(id, 'sent');
        return { id, relay };
      };
      const a = await sentOnly(short);
      const b = await sentOnly(usual);
      const statusOf = async (org: Org, id: string) => (await call(org, 'GET', `/api/v1/messages/${id}/status`)).body;
      await until('undelivered', async () => (await statusOf(short, a.id)).undeliveredAt !== null, 10_000);
      const record = await statusOf(short, a.id);
      assert.equal(record.status, 'sent');
      assert.ok(record.checkpoints.some((c: { hop: string }) => c.hop === 'undelivered'));
      await sleep(1_000); // more sweeps
      const events = (await call(short, 'GET', '/api/v1/events?type=message.undelivered')).body.data;
      assert.deepEqual(
        events.map((e: { data: { id: string; status: string } }) => [e.data.id, e.data.status]),
        [[a.id, 'sent']],
      );
      assert.equal((await statusOf(usual, b.id)).undeliveredAt, null, 'the default window is 10 minutes');
      // Delivered later: it applies, and the record keeps when it was found undelivered.
      await a.relay.report(a.id, 'delivered');
      await until('delivered', async () => (await statusOf(short, a.id)).status === 'delivered', 10_000);
      assert.ok((await statusOf(short, a.id)).undeliveredAt);
    });
  });
});
