/**
 * Test mode (docs/test-mode.md): a test key's data lives in its
 * organization's test tenant, sent by the built-in simulated relay with no
 * agent connected, each magic recipient behaving as documented; test and
 * live data never see each other (isolation on lists, ids, events,
 * webhooks, statistics, contacts and suppressions).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { magicRecipients } from '../../src/relays/simulated-relay.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';
import { verifySignature, WebhookReceiver } from '../support/webhook-receiver.ts';

async function key(t: TestApp, org: Org, mode: 'live' | 'test', role = 'admin') {
  const res = await t.request('POST', '/api/v1/api-keys', {
    token: org.ownerToken,
    body: { name: `${mode} key`, role, mode },
  });
  assert.equal(res.status, 201, res.text);
  return res.body as { id: string; key: string; mode: string; prefix: string };
}

async function send(t: TestApp, token: string, to: string, body = 'hello') {
  const res = await t.request('POST', '/api/v1/messages', { token, body: { to, body } });
  assert.equal(res.status, 201, res.text);
  return res.body as { id: string; status: string };
}

async function settledStatus(t: TestApp, token: string, id: string, want: string[]) {
  let last: any;
  await until(
    `message ${id} reaches ${want.join(' or ')}`,
    async () => {
      last = (await t.request('GET', `/api/v1/messages/${id}`, { token })).body;
      return want.includes(last?.status);
    },
    20_000,
  );
  return last;
}

eachBackend((backend) => {
  describe(`test mode (${backend})`, () => {
    let t: TestApp;
    let org: Org;
    let live: string;
    let testKey: string;
    let testReceiver: WebhookReceiver;
    let liveReceiver: WebhookReceiver;

    before(async () => {
      testReceiver = await WebhookReceiver.start();
      liveReceiver = await WebhookReceiver.start();
      t = await startTestApp(backend, { UNDELIVERED_AFTER_MS: '1500', WEBHOOK_ALLOW_PRIVATE: 'true' });
      org = await signup(t, 'Test mode org');
      live = (await key(t, org, 'live')).key;
      testKey = (await key(t, org, 'test')).key;
    });
    after(async () => {
      await t.stop();
      await testReceiver.stop();
      await liveReceiver.stop();
    });

    test('keys: rb_live_ and rb_test_, listed with their mode; a test key makes only test keys', async () => {
      assert.match(live, /^rb_live_[A-Za-z0-9_-]{43}$/);
      assert.match(testKey, /^rb_test_[A-Za-z0-9_-]{43}$/);
      const listed = await t.request('GET', '/api/v1/api-keys', { token: org.ownerToken });
      assert.equal(listed.status, 200);
      const modes = listed.body.data.map((k: { mode: string }) => k.mode).sort();
      assert.deepEqual(modes, ['live', 'test']);
      const fromTest = await t.request('GET', '/api/v1/api-keys', { token: testKey });
      assert.equal(fromTest.body.data.length, 2, 'the organization keys, whichever mode asks');
      const liveFromTest = await t.request('POST', '/api/v1/api-keys', {
        token: testKey,
        body: { name: 'x', mode: 'live' },
      });
      assert.equal(liveFromTest.status, 403);
      const me = await t.request('GET', '/api/v1/me', { token: testKey });
      assert.equal(me.body.livemode, false);
      // A member's session on test data (the dashboard's switch): the same member, the organization's members.
      const session = await t.request('GET', '/api/v1/me', {
        token: org.ownerToken,
        headers: { 'x-relaybox-mode': 'test' },
      });
      assert.equal(session.body.livemode, false);
      assert.equal(session.body.user.email, org.email);
      assert.equal(session.body.teams[0].id, me.body.teams[0].id, 'the test tenant and its default team');
      const members = await t.request('GET', '/api/v1/members', { token: testKey });
      assert.deepEqual(
        members.body.data.map((m: { email: string }) => m.email),
        [org.email],
      );
      const badMode = await t.request('GET', '/api/v1/me', {
        token: org.ownerToken,
        headers: { 'x-relaybox-mode': 'x' },
      });
      assert.equal(badMode.status, 400);
      assert.equal(me.body.organization.id, org.orgId);
      assert.equal((await t.request('GET', '/api/v1/me', { token: live })).body.livemode, true);
      const bad = await t.request('POST', '/api/v1/api-keys', {
        token: org.ownerToken,
        body: { name: 'x', mode: 'sandbox' },
      });
      assert.equal(bad.status, 400);
    });

    test('a test key cannot register a real relay', async () => {
      const me = await t.request('GET', '/api/v1/me', { token: testKey });
      assert.equal(me.status, 200);
      const res = await t.request('POST', `/api/v1/tenants/${org.orgId}_test/relay-tokens`, { token: testKey });
      assert.equal(res.status, 403, res.text);
    });

    test('a test send is delivered by the built-in relay, with no relay connected', async () => {
      const relays = await t.request('GET', '/api/v1/relays', { token: live });
      assert.deepEqual(relays.body.data, [], 'the organization has no relay');
      const sent = await send(t, testKey, '+14155550100');
      const done = await settledStatus(t, testKey, sent.id, ['delivered', 'failed']);
      assert.equal(done.status, 'delivered');
    });

    test('the built-in relay answers lookups by the magic recipients, and a send with the SMS fallback goes as SMS', async () => {
      const wakes = await send(t, testKey, magicRecipients.delivered, 'wakes the built-in relay');
      await settledStatus(t, testKey, wakes.id, ['delivered']);
      const lookup = (handle: string) =>
        t.request('GET', `/api/v1/handles/${encodeURIComponent(handle)}/availability`, { token: testKey });
      const unregistered = await lookup(magicRecipients.notRegistered);
      assert.equal(unregistered.status, 200, unregistered.text);
      assert.deepEqual([unregistered.body.imessage, unregistered.body.source], [false, 'simulator']);
      assert.equal((await lookup(magicRecipients.delivered)).body.imessage, true);
      // Live data has no relay to ask, and nothing of the test data's lookups.
      const fromLive = await t.request('GET', '/api/v1/handles/%2B15005550002/availability', { token: live });
      assert.equal(fromLive.status, 409, fromLive.text);
      const res = await t.request('POST', '/api/v1/messages', {
        token: testKey,
        body: { to: magicRecipients.notRegistered, body: 'by SMS', fallback: { sms: 'if_not_imessage' } },
      });
      assert.equal(res.status, 201, res.text);
      const done = await settledStatus(t, testKey, res.body.id, ['delivered', 'failed']);
      assert.deepEqual([done.status, done.service], ['delivered', 'SMS']);
    });

    test('magic recipients: delivered, not_registered, never delivered, STOP reply', async () => {
      const ok = await send(t, testKey, magicRecipients.delivered);
      const notRegistered = await send(t, testKey, magicRecipients.notRegistered);
      const never = await send(t, testKey, magicRecipients.undelivered);
      const stop = await send(t, testKey, magicRecipients.repliesStop);
      assert.equal((await settledStatus(t, testKey, ok.id, ['delivered', 'failed'])).status, 'delivered');
      const failed = await settledStatus(t, testKey, notRegistered.id, ['failed', 'delivered']);
      assert.equal(failed.status, 'failed');
      assert.equal(
        failed.failureReason ?? failed.reason ?? failed.lastError?.reason,
        'not_registered',
        JSON.stringify(failed),
      );
      assert.equal((await settledStatus(t, testKey, stop.id, ['delivered', 'failed'])).status, 'delivered');
      await until(
        'the undelivered window passes',
        async () => {
          const events = await t.request('GET', '/api/v1/events?type=message.undelivered', { token: testKey });
          return events.body.data?.some((e: any) => e.data.id === never.id);
        },
        20_000,
      );
      assert.equal((await t.request('GET', `/api/v1/messages/${never.id}`, { token: testKey })).body.status, 'sent');
      await until(
        'the STOP reply suppresses the recipient in test data',
        async () => {
          const res = await t.request('GET', '/api/v1/suppressions', { token: testKey });
          return res.body.data?.some((s: any) => s.handle === magicRecipients.repliesStop);
        },
        20_000,
      );
      const liveSuppressions = await t.request('GET', '/api/v1/suppressions', { token: live });
      assert.equal(liveSuppressions.status, 200);
      assert.deepEqual(liveSuppressions.body.data, [], 'live data has no suppression');
      const again = await t.request('POST', '/api/v1/messages', {
        token: testKey,
        body: { to: magicRecipients.repliesStop, body: 'again' },
      });
      assert.equal(again.status, 422, 'the opted-out test recipient is refused in test mode');
    });

    test('isolation: test and live data never see each other', async () => {
      const liveMessage = (
        await t.request('POST', '/api/v1/messages', { token: live, body: { to: '+14155550111', body: 'live' } })
      ).body;
      const testMessage = await send(t, testKey, '+14155550112', 'test');
      // By id: 404 across modes, both ways.
      assert.equal((await t.request('GET', `/api/v1/messages/${testMessage.id}`, { token: live })).status, 404);
      assert.equal((await t.request('GET', `/api/v1/messages/${liveMessage.id}`, { token: testKey })).status, 404);
      assert.equal(
        (await t.request('GET', `/api/v1/messages/${testMessage.id}`, { token: org.ownerToken })).status,
        404,
      );
      // Lists.
      const liveList = (await t.request('GET', '/api/v1/messages', { token: live })).body.data.map((m: any) => m.id);
      const testList = (await t.request('GET', '/api/v1/messages', { token: testKey })).body.data.map((m: any) => m.id);
      assert.ok(liveList.includes(liveMessage.id) && !liveList.includes(testMessage.id));
      assert.ok(testList.includes(testMessage.id) && !testList.includes(liveMessage.id));
      // Events.
      const liveEvents = (await t.request('GET', '/api/v1/events', { token: live })).body.data;
      const testEvents = (await t.request('GET', '/api/v1/events', { token: testKey })).body.data;
      assert.ok(liveEvents.every((e: any) => e.data?.id !== testMessage.id && e.livemode === true));
      assert.ok(
        testEvents.length > 0 && testEvents.every((e: any) => e.data?.id !== liveMessage.id && e.livemode === false),
      );
      // Contacts.
      const contact = await t.request('POST', '/api/v1/contacts', {
        token: testKey,
        body: { firstName: 'Test', phoneNumbers: ['+14155550113'] },
      });
      assert.equal(contact.status, 201, contact.text);
      assert.equal((await t.request('GET', `/api/v1/contacts/${contact.body.id}`, { token: live })).status, 404);
      assert.deepEqual((await t.request('GET', '/api/v1/contacts', { token: live })).body.data, []);
      // Webhooks: the test one gets the test event, signed, with livemode false; the live one never does.
      const testHook = await t.request('POST', '/api/v1/webhooks', {
        token: testKey,
        body: { url: testReceiver.url, events: ['message.delivered'], secret: 'test-mode-secret' },
      });
      assert.equal(testHook.status, 201, testHook.text);
      const liveHook = await t.request('POST', '/api/v1/webhooks', {
        token: live,
        body: { url: liveReceiver.url, events: ['message.delivered'], secret: 'live-mode-secret' },
      });
      assert.equal(liveHook.status, 201, liveHook.text);
      assert.equal((await t.request('GET', `/api/v1/webhooks/${testHook.body.id}`, { token: live })).status, 404);
      assert.equal((await t.request('GET', `/api/v1/webhooks/${liveHook.body.id}`, { token: testKey })).status, 404);
      const hooked = await send(t, testKey, magicRecipients.delivered, 'hooked');
      const [delivery] = await testReceiver.waitFor(1, 20_000);
      const payload = verifySignature(delivery!, 'test-mode-secret');
      assert.equal(payload.livemode, false);
      assert.equal(payload.event, 'message.delivered');
      assert.equal(payload.data.id, hooked.id);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(liveReceiver.received.length, 0, 'the live webhook hears nothing of test data');
      // Statistics: the live organization counts its one send, never the test ones.
      const totals = async (token: string) => {
        const buckets = (await t.request('GET', '/api/v1/stats/messages', { token })).body.buckets as any[];
        return buckets.reduce(
          (sum, b) => ({ accepted: sum.accepted + b.accepted, received: sum.received + b.received }),
          { accepted: 0, received: 0 },
        );
      };
      assert.deepEqual(await totals(live), { accepted: 1, received: 0 }, 'live counts its one send only');
      const testTotals = await totals(testKey);
      assert.ok(testTotals.accepted >= 7 && testTotals.received === 1, JSON.stringify(testTotals));
      // Relays: the built-in one is test data.
      const testRelays = (await t.request('GET', '/api/v1/relays', { token: testKey })).body.data;
      assert.equal(testRelays.length, 1);
      assert.deepEqual((await t.request('GET', '/api/v1/relays', { token: live })).body.data, []);
    });
  });
});

/** Waits until the send waits in the queue for `reason`. */
async function heldBy(t: TestApp, token: string, id: string, reason: string) {
  let last: any;
  await until(
    `the send held by ${reason}`,
    async () =>
      (last = (await t.request('GET', `/api/v1/messages/${id}/status`, { token })).body).waitingFor === reason,
    10_000,
  ).catch((err) => {
    throw new Error(`${err.message}: ${JSON.stringify(last)}`);
  });
  assert.equal(last.status, 'queued');
}

