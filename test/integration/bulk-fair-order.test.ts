/**
 * One organization's bulk job does not hold back a single send: while a job
 * drains through its organization's relay, another organization's single send
 * is handed to its relay ahead of most of the job's remaining messages, and so
 * is a single send of the job's own organization (its queue serves its
 * sources in turn). The test asserts the order of the hand-outs, never a time:
 * every hand-out of both relays is recorded as it happens, in one sequence.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { waitFor } from './runtime-contract.ts';

const jobSize = 600;
/** The job's relay: a small window, so the job drains over many hand-outs. */
const jobRelayCapacity = 10;

eachBackend((backend) => {
  describe(`a bulk job and single sends, in order (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    /** Every hand-out of every relay, in the order they came: [relayId, messageId]. */
    const handed: Array<[string, string]> = [];
    let unsubscribe = () => {};
    let reporting = true;

    before(async () => {
      // Stand-in relays do not heartbeat: a slow backend must not take them offline in the middle of the test.
      t = await startTestApp(backend, { RELAY_HEARTBEAT_TIMEOUT_MS: '600000' });
      unsubscribe = t.app.messaging.link.onFrame((d) => {
        if (d.frame.type === 'send') handed.push([d.relayId, d.frame.messageId]);
      });
    });
    after(async () => {
      reporting = false;
      unsubscribe();
      for (const r of relays) r.close();
      await t.stop();
    });

    /** A relay that reports each message it is given as sent, as a real one would once Messages took it. */
    const drainingRelay = async (org: Org, capacity: number) => {
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity });
      relays.push(relay);
      await relay.connect();
      const reported = new Set<string>();
      void (async () => {
        while (reporting) {
          const fresh = relay.sends.filter((s) => !reported.has(s.messageId));
          for (const s of fresh) reported.add(s.messageId);
          await Promise.all(fresh.map((s) => relay.report(s.messageId, 'sent')));
          await sleep(fresh.length ? 0 : 10);
        }
      })();
      return relay;
    };
    const send = async (org: Org, to: string) => {
      const res = await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to, body: 'single' } });
      assert.equal(res.status, 201, res.text);
      return res.body.id as string;
    };
    const handedTo = (relay: StandInRelay) => handed.filter(([r]) => r === relay.id).map(([, m]) => m);

    test(`another organization's single send, and the job's own organization's, are handed out ahead of most of a ${jobSize}-message job's rest`, async () => {
      const busy = await signup(t, 'Busy');
      const other = await signup(t, 'Other');
      const busyRelay = await drainingRelay(busy, jobRelayCapacity);
      const otherRelay = await drainingRelay(other, 5);

      const messages = Array.from({ length: jobSize }, (_, i) => ({
        to: `+1415555${String(i).padStart(4, '0')}`,
        body: `job ${i}`,
      }));
      const job = await t.request('POST', '/api/v1/messages/bulk', { token: busy.ownerToken, body: { messages } });
      assert.equal(job.status, 201, job.text);
      await waitFor(() => handedTo(busyRelay).length >= 50, 60_000, "the job's first 50 hand-outs");

      // Another organization's single send, while the job drains.
      const jobLeftAtOtherSend = jobSize - handedTo(busyRelay).length;
      const otherId = await send(other, '+14155550999');
      await waitFor(() => handedTo(otherRelay).includes(otherId), 60_000, "the other organization's send");
      const jobLeftAtOtherHandout = jobSize - handedTo(busyRelay).length;

      // The busy organization's own single send, while its job drains.
      const jobLeftAtOwnSend = jobSize - handedTo(busyRelay).length;
      const ownId = await send(busy, '+14155551999');
      await waitFor(() => handedTo(busyRelay).includes(ownId), 60_000, "the busy organization's own send");
      const beforeOwn = handedTo(busyRelay).indexOf(ownId);
      const jobLeftAtOwnHandout = jobSize - beforeOwn;

      await waitFor(() => handedTo(busyRelay).length >= jobSize + 1, 300_000, 'the whole job');
      const report = `job left: at the other's send ${jobLeftAtOtherSend}, at its hand-out ${jobLeftAtOtherHandout}; at the own send ${jobLeftAtOwnSend}, at its hand-out ${jobLeftAtOwnHandout}`;
      console.log(`# ${backend}: ${report}`);

      assert.ok(
        jobLeftAtOtherHandout >= jobLeftAtOtherSend / 2,
        `the other organization's send is handed out ahead of most of the job's rest (${report})`,
      );
      assert.ok(
        jobLeftAtOwnHandout >= jobLeftAtOwnSend / 2,
        `the busy organization's own single send is handed out ahead of most of its job's rest (${report})`,
      );
      // Nothing lost or doubled: each of the job's messages and each single send handed out once, to its own relay.
      assert.equal(new Set(handedTo(busyRelay)).size, jobSize + 1);
      assert.equal(handedTo(busyRelay).length, jobSize + 1);
      assert.deepEqual(handedTo(otherRelay), [otherId]);
    });
  });
});
