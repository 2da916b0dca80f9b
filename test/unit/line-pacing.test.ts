import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dayMs, healthWindowMs, LinePacing } from '../../src/actors/tenant/line-pacing.ts';
import { healthOff } from './tenant-fixtures.ts';

const defaults = { perSecond: 1, burst: 3, newContactsPerDay: 50, ...healthOff };

test('a line sends its burst at once, then one a second; a held send says when the next slot is free', () => {
  const pacing = new LinePacing(defaults);
  const t0 = 1_000_000;
  for (let i = 0; i < 3; i++) {
    assert.equal(pacing.hold('+14155550100', undefined, t0), null);
    pacing.take('+14155550100', undefined, t0);
  }
  assert.deepEqual(pacing.hold('+14155550100', undefined, t0), { waitingFor: 'line_rate', notBefore: t0 + 1_000 });
  assert.equal(pacing.hold('+14155550100', undefined, t0 + 1_000), null);
  assert.equal(pacing.hold('+14155550199', undefined, t0), null, 'another line has its own allowance');
});

test('the 51st new contact waits for the first one to be a day old; known contacts keep going; the next day it goes', () => {
  const pacing = new LinePacing({ ...defaults, perSecond: 1_000, burst: 1_000 });
  const line = 'relay:r1';
  const t0 = 5_000_000;
  for (let i = 0; i < 50; i++)
    assert.deepEqual(pacing.take(line, `+1415555${1000 + i}`, t0 + i), {
      line,
      to: `+1415555${1000 + i}`,
      firstAt: t0 + i,
    });
  const later = t0 + 60_000;
  assert.deepEqual(pacing.hold(line, '+14155559999', later), {
    waitingFor: 'new_contact_cap',
    notBefore: t0 + dayMs,
    fresh: true,
  });
  assert.equal(pacing.hold(line, '+14155551000', later), null, 'a contact the line wrote to');
  assert.equal(pacing.take(line, '+14155551000', later), null, 'not a new contact');
  assert.equal(pacing.usage(line, later).newContactsToday, 50);
  assert.equal(pacing.hold(line, '+14155559999', t0 + dayMs), null, "the next day's allowance");
});

test("a number's own pace goes over the organization's, which goes over the defaults; contacts from the store count", () => {
  const pacing = new LinePacing(defaults);
  pacing.configure({ newContactsPerDay: 2 }, new Map([['+14155550100', { newContactsPerDay: 0 }]]));
  assert.deepEqual(pacing.pace('+14155550100'), { ...defaults, newContactsPerDay: 0 });
  assert.deepEqual(pacing.pace('relay:r1'), { ...defaults, newContactsPerDay: 2 });
  const now = 10 * dayMs;
  pacing.seed(
    [
      { line: 'relay:r1', to: '+1', firstAt: now - 1_000 },
      { line: 'relay:r1', to: '+2', firstAt: now - 2 * dayMs },
      { line: 'relay:r1', to: '+3', firstAt: now - 500 },
    ],
    now,
  );
  assert.equal(pacing.usage('relay:r1', now).newContactsToday, 2, 'the one older than a day is known, not counted');
  assert.equal(pacing.hold('relay:r1', '+4', now)?.waitingFor, 'new_contact_cap');
  assert.equal(pacing.hold('relay:r1', '+2', now), null);
  assert.equal(pacing.hold('+14155550100', '+5', now)?.waitingFor, 'new_contact_cap');
});

test("a drain takes the lines' rate after what their buckets hold, and a day per cap's worth of new recipients past what is left today", () => {
  const pacing = new LinePacing({ perSecond: 2, burst: 4, newContactsPerDay: 10, ...healthOff });
  const now = 20 * dayMs;
  assert.equal(pacing.drainedAt(['relay:r1'], 24, 0, now), now + 10_000, '4 at once, 20 more at 2 a second');
  assert.equal(
    pacing.drainedAt(['relay:r1', 'relay:r2'], 24, 0, now),
    now + 4_000,
    'two lines: 8 at once, 16 at 4 a second',
  );
  assert.equal(
    pacing.drainedAt(['relay:r1'], 24, 10, now),
    now + 10_000,
    'as many new recipients as the cap has left: today',
  );
  assert.equal(pacing.drainedAt(['relay:r1'], 24, 15, now), now + dayMs, "10 today, 5 when today's free a day later");
  assert.equal(pacing.drainedAt(['relay:r1'], 30, 30, now), now + 2 * dayMs, '10 today, 10 tomorrow, 10 the day after');
  pacing.take('relay:r1', '+1', now - dayMs / 2);
  assert.equal(
    pacing.drainedAt(['relay:r1'], 12, 12, now),
    now + dayMs / 2,
    '9 left today; the 10th and later wait for the one sent half a day ago to be a day old',
  );
  assert.equal(pacing.drainedAt(['relay:r1'], 10, 10, now), now + dayMs / 2, 'the same for one past what is left');
  pacing.configure({ newContactsPerDay: 0 }, new Map());
  assert.equal(
    pacing.drainedAt(['relay:r1'], 1, 1, now),
    null,
    'a line with no new contacts allowed never reaches a new recipient',
  );
});

