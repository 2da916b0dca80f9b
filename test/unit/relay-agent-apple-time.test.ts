import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appleTimeToIso, appleTimeToMs, msToAppleNs } from '../../packages/relay-agent/src/apple-time.ts';

test('nanoseconds since 2001-01-01 (macOS 10.13 and later) become ISO times', () => {
  // 2024-05-01T12:00:00Z is 736257600 s after the Apple epoch.
  assert.equal(appleTimeToIso(736257600n * 1_000_000_000n), '2024-05-01T12:00:00.000Z');
  assert.equal(appleTimeToIso(736257600123000000), '2024-05-01T12:00:00.123Z');
});

test('seconds since 2001-01-01 (older rows) become ISO times', () => {
  assert.equal(appleTimeToIso(736257600), '2024-05-01T12:00:00.000Z');
  assert.equal(appleTimeToIso(1), '2001-01-01T00:00:01.000Z');
  assert.equal(appleTimeToIso(99_999_999_999), new Date(Date.UTC(2001, 0, 1) + 99_999_999_999_000).toISOString());
});

test('NULL and 0 mean "not set"', () => {
  assert.equal(appleTimeToIso(null), undefined);
  assert.equal(appleTimeToIso(undefined), undefined);
  assert.equal(appleTimeToMs(0), undefined);
});

test('epoch milliseconds convert to exact Apple nanoseconds and back', () => {
  const ms = Date.UTC(2025, 2, 3, 4, 5, 6, 789);
  const ns = msToAppleNs(ms);
  assert.equal(ns % 1_000_000n, 0n);
  assert.equal(appleTimeToMs(ns), ms);
});