describe("test data's pace", () => {
  /** A quiet window around now, in UTC (the zone of numbers the table does not place, as the magic recipients). */
  const hhmm = (offsetHours: number) => new Date(Date.now() + offsetHours * 3_600_000).toISOString().slice(11, 16);
  let t: TestApp;
  let testKey: string;
  before(async () => {
    t = await startTestApp('embedded', { PACING_QUIET_HOURS: `${hhmm(-1)}-${hhmm(2)}`, PACING_UNANSWERED_CAP: '2' });
    testKey = (await key(t, await signup(t, 'Night org'), 'test')).key;
  });
  after(() => t.stop());

  test('a test send is delivered whatever the hour; quiet hours a test key sets hold test sends as live ones', async () => {
    const sent = await send(t, testKey, magicRecipients.delivered);
    assert.equal((await settledStatus(t, testKey, sent.id, ['delivered', 'failed'])).status, 'delivered');
    const set = await t.request('PUT', '/api/v1/organization/pacing', {
      token: testKey,
      body: { quietHours: { start: hhmm(-1), end: hhmm(2) } },
    });
    assert.equal(set.status, 200, set.text);
    const held = await send(t, testKey, '+15005550099', 'at night');
    await heldBy(t, testKey, held.id, 'quiet_hours');
  });

  test('a magic recipient who never replies takes more than the unanswered cap; a cap a test key sets holds as a live one', async () => {
    // The test above left quiet hours set; unset, the cap is the default's again.
    const reset = await t.request('PUT', '/api/v1/organization/pacing', {
      token: testKey,
      body: { quietHours: false },
    });
    assert.equal(reset.status, 200, reset.text);
    const sends = [];
    for (let i = 0; i < 4; i++) sends.push(await send(t, testKey, magicRecipients.delivered, `test ${i}`));
    for (const s of sends)
      assert.equal((await settledStatus(t, testKey, s.id, ['delivered', 'failed'])).status, 'delivered');
    const set = await t.request('PUT', '/api/v1/organization/pacing', {
      token: testKey,
      body: { quietHours: false, unansweredCap: 3 },
    });
    assert.equal(set.status, 200, set.text);
    const held = await send(t, testKey, magicRecipients.delivered, 'one too many');
    await heldBy(t, testKey, held.id, 'unanswered_cap');
  });
});
