import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { relayProtocol } from '../../src/actors/relay/protocol.ts';
import { actorClient } from '../../src/runtime/actor.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { waitFor } from './runtime-contract.ts';

eachBackend((backend) => {
  describe(`send attempts (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    before(async () => {
      // Actors idle out within a second, so the sends here also cross their activations.
      t = await startTestApp(backend, { MESSAGE_RETRY_BASE_MS: '40', MESSAGE_MAX_ATTEMPTS: '3', ACTOR_IDLE_MS: '800' });
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });
    /** A stand-in relay of the organization, connected, closed after the suite. */
    const connected = async (org: Org, capacity: number) => {
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity });
      relays.push(relay);
      await relay.connect();
      return relay;
    };

    test('each send frame carries its attempt; a late status of an earlier attempt neither settles the retry nor frees its credit', async () => {
      const org = await signup(t);
      const relay = await connected(org, 1);
      const statusOf = async (id: string) =>
        (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body;
      const post = async (body: string) =>
        (await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to: '+14155550100', body } }))
          .body.id as string;
      const id = await post('first');
      await waitFor(() => relay.sends.length === 1, 15_000, 'attempt 1 sent');
      assert.deepEqual([relay.sends[0]!.messageId, relay.sends[0]!.attempt], [id, 1]);

      await relay.report(id, 'failed', 'Messages reported error 1', 1);
      await waitFor(() => relay.sends.some((s) => s.messageId === id && s.attempt === 2), 15_000, 'attempt 2 sent');
      const waiting = await post('second');

      // The agent re-sends attempt 1's statuses after a reconnect: they change nothing now.
      await relay.report(id, 'failed', 'Messages reported error 1', 1);
      await relay.report(id, 'sent', undefined, 1);
      await relay.report(id, 'delivered', undefined, 1);
      await sleep(300);
      const during = await statusOf(id);
      assert.deepEqual([during.status, during.attempts], ['processing', 2], 'attempt 2 still in flight');
      assert.equal(relay.sends.length, 2, 'no credit freed: the second message waits and attempt 3 was not started');

      await relay.report(id, 'sent');
      await relay.report(id, 'delivered');
      await waitFor(async () => (await statusOf(id)).status === 'delivered', 3_000, 'attempt 2 delivered');
      assert.equal((await statusOf(id)).attempts, 2);
      await waitFor(
        () => relay.sends.some((s) => s.messageId === waiting),
        3_000,
        'the credit came back with attempt 2',
      );
      assert.equal(relay.sends.find((s) => s.messageId === waiting)!.attempt, 1);
    });

    test('a message handed back by a relay that went away keeps its attempt number, so the agent can recognise it', async () => {
      const org = await signup(t);
      const relay = await connected(org, 2);
      const id = (
        await t.request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: '+14155550100', body: 'hello' },
        })
      ).body.id as string;
      await waitFor(() => relay.sends.length === 1, 5_000, 'sent');
      await relay.disconnect('socket closed');
      await waitFor(
        async () =>
          (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body.status === 'queued',
        3_000,
        'handed back',
      );
      await relay.connect();
      await waitFor(() => relay.sends.length === 2, 5_000, 'sent again after the reconnect');
      assert.deepEqual(
        relay.sends.map((s) => [s.messageId, s.attempt]),
        [
          [id, 1],
          [id, 1],
        ],
        'the same attempt, not a retry',
      );
      await relay.report(id, 'delivered');
      await waitFor(
        async () =>
          (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body.status ===
          'delivered',
        3_000,
        'delivered',
      );
    });

    test('activated again, the relay actor reads its sends in flight from the store: they keep their credit until reported', async () => {
      const org = await signup(t);
      const relay = await connected(org, 1);
      const post = async (body: string) =>
        (await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to: '+14155550100', body } }))
          .body.id as string;
      const first = await post('before the actors idle out');
      await waitFor(() => relay.sends.some((s) => s.messageId === first), 5_000, 'first dispatched');
      await waitFor(() => t.app.runtime.liveStates() === 0, 10_000, 'every actor state dropped');

      const second = await post('after');
      await sleep(800);
      assert.ok(
        !relay.sends.some((s) => s.messageId === second),
        'capacity 1 is still taken by the first send, as the store says',
      );
      assert.equal(relay.sends.length, 1, 'nothing sent twice');

      await relay.report(first, 'delivered');
      await waitFor(
        () => relay.sends.some((s) => s.messageId === second),
        5_000,
        'the credit came back with the report',
      );
      await relay.report(second, 'delivered');
      await waitFor(
        async () =>
          (await t.request('GET', `/api/v1/messages/${second}/status`, { token: org.ownerToken })).body.status ===
          'delivered',
        5_000,
        'second delivered',
      );
      assert.deepEqual(
        relay.sends.map((s) => s.messageId),
        [first, second],
      );
    });

    test('a hand-over for a session no longer online claims nothing; its message goes back to the queue and is sent once', async () => {
      const org = await signup(t);
      const relay = await connected(org, 0);
      const id = (
        await t.request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: '+14155550100', body: 'late hand-over' },
        })
      ).body.id as string;
      await actorClient(t.app.runtime, relayProtocol).send(relay.id, {
        kind: 'deliver',
        tenantId: org.orgId,
        session: relay.session - 1,
        epoch: 'an-earlier-join',
        items: [{ id, priority: 5, fromNumber: null }],
      });
      await sleep(500);
      const status = async () =>
        (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body;
      assert.deepEqual(
        [(await status()).status, (await status()).attempts, relay.sends.length],
        ['queued', 0, 0],
        'not claimed, not sent',
      );

      await relay.ready(1);
      await waitFor(() => relay.sends.length === 1, 5_000, 'sent once the relay grants a credit');
      await sleep(300);
      assert.deepEqual(
        relay.sends.map((s) => [s.messageId, s.attempt]),
        [[id, 1]],
        'once, though it was in the queue twice',
      );
    });
  });
});
