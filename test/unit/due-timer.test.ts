import assert from 'node:assert/strict';
import { afterEach, beforeEach, mock, test } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { RetryableError } from '../../src/errors.ts';
import { createLogger } from '../../src/log.ts';
import { defineActor, defineProtocol } from '../../src/runtime/actor.ts';
import { maxTimerDelayMs, timerAfter, timerAt } from '../../src/runtime/due-timer.ts';
import { LocalTransport } from '../../src/runtime/local-transport.ts';
import { testRuntimeConfig } from '../integration/runtime-contract.ts';

const day = 24 * 3600 * 1000;
const start = Date.parse('2026-11-27T12:00:00.000Z');

// The faked setTimeout fires a delay past 2^31 - 1 ms after 1 ms, as Node's own does.
beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: start }));
afterEach(() => mock.timers.reset());

/** Moves the faked clock `ms` ahead in steps no longer than a day, asserting at each that nothing fired. */
function advanceQuietly(ms: number, fired: () => number): void {
  for (let left = ms; left > 0; left -= Math.min(left, day)) {
    mock.timers.tick(Math.min(left, day));
    assert.equal(fired(), 0, `fired ${Date.now() - start} ms after arming`);
  }
}

for (const days of [30, 60, 90]) {
  test(`a timer ${days} days ahead fires not a millisecond before its due time, once, after it`, () => {
    let fired = 0;
    const dueAt = start + days * day;
    timerAt(dueAt, () => fired++);
    mock.timers.tick(1);
    assert.equal(fired, 0, 'a delay past 2^31 - 1 ms does not fire at once');
    advanceQuietly(dueAt - 1 - Date.now(), () => fired);
    assert.equal(Date.now(), dueAt - 1);
    mock.timers.tick(1);
    assert.equal(fired, 1, 'fired at its due time');
    mock.timers.tick(100 * day);
    assert.equal(fired, 1, 'fired once');
  });
}

test('a cancelled timer never fires, in its first step or a later one', () => {
  let fired = 0;
  const early = timerAfter(60 * day, () => fired++);
  early.cancel();
  const later = timerAfter(60 * day, () => fired++);
  mock.timers.tick(maxTimerDelayMs + 1);
  later.cancel();
  mock.timers.tick(90 * day);
  assert.equal(fired, 0);
});

test('short delays are unchanged: due after their delay, not before', () => {
  let fired = 0;
  timerAfter(300, () => fired++);
  mock.timers.tick(299);
  assert.equal(fired, 0);
  mock.timers.tick(1);
  assert.equal(fired, 1);
});

test('the in-process transport delivers a message sent 30, 60 and 90 days ahead at its due time, not before', async () => {
  const protocol = defineProtocol('later', { ping: {} });
  const handled: Array<{ key: string; at: number }> = [];
  const rt = new LocalTransport(testRuntimeConfig(), createLogger('silent'));
  await rt.start([
    defineActor(protocol, {
      handlers: {
        async ping(ctx) {
          handled.push({ key: ctx.key, at: Date.now() });
        },
      },
    }),
  ]);
  try {
    for (const days of [30, 60, 90]) await rt.send('later', `d${days}`, { kind: 'ping' }, { delayMs: days * day });
    for (let elapsed = 0; elapsed < 91 * day; elapsed += day / 4) {
      mock.timers.tick(day / 4);
      await turn();
      await turn();
      for (const { key, at } of handled)
        assert.ok(at >= start + Number(key.slice(1)) * day, `${key} handled ${at - start} ms after it was sent`);
    }
    assert.deepEqual(
      handled.map((h) => [h.key, h.at - start]),
      [
        ['d30', 30 * day],
        ['d60', 60 * day],
        ['d90', 90 * day],
      ],
    );
    assert.equal((await rt.stats())[0]!.timers, 0);
  } finally {
    await rt.stop();
  }
});

test('a handler that asks to be retried 30 days later is not handled again before then', async () => {
  const protocol = defineProtocol('retried', { ping: {} });
  const at: number[] = [];
  const rt = new LocalTransport(testRuntimeConfig({ maxDeliveries: 2 }), createLogger('silent'));
  await rt.start([
    defineActor(protocol, {
      handlers: {
        async ping() {
          at.push(Date.now());
          if (at.length === 1) throw new RetryableError('not yet', { retryAfterMs: 30 * day });
        },
      },
    }),
  ]);
  try {
    await rt.send('retried', 'k', { kind: 'ping' });
    for (let elapsed = 0; elapsed < 31 * day; elapsed += day / 4) {
      await turn();
      await turn();
      mock.timers.tick(day / 4);
    }
    await turn();
    assert.deepEqual(
      at.map((t) => t - start),
      [0, 30 * day],
    );
  } finally {
    await rt.stop();
  }
});
