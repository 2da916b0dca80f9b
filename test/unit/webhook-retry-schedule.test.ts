import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { backoffMs, nextStep } from '../../src/webhooks/retry-schedule.ts';
import { retryAfterMs } from '../../src/webhooks/webhook-sender.ts';

const cfg = loadConfig({}).webhook;
const failed = (status: number | null, extra = {}) => ({
  ok: false,
  responseStatus: status,
  error: 'x',
  durationMs: 1,
  ...extra,
});

test('defaults: 8 attempts, 10 s timeout, 8 at once, 5 s × 4ⁿ capped at 6 h, private addresses refused', () => {
  assert.equal(cfg.maxAttempts, 8);
  assert.equal(cfg.timeoutMs, 10_000);
  assert.equal(cfg.concurrency, 8);
  assert.equal(cfg.retryBaseMs, 5_000);
  assert.equal(cfg.retryCapMs, 6 * 3600_000);
  assert.equal(cfg.allowPrivate, false);
  assert.equal(loadConfig({}).eventRetentionDays, 30);
});

test('backoff: 5 s, 20 s, 80 s, 320 s, 1280 s, 5120 s, then the 6 h cap; jitter within ±20 %', () => {
  const middle = () => 0.5;
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffMs(n, cfg, middle)),
    [5_000, 20_000, 80_000, 320_000, 1_280_000, 5_120_000, 20_480_000, 21_600_000],
  );
  assert.equal(
    backoffMs(1, cfg, () => 0),
    4_000,
  );
  assert.equal(
    backoffMs(1, cfg, () => 1),
    6_000,
  );
  assert.equal(
    backoffMs(20, cfg, () => 1),
    21_600_000 * 1.2,
  );
});

test('after an attempt: success settles, 410 is gone, the 8th failure is final, Retry-After is honoured up to the cap', () => {
  assert.deepEqual(nextStep({ ok: true, responseStatus: 200, error: null, durationMs: 1 }, 1, cfg), {
    kind: 'succeeded',
  });
  assert.deepEqual(nextStep(failed(410), 1, cfg), { kind: 'gone' });
  assert.equal(nextStep(failed(500), 7, cfg).kind, 'retry');
  assert.deepEqual(nextStep(failed(500), 8, cfg), { kind: 'failed' });
  assert.deepEqual(nextStep(failed(null), 8, cfg), { kind: 'failed' });
  assert.deepEqual(nextStep(failed(429, { retryAfterMs: 120_000 }), 1, cfg), { kind: 'retry', delayMs: 120_000 });
  assert.deepEqual(nextStep(failed(503, { retryAfterMs: 48 * 3600_000 }), 1, cfg), {
    kind: 'retry',
    delayMs: 6 * 3600_000,
  });
});

test('Retry-After in seconds or as an HTTP date', () => {
  assert.equal(retryAfterMs('120'), 120_000);
  assert.equal(retryAfterMs('Wed, 21 Oct 2015 07:28:00 GMT', Date.parse('Wed, 21 Oct 2015 07:27:00 GMT')), 60_000);
  assert.equal(retryAfterMs('soon'), undefined);
});
