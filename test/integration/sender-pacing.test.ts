import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

eachBackend((backend) => {
  describe(`sender pacing (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    /** When each send frame went out, by message id. */
    const sentAt = new Map<string, number>();
    let unsubscribe: () => void;
    before(async () => {
      // The product's defaults: 1 a second with a burst of 3, 50 new contacts a day.
      t = await startTestApp(backend, { PACING_PER_SECOND: '1', PACING_BURST: '3', PACING_NEW_CONTACTS_PER_DAY: '50' });
      unsubscribe = t.app.messaging.link.onFrame((d) => {
        if (d.frame.type === 'send' && !sentAt.has(d.frame.messageId)) sentAt.set(d.frame.messageId, Date.now());
      });
    });
    after(async () => {
      unsubscribe();
      for (const r of relays) r.close();
      await t.stop();
    });
    const connected = async (org: Org, phoneNumbers: string[] = []) => {
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 500, phoneNumbers });
      relays.push(relay);
      await relay.connect();
      return relay;
    };
    const send = async (org: Org, body: Record<string, unknown>) => {
      const res = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { body: 'hello', ...body },
      });
      assert.equal(res.status, 201, res.text);
      return res.body.id as string;
    };
    const statusOf = async (org: Org, id: string) =>
      (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body;
    /** The message's status once it says it waits for `reason`. */
    const heldFor = (org: Org, id: string, reason: string) =>
      until(
        `${id} held for ${reason}`,
        async () => {
          const s = await statusOf(org, id);
          return s.waitingFor === reason && s;
        },
        5_000,
      );
    const recipient = (i: number) => `+1415555${String(i).padStart(4, '0')}`;

    test('a line sends no faster than its rate over a 10-second window; a held message says why and until when', async () => {
      const org = await signup(t);
      const relay = await connected(org);
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push(await send(org, { to: recipient(i) }));
      const first = await until('the first send', async () => relay.sends.length > 0 && Date.now());
      const held = await until("a message held by the line's rate", async () => {
        for (const id of ids) {
          const s = await statusOf(org, id);
          if (s.status === 'queued' && s.waitingFor === 'line_rate') return s;
        }
        return false;
      });
      assert.ok(
        Date.parse(held.notBefore) > Date.now() - 1_000 && Date.parse(held.notBefore) < Date.now() + 2_000,
        `notBefore ${held.notBefore}`,
      );
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, first + 10_500 - Date.now())));
      const times = ids
        .map((id) => sentAt.get(id))
        .filter((at): at is number => at !== undefined)
        .sort((a, b) => a - b);
      // A burst of 3, then 1 a second: at most 13 in any 10 s, and the line kept sending.
      for (const from of times)
        assert.ok(
          times.filter((at) => at >= from && at < from + 10_000).length <= 13,
          `sends in 10 s from ${from}: ${times.map((at) => at - times[0]!)}`,
        );
      assert.ok(times.length >= 11, `only ${times.length} sent in 10.5 s`);
      assert.ok(times.length < 20, 'not all at once');
    });

    test("higher priority still goes first within a paced line's allowance", async () => {
      const org = await signup(t);
      assert.equal(
        (
          await t.request('PUT', '/api/v1/organization/pacing', {
            token: org.ownerToken,
            body: { perSecond: 2, burst: 1 },
          })
        ).status,
        200,
      );
      const relay = await connected(org);
      const low: string[] = [];
      for (let i = 0; i < 6; i++) low.push(await send(org, { to: recipient(100 + i) }));
      await until('the first send', async () => relay.sends.length > 0);
      const urgent = await send(org, { to: recipient(200), priority: 50 });
      await until('the urgent send', async () => relay.sends.some((s) => s.messageId === urgent), 5_000);
      const order = relay.sends.map((s) => s.messageId);
      assert.ok(order.indexOf(urgent) <= 2, `the urgent message went out at ${order.indexOf(urgent)}: ${order}`);
      assert.ok(order.length < 6, 'the low-priority backlog was still waiting');
    });

    test("the 51st new contact of a day waits while known contacts keep flowing; a number's own cap and its usage", async () => {
      const org = await signup(t);
      // Fast enough that only the new-contact cap holds anything back.
      await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 1000, burst: 1000 },
      });
      const relay = await connected(org);
      const firsts: string[] = [];
      for (let i = 0; i < 50; i++) firsts.push(await send(org, { to: recipient(300 + i) }));
      await until('50 new contacts sent', async () => relay.sends.length >= 50, 10_000);
      const fiftyFirst = await send(org, { to: recipient(399) });
      const known = [await send(org, { to: recipient(300) }), await send(org, { to: recipient(349) })];
      await until(
        'known contacts sent',
        async () => known.every((id) => relay.sends.some((s) => s.messageId === id)),
        5_000,
      );
      const held = await statusOf(org, fiftyFirst);
      assert.equal(held.status, 'queued');
      assert.equal(held.waitingFor, 'new_contact_cap');
      const day = 24 * 3600 * 1000;
      assert.ok(
        Math.abs(Date.parse(held.notBefore) - (sentAt.get(firsts[0]!)! + day)) < 5_000,
        `notBefore ${held.notBefore}: the first new contact's time plus a day`,
      );
      assert.ok(!relay.sends.some((s) => s.messageId === fiftyFirst));

      // A number of its own, capped at 1 new contact a day over the organization's 50.
      const number = '+14155559000';
      const registered = await t.request('POST', '/api/v1/phone-numbers', { token: org.ownerToken, body: { number } });
      const put = await t.request('PUT', `/api/v1/phone-numbers/${registered.body.id}`, {
        token: org.ownerToken,
        body: { pacing: { newContactsPerDay: 1 } },
      });
      assert.equal(put.status, 200, put.text);
      assert.deepEqual(put.body.pacing, { newContactsPerDay: 1 });
      const owner = await connected(org, [number]);
      const a = await send(org, { to: recipient(500), fromNumber: number });
      const b = await send(org, { to: recipient(501), fromNumber: number });
      await until("the number's first new contact", async () => owner.sends.some((s) => s.messageId === a), 5_000);
      // b reaches the dispatch in its own accept batch, which may come after a's send.
      await until(
        "the number's second new contact held",
        async () => (await statusOf(org, b)).waitingFor === 'new_contact_cap',
        5_000,
      );
      assert.ok(!owner.sends.some((s) => s.messageId === b));
      const usage = await t.request('GET', `/api/v1/phone-numbers/${registered.body.id}/usage`, {
        token: org.ownerToken,
      });
      assert.equal(usage.status, 200, usage.text);
      assert.equal(usage.body.number, number);
      const { perSecond, burst, newContactsPerDay } = usage.body.pace;
      assert.deepEqual({ perSecond, burst, newContactsPerDay }, { perSecond: 1000, burst: 1000, newContactsPerDay: 1 });
      assert.equal(usage.body.newContactsToday, 1);
      assert.equal(usage.body.sentLastMinute, 1);
      assert.ok(Date.parse(usage.body.nextNewContactSlotAt) > Date.now() + day - 60_000);
      assert.ok(Date.parse(usage.body.nextSlotAt) <= Date.now() + 1_000);

      // A line that may write to no new contact has no next new-contact slot: the latest date there is, not a 500.
      await t.request('PUT', `/api/v1/phone-numbers/${registered.body.id}`, {
        token: org.ownerToken,
        body: { pacing: { perSecond: 1000, burst: 1000, newContactsPerDay: 0 } },
      });
      const never = await t.request('GET', `/api/v1/phone-numbers/${registered.body.id}/usage`, {
        token: org.ownerToken,
      });
      assert.equal(never.status, 200, never.text);
      assert.equal(never.body.nextNewContactSlotAt, '9999-12-31T23:59:59.999Z');
    });

    test("a paced bulk job's estimatedCompletionAt is within 10 % of when its last message went out", async () => {
      const org = await signup(t);
      // A burst that covers the wake-up of the dispatch's pace timer (up to RUNTIME_TIMER_POLL_MS late on Redis) at this fast pace.
      await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 20, burst: 10, newContactsPerDay: 1000 },
      });
      const relay = await connected(org);
      const job = await t.request('POST', '/api/v1/messages/bulk', {
        token: org.ownerToken,
        body: { messages: Array.from({ length: 150 }, (_, i) => ({ to: recipient(600 + i), body: 'hello' })) },
      });
      assert.equal(job.status, 201, job.text);
      const jobId = job.body.jobId as string;
      await until('the job under way', async () => relay.sends.length >= 10, 10_000);
      const askedAt = Date.now();
      const detail = await t.request('GET', `/api/v1/messages/bulk/${jobId}`, { token: org.ownerToken });
      const eta = Date.parse(detail.body.estimatedCompletionAt);
      await until('every message sent', async () => relay.sends.length >= 150, 30_000);
      const lastSent = Math.max(...relay.sends.map((s) => sentAt.get(s.messageId)!));
      const real = lastSent - askedAt;
      assert.ok(Math.abs(eta - lastSent) <= real * 0.1, `estimated ${eta - askedAt} ms from the read, real ${real} ms`);
    });

    test("a scheduled job's estimatedCompletionAt is its start plus its lines' pace, and the days its new recipients need", async () => {
      const org = await signup(t);
      await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 2, burst: 4, newContactsPerDay: 1000 },
      });
      await connected(org);
      const start = Date.now() + 3600_000;
      const scheduled = async (count: number) => {
        const job = await t.request('POST', '/api/v1/messages/bulk', {
          token: org.ownerToken,
          body: {
            scheduledAt: new Date(start).toISOString(),
            messages: Array.from({ length: count }, (_, i) => ({ to: recipient(700 + i), body: 'later' })),
          },
        });
        assert.equal(job.status, 201, job.text);
        const detail = await t.request('GET', `/api/v1/messages/bulk/${job.body.jobId}`, { token: org.ownerToken });
        assert.equal(detail.body.status, 'scheduled');
        return Date.parse(detail.body.estimatedCompletionAt) - start;
      };
      // 4 at once, then 2 a second (once the dispatch has the relay online).
      let paced = 0;
      await until(
        'an estimate from the pace',
        async () => {
          paced = await scheduled(44);
          return Math.abs(paced - 20_000) <= 1_000;
        },
        5_000,
      ).catch(() => assert.fail(`${paced} ms after its start`));
      await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 2, burst: 4, newContactsPerDay: 20 },
      });
      // 20 new recipients today, 20 more a day later, the last 4 a day after that.
      const capped = await until(
        'the new cap applied',
        async () => {
          const after = await scheduled(44);
          return after > 24 * 3600_000 && after;
        },
        5_000,
      );
      assert.ok(Math.abs(capped - 2 * 24 * 3600_000) <= 60_000, `${capped} ms after its start`);
    });

    test('the 6th message to a recipient who never replied waits for their reply; a reply lifts it and opens 24 h outside the caps', async () => {
      const org = await signup(t);
      await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 1000, burst: 1000, unansweredCap: 5 },
      });
      const number = '+14155559100';
      const registered = await t.request('POST', '/api/v1/phone-numbers', { token: org.ownerToken, body: { number } });
      await t.request('PUT', `/api/v1/phone-numbers/${registered.body.id}`, {
        token: org.ownerToken,
        body: { pacing: { newContactsPerDay: 1 } },
      });
      const relay = await connected(org, [number]);
      const silent = recipient(800);
      const stranger = recipient(802);
      const sentTo = (id: string) => relay.sends.some((s) => s.messageId === id);
      const five: string[] = [];
      for (let i = 0; i < 5; i++) five.push(await send(org, { to: silent, fromNumber: number }));
      await until('five messages to the silent recipient', async () => five.every(sentTo), 10_000);
      const sixth = await send(org, { to: silent, fromNumber: number });
      const held = await heldFor(org, sixth, 'unanswered_cap');
      assert.equal(held.status, 'queued');
      assert.equal(held.notBefore, null, 'it waits for a reply, not for a time');
      const toStranger = await send(org, { to: stranger, fromNumber: number });
      await until(
        'a new contact past the cap held',
        async () => (await statusOf(org, toStranger)).waitingFor === 'new_contact_cap',
        5_000,
      );
      const usage = async () =>
        (await t.request('GET', `/api/v1/phone-numbers/${registered.body.id}/usage`, { token: org.ownerToken })).body;
      const before = await usage();
      assert.equal(before.awaitingReply, 1);
      assert.equal(before.followUpsToday, 1, 'the 2nd to 5th message followed up one recipient');
      assert.equal(before.pace.unansweredCap, 5);
      // Its health over the recipients it first wrote to in the last 7 days: the silent one, who has not replied.
      assert.deepEqual(before.health, {
        windowDays: 7,
        recipients: 1,
        replied: 0,
        unanswered: 1,
        replyRate: 0,
        unansweredShare: 1,
      });
      assert.ok(Date.parse(before.nextFollowUpSlotAt) <= Date.now() + 1_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.ok(!sentTo(sixth), 'still held');

      // Their reply: the 6th goes, and for 24 h the line writes to them outside its caps.
      await relay.inbound(silent, 'who is this?');
      await until('the 6th sent after the reply', async () => sentTo(sixth), 10_000);
      const more: string[] = [];
      for (let i = 0; i < 6; i++) more.push(await send(org, { to: silent, fromNumber: number }));
      await until('six more within the reply window', async () => more.every(sentTo), 10_000);
      // A stranger who writes first is exempt from the new-contact cap too.
      assert.ok(!sentTo(toStranger));
      await relay.inbound(stranger, 'hello?');
      await until('the stranger answered', async () => sentTo(toStranger), 10_000);
      const after = await usage();
      assert.equal(after.awaitingReply, 0);
      assert.equal(after.newContactsToday, 1, 'the stranger who wrote first is not counted');
      // The silent one replied; the stranger wrote before the line's first message to them, not since.
      assert.deepEqual(after.health, {
        windowDays: 7,
        recipients: 2,
        replied: 1,
        unanswered: 0,
        replyRate: 0.5,
        unansweredShare: 0,
      });
    });

    test('follow-ups to silent recipients are capped per line and day; the next waits for the oldest to be a day old', async () => {
      const org = await signup(t);
      await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 1000, burst: 1000, followUpsPerDay: 1 },
      });
      const number = '+14155559400';
      const registered = await t.request('POST', '/api/v1/phone-numbers', { token: org.ownerToken, body: { number } });
      const relay = await connected(org, [number]);
      const sentTo = (id: string) => relay.sends.some((s) => s.messageId === id);
      const firsts = [
        await send(org, { to: recipient(900), fromNumber: number }),
        await send(org, { to: recipient(901), fromNumber: number }),
      ];
      await until('the first messages sent', async () => firsts.every(sentTo), 10_000);
      const followUp = await send(org, { to: recipient(900), fromNumber: number });
      await until('the first follow-up sent', async () => sentTo(followUp), 10_000);
      const again = await send(org, { to: recipient(900), fromNumber: number });
      await until('a second to the same recipient, counted once', async () => sentTo(again), 10_000);
      const second = await send(org, { to: recipient(901), fromNumber: number });
      const held = await heldFor(org, second, 'follow_up_cap');
      const day = 24 * 3600 * 1000;
      assert.ok(
        Math.abs(Date.parse(held.notBefore) - (sentAt.get(followUp)! + day)) < 5_000,
        `notBefore ${held.notBefore}: the first follow-up's time plus a day`,
      );
      const usage = (
        await t.request('GET', `/api/v1/phone-numbers/${registered.body.id}/usage`, { token: org.ownerToken })
      ).body;
      assert.equal(usage.followUpsToday, 1);
      assert.equal(usage.nextFollowUpSlotAt, held.notBefore);
    });

    test("quiet hours: a message due in the recipient's night waits with notBefore at their 08:00; a number may turn them off", async () => {
      const org = await signup(t);
      await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 1000, burst: 1000, quietHours: { start: '21:00', end: '08:00' } },
      });
      // One of these is always in its night, 21:00 to 08:00, with 10 minutes to spare (their offsets are 4 h apart at most).
      const candidates: Array<[string, string]> = [
        ['+819012345678', 'Asia/Tokyo'],
        ['+442079460000', 'Europe/London'],
        ['+14155550100', 'America/Los_Angeles'],
        ['+6421234567', 'Pacific/Auckland'],
        ['+914412345678', 'Asia/Kolkata'],
        ['+12125550100', 'America/New_York'],
      ];
      const localMinute = (zone: string, at: number) => {
        const [h, m] = new Intl.DateTimeFormat('en-GB', {
          timeZone: zone,
          hour: '2-digit',
          minute: '2-digit',
          hourCycle: 'h23',
        })
          .format(at)
          .split(':')
          .map(Number);
        return h! * 60 + m!;
      };
      const now = Date.now();
      const [to, zone] = candidates.find(([, z]) => {
        const m = localMinute(z, now);
        return m >= 21 * 60 || m < 8 * 60 - 10;
      })!;
      // Their next 08:00, found minute by minute.
      let eight = Math.ceil(now / 60_000) * 60_000;
      while (localMinute(zone, eight) !== 8 * 60) eight += 60_000;
      const number = '+14155559200';
      const registered = await t.request('POST', '/api/v1/phone-numbers', { token: org.ownerToken, body: { number } });
      const relay = await connected(org, [number]);
      const night = await send(org, { to });
      const held = await heldFor(org, night, 'quiet_hours');
      assert.equal(held.status, 'queued');
      assert.equal(held.notBefore, new Date(eight).toISOString(), `${to} in ${zone}`);
      // The number turns them off: its message goes at once, while the organization's line still holds its own.
      const put = await t.request('PUT', `/api/v1/phone-numbers/${registered.body.id}`, {
        token: org.ownerToken,
        body: { pacing: { quietHours: false } },
      });
      assert.equal(put.status, 200, put.text);
      const viaNumber = await send(org, { to, fromNumber: number });
      await until('sent through the number without quiet hours', async () =>
        relay.sends.some((s) => s.messageId === viaNumber),
      );
      assert.equal((await statusOf(org, night)).waitingFor, 'quiet_hours');
      const usage = await t.request('GET', `/api/v1/phone-numbers/${registered.body.id}/usage`, {
        token: org.ownerToken,
      });
      assert.equal(usage.body.pace.quietHours, false);

      // A bulk job to them through the organization's line: its estimate is their 08:00, when its first message may go.
      const job = await t.request('POST', '/api/v1/messages/bulk', {
        token: org.ownerToken,
        body: { messages: [1, 2, 3].map(() => ({ to, body: 'good morning' })) },
      });
      assert.equal(job.status, 201, job.text);
      const eta = await until(
        'an estimate past the night',
        async () => {
          const detail = await t.request('GET', `/api/v1/messages/bulk/${job.body.jobId}`, { token: org.ownerToken });
          const at = Date.parse(detail.body.estimatedCompletionAt);
          return at >= eight && at;
        },
        10_000,
      );
      assert.ok(
        eta <= eight + 60_000,
        `estimated ${new Date(eta).toISOString()}, their 08:00 ${new Date(eight).toISOString()}`,
      );
    });

    test("pacing settings: bad input is a 400, a member may not set them, and another organization's number is not found", async () => {
      const org = await signup(t);
      const other = await signup(t);
      const bad = await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { perSecond: 0 },
      });
      assert.equal(bad.status, 400);
      const member = await apiKey(t, org, 'member');
      assert.equal(
        (await t.request('PUT', '/api/v1/organization/pacing', { token: member, body: { perSecond: 5 } })).status,
        403,
      );
      const unknown = await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { speed: 3 },
      });
      assert.equal(unknown.status, 400);
      const registered = await t.request('POST', '/api/v1/phone-numbers', {
        token: org.ownerToken,
        body: { number: '+14155559001' },
      });
      assert.equal(
        (await t.request('GET', `/api/v1/phone-numbers/${registered.body.id}/usage`, { token: other.ownerToken }))
          .status,
        404,
      );
      assert.equal(
        (
          await t.request('PUT', `/api/v1/phone-numbers/${registered.body.id}`, {
            token: org.ownerToken,
            body: { pacing: { burst: 0 } },
          })
        ).status,
        400,
      );
      const set = await t.request('PUT', '/api/v1/organization/pacing', {
        token: org.ownerToken,
        body: { newContactsPerDay: 10 },
      });
      assert.deepEqual(set.body, { newContactsPerDay: 10 });
      assert.deepEqual((await t.request('GET', '/api/v1/organization/pacing', { token: org.ownerToken })).body, {
        newContactsPerDay: 10,
      });
      assert.deepEqual((await t.request('GET', '/api/v1/organization/pacing', { token: other.ownerToken })).body, {});
      for (const body of [
        { quietHours: { start: '25:00', end: '08:00' } },
        { quietHours: true },
        { timeZone: 'Mars/Olympus_Mons' },
        { unansweredCap: 0 },
        { jitterMs: -1 },
      ]) {
        const refused = await t.request('PUT', '/api/v1/organization/pacing', { token: org.ownerToken, body });
        assert.equal(refused.status, 400, JSON.stringify(body));
      }
      const health = {
        unansweredCap: 3,
        followUpsPerDay: 50,
        jitterMs: 0,
        quietHours: false,
        timeZone: 'Europe/Paris',
      };
      assert.deepEqual(
        (await t.request('PUT', '/api/v1/organization/pacing', { token: org.ownerToken, body: health })).body,
        health,
      );
    });
  });

  describe(`line health after a restart (${backend})`, () => {
    test('the counts come back from the conversations: messages still queued do not count, a recipient at the cap stays held until they reply', async () => {
      let t = await startTestApp(backend);
      const relays: StandInRelay[] = [];
      try {
        const org = await signup(t);
        await t.request('PUT', '/api/v1/organization/pacing', {
          token: org.ownerToken,
          body: { perSecond: 1000, burst: 1000, unansweredCap: 5 },
        });
        const silent = '+14155550177';
        // A number's line: the same line whichever relay owns the number after a restart.
        const number = '+14155559300';
        await t.request('POST', '/api/v1/phone-numbers', { token: org.ownerToken, body: { number } });
        const send = async () => {
          const res = await t.request('POST', '/api/v1/messages', {
            token: org.ownerToken,
            body: { to: silent, body: 'hello', fromNumber: number },
          });
          assert.equal(res.status, 201, res.text);
          return res.body.id as string;
        };
        const online = async () => {
          const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 50, phoneNumbers: [number] });
          relays.push(relay);
          await relay.connect();
          relay.deliverEverySend();
          return relay;
        };
        const status = async (id: string) =>
          (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body;
        // Five accepted while no relay is online: the conversation counts 5, none of them went out.
        const five: string[] = [];
        for (let i = 0; i < 5; i++) five.push(await send());
        t = await t.restart();
        let relay = await online();
        await until(
          'the five delivered after the restart',
          async () => (await Promise.all(five.map(status))).every((s) => s.status === 'delivered'),
          15_000,
        );
        const sixth = await send();
        await until('the 6th held', async () => (await status(sixth)).waitingFor === 'unanswered_cap', 10_000);
        // Restarted with the 6th queued: 6 accepted since no reply, 1 of them queued, so 5 sent: still held.
        await relay.disconnect();
        relay.close();
        t = await t.restart();
        relay = await online();
        await until(
          'the dispatch activated again',
          async () => (await status(sixth)).waitingFor !== 'relay_offline',
          10_000,
        );
        await new Promise((resolve) => setTimeout(resolve, 500));
        assert.equal((await status(sixth)).waitingFor, 'unanswered_cap');
        await relay.inbound(silent, 'yes?');
        await until(
          'the 6th delivered after the reply',
          async () => (await status(sixth)).status === 'delivered',
          10_000,
        );
      } finally {
        for (const r of relays) r.close();
        await t.stop();
      }
    });
  });
});
