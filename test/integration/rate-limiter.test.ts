import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { LocalRateLimiter, RedisRateLimiter, type RateLimiter } from '../../src/runtime/rate-limiter.ts';
import { availableService, serviceUrl } from '../support/services.ts';

const policy = { perMinute: 100, burst: 20 };

function rateLimitContract(
  name: string,
  make: () => Promise<{ limiter: RateLimiter; close(): Promise<void> } | undefined>,
): void {
  describe(`GCRA rate limit: ${name}`, () => {
    test('20 pass at once, the 21st is refused with a whole-second retry, then requests pass again', async (t) => {
      const made = await make();
      if (!made) return t.skip('backend not available');
      t.after(() => made.close());
      const budget = `org-${Math.random().toString(36).slice(2)}`;
      const first = await Promise.all(Array.from({ length: 20 }, () => made.limiter.take(budget, policy)));
      assert.ok(
        first.every((d) => d.allowed),
        'the whole burst passes',
      );
      assert.deepEqual(
        first.map((d) => d.remaining).sort((a, b) => b - a),
        Array.from({ length: 20 }, (_, i) => 19 - i),
      );
      assert.ok(first.every((d) => d.limit === 20));
      const refused = await made.limiter.take(budget, policy);
      assert.equal(refused.allowed, false);
      assert.equal(refused.remaining, 0);
      assert.equal(refused.retryAfterSeconds, 1, '600 ms emission interval rounds up to 1 s');
      assert.ok(refused.resetSeconds >= 11 && refused.resetSeconds <= 12, `reset ${refused.resetSeconds}`);
      await sleep(refused.retryAfterSeconds * 1000);
      const again = await made.limiter.take(budget, policy);
      assert.equal(again.allowed, true, 'passes after Retry-After');
      assert.equal((await made.limiter.take(budget, policy)).allowed, false, 'but only the one interval earned');
    });

    test('budgets are independent and follow their own policy', async (t) => {
      const made = await make();
      if (!made) return t.skip('backend not available');
      t.after(() => made.close());
      const a = `org-a-${Math.random().toString(36).slice(2)}`;
      const b = `org-b-${Math.random().toString(36).slice(2)}`;
      for (let i = 0; i < 3; i++) assert.ok((await made.limiter.take(a, { perMinute: 60, burst: 3 })).allowed);
      assert.equal((await made.limiter.take(a, { perMinute: 60, burst: 3 })).allowed, false);
      assert.ok((await made.limiter.take(b, { perMinute: 60, burst: 3 })).allowed, 'another budget is untouched');
    });
  });
}

rateLimitContract('in process', async () => ({ limiter: new LocalRateLimiter(), close: async () => {} }));

/** A connection, and a key prefix whose keys are deleted when the test ends. */
function scratchRedis(t: TestContext, url: string) {
  const prefix = `rltest-${Math.random().toString(36).slice(2)}`;
  const redis = new Redis(url);
  t.after(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });
  return { redis, prefix };
}

describe('GCRA rate limit shared through Redis', () => {
  test('two limiters on separate connections (two frontends) share one budget', async (t) => {
    const url = await serviceUrl(t, 'REDIS_URL');
    if (!url) return;
    const prefix = `rltest-${Math.random().toString(36).slice(2)}`;
    const one = new Redis(url);
    const two = new Redis(url);
    t.after(async () => {
      const keys = await one.keys(`${prefix}:*`);
      if (keys.length) await one.del(...keys);
      one.disconnect();
      two.disconnect();
    });
    const frontendA = new RedisRateLimiter(one, prefix);
    const frontendB = new RedisRateLimiter(two, prefix);
    const decisions = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 ? frontendA : frontendB).take('org-shared', policy)),
    );
    assert.equal(decisions.filter((d) => d.allowed).length, 20, 'exactly the burst passes across both');
  });
});

describe('GCRA rate limit through Redis, under load', () => {
  test('requests that come while a call is in flight are decided together, in order, as each alone would be', async (t) => {
    const url = await serviceUrl(t, 'REDIS_URL');
    if (!url) return;
    const { redis, prefix } = scratchRedis(t, url);
    const limiter = new RedisRateLimiter(redis, prefix);
    // The calls the limiter makes on this very connection, by how many requests each decides.
    const scripted = redis as unknown as { gcra: (...args: unknown[]) => Promise<[number, number]> };
    const gcra = scripted.gcra.bind(redis);
    const calls: number[] = [];
    scripted.gcra = (...args: unknown[]) => {
      calls.push(Number(args[3]));
      return gcra(...args);
    };
    const decisions = await Promise.all(Array.from({ length: 25 }, () => limiter.take('org-busy', policy)));
    assert.deepEqual(calls, [1, 24], 'the first alone at once, the 24 that came meanwhile in one call');
    assert.deepEqual(
      decisions.map((d) => d.allowed),
      [...Array(20).fill(true), ...Array(5).fill(false)],
      'the burst passes in the order they came, the rest is refused',
    );
    assert.deepEqual(
      decisions.slice(0, 20).map((d) => d.remaining),
      Array.from({ length: 20 }, (_, i) => 19 - i),
    );
    assert.ok(decisions.slice(20).every((d) => d.retryAfterSeconds === 1 && d.remaining === 0));
  });
});

rateLimitContract('redis', async () => {
  const found = await availableService('REDIS_URL');
  if (!('url' in found)) return undefined;
  const url = found.url;
  const redis = new Redis(url);
  const prefix = `rltest-${Math.random().toString(36).slice(2)}`;
  return {
    limiter: new RedisRateLimiter(redis, prefix),
    async close() {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    },
  };
});
