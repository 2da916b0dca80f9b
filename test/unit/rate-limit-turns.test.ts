import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decisionInTurn, LocalRateLimiter } from '../../src/runtime/rate-limiter.ts';

// Whole-millisecond intervals, so both sides add the same exact figures.
test('requests decided together get, each in turn, the decision each would get alone in that order', async () => {
  for (const policy of [
    { perMinute: 100, burst: 20 },
    { perMinute: 60, burst: 3 },
    { perMinute: 6_000, burst: 1 },
    { perMinute: 1, burst: 2 },
  ]) {
    for (const used of [0, 2, 5]) {
      const now = 1_764_000_000_000;
      const local = new LocalRateLimiter(() => now);
      // The budget has `used` requests on it already, at the same instant.
      let passed = 0;
      for (let i = 0; i < used; i++) if ((await local.take('b', policy)).allowed) passed++;
      const startMs = passed * (60_000 / policy.perMinute);
      const alone = [];
      for (let i = 0; i < policy.burst + 4; i++) alone.push(await local.take('b', policy));
      const allowed = alone.filter((d) => d.allowed).length;
      assert.deepEqual(
        alone.map((_, i) => decisionInTurn(policy, i, allowed, startMs)),
        alone,
        `${policy.perMinute}/min, burst ${policy.burst}, ${used} used`,
      );
    }
  }
});
