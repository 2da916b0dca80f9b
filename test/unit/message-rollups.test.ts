import assert from 'node:assert/strict';
import { test } from 'node:test';
import { binUpperMs, latencyBin, percentilesOf, RollupTally } from '../../src/messages/message-rollups.ts';

test("a latency bin's upper bound is at or above every latency in it, less than 9 % over it (then rounded to the millisecond)", () => {
  for (let ms = 0; ms <= 5_000_000; ms = ms < 100 ? ms + 1 : Math.ceil(ms * 1.013)) {
    const upper = binUpperMs(latencyBin(ms));
    assert.ok(upper >= ms && upper <= Math.max(ms * 1.0906 + 0.5, 1), `${ms} ms in a bin up to ${upper}`);
  }
});

test('percentiles: the bin holding the rank, from the samples of every bin; nulls without samples', () => {
  const h: Record<string, number> = {};
  // 90 samples at 100 ms, 9 at 1 s, 1 at 60 s.
  for (const [ms, n] of [
    [100, 90],
    [1_000, 9],
    [60_000, 1],
  ] as const)
    h[`b${latencyBin(ms)}`] = n;
  assert.deepEqual(percentilesOf(h), {
    p50: binUpperMs(latencyBin(100)),
    p95: binUpperMs(latencyBin(1_000)),
    p99: binUpperMs(latencyBin(1_000)),
  });
  h[`b${latencyBin(60_000)}`] = 2;
  assert.equal(percentilesOf(h).p99, binUpperMs(latencyBin(60_000)), 'two in a hundred and one are past the 99th');
  assert.deepEqual(
    percentilesOf({ b40: 1 }),
    { p50: binUpperMs(40), p95: binUpperMs(40), p99: binUpperMs(40) },
    'one sample is every percentile',
  );
  assert.deepEqual(percentilesOf(undefined), { p50: null, p95: null, p99: null });
  assert.deepEqual(percentilesOf({ b40: 0 }), { p50: null, p95: null, p99: null });
});

test('a tally is one upsert per bucket and dimension, whatever the number of messages, and merges add up', () => {
  const at = Date.parse('2026-03-01T10:15:30.000Z');
  const tally = new RollupTally();
  for (let i = 0; i < 100; i++)
    tally.add('org_a', 'sent', at + i * 100, { phoneNumber: '+14155550111', relayId: 'relay_1' }, 250);
  tally.add('org_a', 'accepted', at, {});
  const [writes] = tally.writes();
  assert.equal(tally.writes().length, 1);
  assert.equal(writes!.ops.length, 9, 'minute, hour and day of all, the number and the relay');
  const minute = writes!.ops.find(
    (op) => 'updateOne' in op && op.updateOne.filter.id === 'org_a|1m|2026-03-01T10:15:00.000Z|all',
  );
  assert.ok(minute && 'updateOne' in minute);
  assert.deepEqual(minute.updateOne.update, {
    $inc: { sent: 100, [`latency.sent.b${latencyBin(250)}`]: 100, accepted: 1 },
    $setOnInsert: { interval: '1m', dim: 'all', start: '2026-03-01T10:15:00.000Z' },
  });
  assert.equal(minute.updateOne.upsert, true);
  const other = new RollupTally();
  other.add('org_a', 'sent', at, {}, 250);
  other.add('org_b', 'received', at, {});
  tally.merge(other);
  const merged = tally.writes();
  assert.deepEqual(
    merged.map((w) => w.tenantId),
    ['org_a', 'org_b'],
  );
  const mergedMinute = merged[0]!.ops.find(
    (op) => 'updateOne' in op && op.updateOne.filter.id === 'org_a|1m|2026-03-01T10:15:00.000Z|all',
  );
  assert.ok(mergedMinute && 'updateOne' in mergedMinute);
  assert.equal(mergedMinute.updateOne.update.$inc!.sent, 101);
  assert.equal(other.writes()[0]!.ops.length, 3, 'the merged tally is unchanged');
});
