import assert from 'node:assert/strict';
import { test } from 'node:test';
import { estimateAt, forecastAt, waitingFor } from '../../src/actors/tenant/pace-forecast.ts';
import { tenantState } from './tenant-fixtures.ts';

const now = Date.UTC(2026, 0, 1);
const phone = '+14155550100';

test('why a queued message waits: not queued, no relay online, no credit, its line, or the messages before it', () => {
  const offline = tenantState();
  offline.queue.push({ id: 'm1', priority: 0, fromNumber: null, to: '+1555' });
  assert.equal(waitingFor(offline, 'gone', now), null);
  assert.deepEqual(waitingFor(offline, 'm1', now), { waitingFor: 'relay_offline' });

  const busy = tenantState([{ id: 'relay_1', credits: 0 }]);
  busy.queue.push({ id: 'm1', priority: 0, fromNumber: null, to: '+1555' });
  assert.deepEqual(waitingFor(busy, 'm1', now), { waitingFor: 'relay_busy' });

  const open = tenantState([{ id: 'relay_1', credits: 1, phoneNumbers: [phone] }]);
  open.queue.push({ id: 'm1', priority: 0, fromNumber: phone, to: '+1555' });
  assert.deepEqual(waitingFor(open, 'm1', now), { waitingFor: 'queue' });
  open.pacing.take(phone, '+1555', now); // the line's one token of this second
  assert.deepEqual(waitingFor(open, 'm1', now), { waitingFor: 'line_rate', notBefore: now + 1_000 });
});

test("a job's estimate drains its line's messages at or above its priority at the line's rate; null without a relay or a message of it", () => {
  const state = tenantState([{ id: 'relay_1', credits: 1, phoneNumbers: [phone] }]);
  assert.equal(estimateAt(state, 'job_1', now), null);
  for (let i = 0; i < 5; i++) state.queue.push({ id: `j${i}`, priority: 0, fromNumber: phone, source: 'job_1' });
  // Ahead of it on its line: one message of higher priority; one of lower priority is not.
  state.queue.push({ id: 'urgent', priority: 50, fromNumber: phone });
  state.queue.push({ id: 'later', priority: 0, fromNumber: phone, source: 'job_2' });
  state.queue.push({ id: 'elsewhere', priority: 0, fromNumber: '+14155550111' });
  // 7 messages on the line at priority 0 or above, 1 token ready, 1 a second: 6 more seconds.
  assert.equal(estimateAt(state, 'job_1', now), now + 6_000);
  assert.equal(estimateAt(tenantState(), 'job_1', now), null);
});

test("a scheduled job's forecast scales its sample to its count from its start, and waits for the new-contact cap's days", () => {
  const state = tenantState([{ id: 'relay_1', credits: 1 }]);
  const sample = [
    { to: '+1555000001', fromNumber: phone },
    { to: '+1555000002', fromNumber: phone },
  ];
  state.pacing.seed(
    sample.map((s) => ({ line: phone, to: s.to, firstAt: now - 1_000 })),
    now,
  );
  // Known recipients: 10 messages from one token ready at 1 a second, counted from the start an hour ahead.
  assert.equal(forecastAt(state, { startAt: now + 3_600_000, count: 10, sample }, now), now + 3_600_000 + 9_000);
  // New recipients beyond what the cap has left (none of its 2 a day): the day the oldest frees.
  const fresh = [{ to: '+1555000009', fromNumber: phone }];
  assert.equal(
    forecastAt(state, { startAt: now, count: 3, sample: fresh }, now),
    now - 1_000 + 24 * 3600 * 1000 + 24 * 3600 * 1000,
  );
  assert.equal(forecastAt(tenantState(), { startAt: now, count: 3, sample }, now), null);
});
