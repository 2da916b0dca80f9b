import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffMs } from '../../src/actors/tenant/backoff.ts';

test('the base after the first attempt, four times as long after each further one', () => {
  const middle = () => 0.5;
  assert.equal(backoffMs(2_000, 1, middle), 2_000);
  assert.equal(backoffMs(2_000, 2, middle), 8_000);
  assert.equal(backoffMs(2_000, 3, middle), 32_000);
  assert.equal(backoffMs(2_000, 0, middle), 2_000, 'no attempt made counts as the first');
});

test('spread by at most 20% either way', () => {
  assert.equal(
    backoffMs(1_000, 1, () => 0),
    800,
  );
  assert.equal(
    backoffMs(1_000, 1, () => 0.999999),
    1_200,
  );
  for (let i = 0; i < 1_000; i++) {
    const ms = backoffMs(2_000, 2, Math.random);
    assert.ok(ms >= 6_400 && ms <= 9_600, `${ms}`);
  }
});
