import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { register } from 'prom-client';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RelayDoc } from '../../src/relays/relay-store.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { waitFor } from './runtime-contract.ts';

/** Actor messages handled so far in this process, by actor type. */
async function handledBy(type: string): Promise<number> {
  const metric = await register.getSingleMetric('relaybox_runtime_messages_handled_total')!.get();
  return metric.values.filter((v) => v.labels.type === type).reduce((sum, v) => sum + v.value, 0);
}

eachBackend((backend) => {
  describe(`relay actor (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];

    before(async () => {
      // A sweep that never comes during a test: every tenant message counted below comes from the relays.
      t = await startTestApp(backend, {
        RELAY_HEARTBEAT_TIMEOUT_MS: '4000',
        RELAY_HEARTBEAT_INTERVAL_MS: '500',
        TENANT_SWEEP_MS: '600000',
      });
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });

    const relayDoc = (orgId: string, id: string) =>
      t.app.store.collection<RelayDoc>('relays').findOne({ tenantId: orgId }, { id });
    const relayEvents = async (orgId: string, group: string) => {
      const read = await t.app.events.read(group, 'test', 1_000);
      return read.map((r) => r.event).filter((e) => e.tenantId === orgId && e.event.startsWith('relay.'));
    };

    test('many relays heartbeating put no work on the tenant actor; each heartbeat lands on its own relay', async (tc) => {
      const org = await signup(t);
      const fleet = Array.from({ length: 50 }, () => new StandInRelay(t, org.orgId, org.teamId, { capacity: 2 }));
      relays.push(...fleet);
      const tenantStart = await handledBy('tenant');
      // On a loaded machine connecting 50 relays can take longer than the heartbeat timeout: every relay keeps
      // heartbeating throughout, so none goes offline (which would rightly tell the tenant actor).
      let connected: StandInRelay[] = [];
      const keepAlive = setInterval(
        () => void Promise.all(connected.map((r) => r.heartbeat())).catch(() => undefined),
        1_000,
      );
      tc.after(() => clearInterval(keepAlive));
      for (const r of fleet) {
        await r.connect();
        connected = [...connected, r];
      }
      // Each connect tells the tenant actor twice (relay-online, then the grant of its capacity): let those settle first.
      await waitFor(
        async () => (await handledBy('tenant')) - tenantStart >= fleet.length * 2,
        20_000,
        'arrivals handled',
      );
      const tenantBefore = await handledBy('tenant');
      const relayBefore = await handledBy('relay');
      const rounds = 4;
      for (let round = 0; round < rounds; round++) await Promise.all(fleet.map((r) => r.heartbeat()));
      await waitFor(
        async () => (await handledBy('relay')) - relayBefore >= fleet.length * rounds,
        20_000,
        'every heartbeat handled',
      );
      await sleep(200);
      console.log(
        `heartbeats: ${fleet.length * rounds} handled by relay actors, ${(await handledBy('tenant')) - tenantBefore} tenant messages meanwhile`,
      );
      assert.equal((await handledBy('tenant')) - tenantBefore, 0, 'no tenant message per heartbeat');
      clearInterval(keepAlive);
      const doc = await relayDoc(org.orgId, fleet[0]!.id);
      assert.equal(doc?.status, 'online');
      assert.ok(doc?.health, 'health recorded');
    });

    test('a silent relay goes offline at its heartbeat timeout, once, with one relay.offline event', async () => {
      const org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
      relays.push(relay);
      await relay.connect();
      await waitFor(
        async () => (await relayDoc(org.orgId, relay.id))?.status === 'offline',
        15_000,
        'offline after the timeout',
      );
      await sleep(1_000); // a second check would have fired by now
      const events = await relayEvents(org.orgId, `g-${org.orgId}`);
      assert.deepEqual(
        events.map((e) => e.event),
        ['relay.online', 'relay.offline'],
      );
    });

    test('a heartbeat keeps a relay online past the timeout; a stale session changes nothing', async () => {
      const org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
      relays.push(relay);
      await relay.connect();
      const first = relay.session;
      await relay.connect(); // a reconnect: a new session
      assert.equal(relay.session, first + 1);
      for (let i = 0; i < 12; i++) {
        await relay.heartbeat();
        await sleep(400);
      }
      const doc = await relayDoc(org.orgId, relay.id);
      assert.equal(doc?.status, 'online', 'still online after 4.8 s with a 4 s timeout');
      relay.session = first;
      await relay.disconnect('old socket closed');
      await sleep(300);
      assert.equal((await relayDoc(org.orgId, relay.id))?.status, 'online', 'the old session cannot take it offline');
    });
  });
});