test('the 6th message to a recipient who never replied waits for a reply; their reply lifts it and opens 24 h outside the caps', () => {
  const pacing = new LinePacing({
    ...defaults,
    perSecond: 1_000,
    burst: 1_000,
    unansweredCap: 5,
    newContactsPerDay: 1,
  });
  const line = 'relay:r1';
  const silent = '+14155550101';
  const t0 = 3 * dayMs;
  for (let i = 0; i < 5; i++) {
    assert.equal(pacing.hold(line, silent, t0 + i), null, `message ${i + 1}`);
    pacing.take(line, silent, t0 + i);
  }
  assert.deepEqual(pacing.hold(line, silent, t0 + 10), { waitingFor: 'unanswered_cap' });
  assert.equal(pacing.usage(line, t0 + 10).awaitingReply, 1);
  assert.equal(pacing.usage(line, t0 + 10).followUpsToday, 1, 'the 2nd to 5th were follow-ups to one recipient');
  assert.equal(pacing.hold(line, '+14155550102', t0 + 10)?.waitingFor, 'new_contact_cap');
  pacing.replied(silent, t0 + 20);
  pacing.replied('+14155550102', t0 + 20);
  for (let i = 0; i < 10; i++) {
    assert.equal(pacing.hold(line, silent, t0 + 30 + i), null, 'within 24 h of their reply: no cap');
    pacing.take(line, silent, t0 + 30 + i);
  }
  assert.equal(pacing.hold(line, '+14155550102', t0 + 30), null, 'a new contact who wrote first is outside the cap');
  assert.deepEqual(pacing.take(line, '+14155550102', t0 + 30), { line, to: '+14155550102', firstAt: t0 + 30 });
  assert.equal(pacing.usage(line, t0 + 30).newContactsToday, 1, 'and not counted in it');
  // A day after the reply the window closes; what was sent inside it counted toward nothing.
  assert.equal(pacing.hold(line, silent, t0 + 20 + dayMs + 1), null);
  assert.equal(pacing.usage(line, t0 + 20 + dayMs + 1).awaitingReply, 0);
});

test('follow-ups are capped per line and day, counted once per recipient; the new-contact spacing is random up to jitterMs', () => {
  const pacing = new LinePacing(
    { ...defaults, perSecond: 1_000, burst: 1_000, followUpsPerDay: 2, jitterMs: 1_000 },
    () => 0.5,
  );
  const line = '+14155550100';
  const t0 = 7 * dayMs;
  const to = (i: number) => `+4420794600${i}`;
  pacing.take(line, to(1), t0);
  assert.deepEqual(pacing.hold(line, to(2), t0 + 100), { waitingFor: 'line_rate', notBefore: t0 + 500, fresh: true });
  assert.equal(pacing.hold(line, to(1), t0 + 100), null, 'a known recipient does not wait for the spacing');
  assert.equal(pacing.usage(line, t0 + 100).nextNewContactSlotAt, t0 + 500);
  pacing.take(line, to(2), t0 + 500);
  pacing.take(line, to(3), t0 + 1_000);
  pacing.take(line, to(1), t0 + 2_000); // a follow-up
  pacing.take(line, to(1), t0 + 2_001); // the same recipient: not counted again
  pacing.take(line, to(2), t0 + 2_002);
  assert.equal(pacing.usage(line, t0 + 3_000).followUpsToday, 2);
  assert.deepEqual(pacing.hold(line, to(3), t0 + 3_000), {
    waitingFor: 'follow_up_cap',
    notBefore: t0 + 2_000 + dayMs,
  });
  assert.equal(pacing.hold(line, to(1), t0 + 3_000), null, 'one already followed up today');
  assert.equal(pacing.hold(line, to(3), t0 + 2_000 + dayMs), null);
});

test('quiet hours in the recipient zone: held until their 08:00; off, or a recipient who wrote, per the setting', () => {
  const pacing = new LinePacing({ ...defaults, quietHours: { start: '21:00', end: '08:00' }, timeZone: 'Asia/Tokyo' });
  const line = 'relay:r1';
  // 2026-07-01 05:30 UTC: 22:30 in Los Angeles (PDT), 06:30 in London (BST), 14:30 in Tokyo.
  const now = Date.parse('2026-07-01T05:30:00Z');
  assert.deepEqual(pacing.hold(line, '+14155550100', now), {
    waitingFor: 'quiet_hours',
    notBefore: Date.parse('2026-07-01T15:00:00Z'),
  });
  assert.deepEqual(pacing.hold(line, '+442079460000', now), {
    waitingFor: 'quiet_hours',
    notBefore: Date.parse('2026-07-01T07:00:00Z'),
  });
  assert.equal(pacing.hold(line, '+819012345678', now), null, 'Tokyo is awake');
  assert.equal(pacing.hold(line, 'someone@example.com', now), null, 'no zone in the handle: the line zone, Tokyo');
  pacing.configure({ quietHours: false }, new Map());
  assert.equal(pacing.hold(line, '+14155550100', now), null, 'turned off');
  // Someone who wrote in the last hour is awake: an answer to them is not held; one who wrote earlier is.
  const awake = new LinePacing({ ...defaults, quietHours: { start: '21:00', end: '08:00' }, timeZone: 'Asia/Tokyo' });
  awake.replied('+14155550100', now - 10 * 60_000);
  assert.equal(awake.hold(line, '+14155550100', now), null, 'wrote 10 minutes ago');
  assert.equal(
    awake.hold(line, '+14155550100', now + 3600_000)?.waitingFor,
    'quiet_hours',
    'an hour and 10 minutes later',
  );
});

