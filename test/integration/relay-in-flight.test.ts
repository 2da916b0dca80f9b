import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { relayProtocol } from '../../src/actors/relay.actor.ts';
import { actorClient } from '../../src/runtime/actor.ts';
import { sleep } from '../../src/runtime/actor-host.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { waitFor } from './runtime-contract.ts';

eachBackend((backend) => {
  describe(`a relay's sends in flight, kept by its relay actor (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    before(async () => {
      // Actors idle out within a second; the relay's heartbeat timeout and the tenant's sweep are far away.
      t = await startTestApp(backend, { ACTOR_IDLE_MS: '800', RELAY_HEARTBEAT_TIMEOUT_MS: '120000', RELAY_HEARTBEAT_INTERVAL_MS: '60000', TENANT_SWEEP_MS: '600000' });
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });

    test('activated again, the relay actor reads its sends in flight from the store: they keep their credit until reported', async () => {
      const org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
      relays.push(relay);
      await relay.connect();
      const post = async (body: string) => (await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to: '+14155550100', body } })).body.id as string;
      const first = await post('before the actors idle out');
      await waitFor(() => relay.sends.some((s) => s.messageId === first), 5_000, 'first dispatched');
      await waitFor(() => t.app.runtime.liveStates() === 0, 10_000, 'every actor state dropped');

      const second = await post('after');
      await sleep(800);
      assert.ok(!relay.sends.some((s) => s.messageId === second), 'capacity 1 is still taken by the first send, as the store says');
      assert.equal(relay.sends.length, 1, 'nothing sent twice');

      await relay.report(first, 'delivered');
      await waitFor(() => relay.sends.some((s) => s.messageId === second), 5_000, 'the credit came back with the report');
      await relay.report(second, 'delivered');
      await waitFor(async () => (await t.request('GET', `/api/v1/messages/${second}/status`, { token: org.ownerToken })).body.status === 'delivered', 5_000, 'second delivered');
      assert.deepEqual(relay.sends.map((s) => s.messageId), [first, second]);
    });

    test('a hand-over for a session no longer online claims nothing; its message goes back to the queue and is sent once', async () => {
      const org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 0 });
      relays.push(relay);
      await relay.connect();
      const id = (await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to: '+14155550100', body: 'late hand-over' } })).body.id as string;
      await actorClient(t.app.runtime, relayProtocol).send(relay.id, {
        kind: 'deliver', tenantId: org.orgId, session: relay.session - 1, epoch: 'an-earlier-join', items: [{ id, priority: 5, fromNumber: null }],
      });
      await sleep(500);
      const status = async () => (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body;
      assert.deepEqual([(await status()).status, (await status()).attempts, relay.sends.length], ['queued', 0, 0], 'not claimed, not sent');

      await relay.ready(1);
      await waitFor(() => relay.sends.length === 1, 5_000, 'sent once the relay grants a credit');
      await sleep(300);
      assert.deepEqual(relay.sends.map((s) => [s.messageId, s.attempt]), [[id, 1]], 'once, though it was in the queue twice');
    });
  });
});
