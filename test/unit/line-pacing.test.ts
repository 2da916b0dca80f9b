import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dayMs, LinePacing } from '../../src/actors/tenant/line-pacing.ts';

const defaults = { perSecond: 1, burst: 3, newContactsPerDay: 50 };

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
  assert.deepEqual(pacing.hold(line, '+14155559999', later), { waitingFor: 'new_contact_cap', notBefore: t0 + dayMs });
  assert.equal(pacing.hold(line, '+14155551000', later), null, 'a contact the line wrote to');
  assert.equal(pacing.take(line, '+14155551000', later), null, 'not a new contact');
  assert.equal(pacing.usage(line, later).newContactsToday, 50);
  assert.equal(pacing.hold(line, '+14155559999', t0 + dayMs), null, "the next day's allowance");
});

test("a number's own pace goes over the organization's, which goes over the defaults; contacts from the store count", () => {
  const pacing = new LinePacing(defaults);
  pacing.configure({ newContactsPerDay: 2 }, new Map([['+14155550100', { newContactsPerDay: 0 }]]));
  assert.deepEqual(pacing.pace('+14155550100'), { perSecond: 1, burst: 3, newContactsPerDay: 0 });
  assert.deepEqual(pacing.pace('relay:r1'), { perSecond: 1, burst: 3, newContactsPerDay: 2 });
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
  const pacing = new LinePacing({ perSecond: 2, burst: 4, newContactsPerDay: 10 });
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