test("a drain's estimate counts the spacing between first messages and stops for the recipients' nights", () => {
  const pacing = new LinePacing({ ...defaults, perSecond: 2, burst: 4, newContactsPerDay: 1_000, jitterMs: 3_000 });
  const noon = Date.parse('2026-07-01T12:00:00Z');
  assert.equal(pacing.drainedAt(['relay:r1'], 24, 0, noon), noon + 10_000, 'no new recipient: the rate alone');
  assert.equal(pacing.drainedAt(['relay:r1'], 24, 20, noon), noon + 30_000, '20 first messages 1.5 s apart on average');
  pacing.configure({ jitterMs: 0, quietHours: { start: '21:00', end: '08:00' }, timeZone: 'Europe/Paris' }, new Map());
  // 20:59:50 in Paris (UTC+2): 10 s of sending, then none until 08:00.
  const late = Date.parse('2026-07-01T18:59:50Z');
  assert.equal(pacing.drainedAt(['relay:r1'], 24, 0, late), late + 10_000, 'done before the night');
  assert.equal(
    pacing.drainedAt(['relay:r1'], 24, 0, late + 5_000),
    Date.parse('2026-07-02T06:00:05Z'),
    '5 s before 21:00, the other 5 s after 08:00',
  );
  assert.equal(
    pacing.drainedAt(['relay:r1'], 24, 0, Date.parse('2026-07-02T12:00:00Z'), 'Asia/Tokyo'),
    Date.parse('2026-07-02T23:00:10Z'),
    "in the recipients' zone: 21:00 in Tokyo, until their 08:00",
  );
});

test("a scheduled drain's nights are counted from its start", () => {
  const pacing = new LinePacing({
    ...defaults,
    perSecond: 2,
    burst: 4,
    quietHours: { start: '21:00', end: '08:00' },
    timeZone: 'Europe/London',
  });
  const now = Date.parse('2026-01-10T10:00:00Z');
  assert.equal(pacing.drainedAt(['relay:r1'], 24, 0, now, undefined, now + 3_600_000), now + 3_600_000 + 10_000);
  const lateStart = Date.parse('2026-01-10T20:59:55Z');
  assert.equal(
    pacing.drainedAt(['relay:r1'], 24, 0, now, undefined, lateStart),
    Date.parse('2026-01-11T08:00:05Z'),
    '5 s before the night, 5 s the next morning',
  );
});

test("a line's reply rate and unanswered share count the recipients it first wrote to in the last 7 days", () => {
  const pacing = new LinePacing({ ...defaults, perSecond: 1_000, burst: 1_000 });
  const line = '+14155550100';
  const t0 = 30 * dayMs;
  assert.deepEqual(pacing.usage(line, t0).health, {
    windowDays: 7,
    recipients: 0,
    replied: 0,
    unanswered: 0,
    replyRate: null,
    unansweredShare: null,
  });
  // Known from the store: one first written to 8 days ago (outside the window), one 2 days ago.
  pacing.seed(
    [
      { line, to: '+14155550001', firstAt: t0 - 8 * dayMs },
      { line, to: '+14155550002', firstAt: t0 - 2 * dayMs },
    ],
    t0,
  );
  pacing.seedReplies([{ to: '+14155550002', lastInboundAt: t0 - dayMs, sentSinceReply: 0 }]);
  for (const to of ['+14155550001', '+14155550003', '+14155550004', '+14155550005']) pacing.take(line, to, t0);
  pacing.replied('+14155550003', t0 + 10);
  // A stranger who wrote before the line's first message to them has not replied to it.
  pacing.replied('+14155550006', t0 + 20);
  pacing.take(line, '+14155550006', t0 + 30);
  const health = pacing.usage(line, t0 + 40).health;
  assert.deepEqual(health, {
    windowDays: 7,
    recipients: 5,
    replied: 2,
    unanswered: 2,
    replyRate: 0.4,
    unansweredShare: 0.4,
  });
  assert.equal(pacing.usage(line, t0 + 30 + healthWindowMs).health.recipients, 0, 'a week later, none is recent');
  assert.equal(pacing.usage('+14155550199', t0).health.recipients, 0, 'another line has its own');
});
