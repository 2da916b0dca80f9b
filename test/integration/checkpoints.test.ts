import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

eachBackend((backend) => {
  describe(`per-hop checkpoints (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    before(async () => {
      t = await startTestApp(backend);
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });
    /** Sends one message through a new relay of a new organization and reports it sent and delivered, with the agent's hops when given. */
    const throughRelay = async (hops: boolean) => {
      const org: Org = await signup(t);
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 5 });
      relays.push(relay);
      await relay.connect();
      const id = (
        await t.request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: '+14155550100', body: 'hello' },
        })
      ).body.id as string;
      await until('the send', async () => relay.sends.length > 0, 10_000);
      const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();
      const agentHops = hops
        ? [
            { hop: 'relay_received' as const, at: at(0) },
            { hop: 'handed_to_app' as const, at: at(1) },
            { hop: 'seen_in_database' as const, at: at(2) },
          ]
        : undefined;
      await new Promise((resolve) => setTimeout(resolve, 5));
      await relay.report(id, 'sent', undefined, relay.lastAttempt(id), agentHops);
      await new Promise((resolve) => setTimeout(resolve, 5));
      await relay.report(id, 'delivered', undefined, relay.lastAttempt(id), agentHops);
      return until(
        'delivered',
        async () => {
          const s = (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body;
          return s.status === 'delivered' && s;
        },
        10_000,
      );
    };

    test('a relay agent that reports its hops: every hop in order, each once', async () => {
      const status = await throughRelay(true);
      assert.deepEqual(
        status.checkpoints.map((c: { hop: string }) => c.hop),
        ['accepted', 'handed_to_relay', 'relay_received', 'handed_to_app', 'seen_in_database', 'sent', 'delivered'],
      );
      const server = status.checkpoints
        .filter((c: { hop: string }) => ['accepted', 'handed_to_relay'].includes(c.hop))
        .map((c: { at: string }) => Date.parse(c.at));
      assert.ok(server[0] <= server[1], 'accepted before handed to the relay');
      assert.equal(status.waitingFor, null);
      const metrics = (await t.request('GET', '/metrics')).text;
      for (const hop of ['handed_to_relay', 'relay_received', 'seen_in_database', 'sent', 'delivered']) {
        assert.match(metrics, new RegExp(`relaybox_message_hop_seconds_count\\{hop="${hop}"\\} [1-9]`), hop);
      }
    });

    test('a relay agent that does not report hops is still served: the hops the server saw', async () => {
      const status = await throughRelay(false);
      assert.deepEqual(
        status.checkpoints.map((c: { hop: string }) => c.hop),
        ['accepted', 'handed_to_relay', 'sent', 'delivered'],
      );
    });
  });
});
