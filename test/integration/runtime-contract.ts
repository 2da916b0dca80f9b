import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import type { RuntimeConfig } from '../../src/runtime/types.ts';
import { AppError } from '../../src/errors.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { Type } from '@sinclair/typebox';
import { defineActor, defineProtocol } from '../../src/runtime/actor.ts';
import type { ActorDefinition, Transport } from '../../src/runtime/types.ts';

/** The contract's test actor. */
export const counterProtocol = defineProtocol('counter', {
  add: { seq: Type.Integer(), pauseMs: Type.Optional(Type.Integer()) },
  echo: { value: Type.String({ maxLength: 100 }) },
  stall: { ms: Type.Integer() },
  tick: {},
  explode: {},
  note: { seq: Type.Integer(), failBatch: Type.Optional(Type.Boolean()) },
});

/**
 * A second test actor: `put` takes its time, `count` only reads and is a
 * query (answered from the activated state out of the mailbox's order).
 */
export const shelfProtocol = defineProtocol(
  'shelf',
  { put: { pauseMs: Type.Integer({ minimum: 0 }) }, count: {} },
  { queries: ['count'] },
);

/** Shelf actors whose state is the number of `put`s handled; `count` answers it and whether it was read out of order. */
export function shelfActors(): ActorDefinition[] {
  return [
    defineActor(shelfProtocol, {
      activate: () => ({ puts: 0 }),
      handlers: {
        async put(ctx, msg) {
          await sleep(msg.pauseMs);
          ctx.state.puts++;
        },
        count: (ctx) => ({ puts: ctx.state.puts, readOnly: ctx.readOnly === true }),
      },
    }),
  ];
}

export type MakeTransport = (cfg: RuntimeConfig) => Promise<Transport>;

/** The transport, whose stop also deletes what the test left in its backend. */
export function cleaningUp<T extends Transport>(transport: T, cleanup: () => Promise<void>): T {
  const stop = transport.stop.bind(transport);
  transport.stop = async () => {
    await stop();
    await cleanup();
  };
  return transport;
}

/** A runtime config with timers short enough for tests; each call gets its own key prefix. */
export function testRuntimeConfig(overrides: Partial<RuntimeConfig> = {}): RuntimeConfig {
  return {
    ...loadConfig({}).runtime,
    keyPrefix: `rttest-${Math.random().toString(36).slice(2, 10)}`,
    defaultShards: 4,
    maxDeliveries: 3,
    redeliveryDelayMs: 10,
    leaseTtlMs: 1_000,
    leaseRenewMs: 200,
    leaseCheckMs: 500,
    rebalanceMs: 100,
    readBlockMs: 100,
    // The backstop sweep out of the way: timers are moved by their wake-ups.
    timerPollMs: 60_000,
    shutdownGraceMs: 5_000,
    askTimeoutMs: 2_000,
    ...overrides,
  };
}

export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

interface Observed {
  order: Map<string, number[]>;
  active: Map<string, number>;
  maxConcurrentPerKey: number;
  maxConcurrentOverall: number;
  activeOverall: number;
  fired: Map<string, number>;
  failures: number;
  /** `note` messages handled, by key, in the order handled; and how many each batch-handler run took. */
  notes: Map<string, number[]>;
  noteBatches: number[];
}

function recordingActors(seen: Observed): ActorDefinition[] {
  const enter = (key: string) => {
    const now = (seen.active.get(key) ?? 0) + 1;
    seen.active.set(key, now);
    seen.activeOverall++;
    seen.maxConcurrentPerKey = Math.max(seen.maxConcurrentPerKey, now);
    seen.maxConcurrentOverall = Math.max(seen.maxConcurrentOverall, seen.activeOverall);
  };
  const leave = (key: string) => {
    seen.active.set(key, (seen.active.get(key) ?? 1) - 1);
    seen.activeOverall--;
  };
  return [
    defineActor(counterProtocol, {
      handlers: {
        async add(ctx, msg) {
          enter(ctx.key);
          try {
            await sleep(msg.pauseMs ?? 0);
            const list = seen.order.get(ctx.key) ?? [];
            list.push(msg.seq);
            seen.order.set(ctx.key, list);
          } finally {
            leave(ctx.key);
          }
        },
        async echo(ctx, msg) {
          return { key: ctx.key, value: msg.value };
        },
        async stall(_ctx, msg) {
          await sleep(msg.ms);
          return 'late';
        },
        async tick(ctx) {
          seen.fired.set(ctx.id, (seen.fired.get(ctx.id) ?? 0) + 1);
        },
        async explode() {
          seen.failures++;
          throw new Error('handler exploded');
        },
        async note(ctx, msg) {
          seen.notes.set(ctx.key, [...(seen.notes.get(ctx.key) ?? []), msg.seq]);
        },
      },
      batches: {
        async note(ctx, msgs) {
          if (msgs.some((m) => m.failBatch)) throw new Error('batch refused');
          seen.noteBatches.push(msgs.length);
          seen.notes.set(ctx.key, [...(seen.notes.get(ctx.key) ?? []), ...msgs.map((m) => m.seq)]);
        },
      },
    }),
  ];
}

/** The behaviour every transport promises; run once per implementation. */
export function runtimeContract(name: string, make: MakeTransport): void {
  describe(`runtime contract: ${name}`, () => {
    let rt: Transport;
    let seen: Observed;
    const cfg = testRuntimeConfig();

    before(async () => {
      seen = {
        order: new Map(),
        active: new Map(),
        maxConcurrentPerKey: 0,
        maxConcurrentOverall: 0,
        activeOverall: 0,
        fired: new Map(),
        failures: 0,
        notes: new Map(),
        noteBatches: [],
      };
      rt = await make(cfg);
      await rt.start([...recordingActors(seen), ...shelfActors()], { consume: true });
    });

    after(async () => {
      await rt.stop();
    });

    test('keeps per-key order and handles one message at a time per actor', async () => {
      const keys = Array.from({ length: 20 }, (_, i) => `order-${i}`);
      const perKey = 25;
      const sends: Promise<string>[] = [];
      for (let seq = 1; seq <= perKey; seq++) {
        for (const key of keys)
          sends.push(rt.send('counter', key, { kind: 'add', seq, pauseMs: seq % 5 === 0 ? 3 : 0 }));
      }
      await Promise.all(sends);
      await waitFor(
        () => keys.every((k) => (seen.order.get(k)?.length ?? 0) >= perKey),
        20_000,
        'every message handled',
      );
      for (const key of keys) {
        assert.deepEqual(
          seen.order.get(key),
          Array.from({ length: perKey }, (_, i) => i + 1),
          `order of ${key}`,
        );
      }
      assert.equal(seen.maxConcurrentPerKey, 1, 'never two messages of one actor at once');
      assert.ok(seen.maxConcurrentOverall > 1, 'different actors run concurrently');
    });

    test('messages of one kind waiting next to each other go to its batch handler together, in order, each once; a failed batch is handled one by one', async () => {
      const key = 'batched';
      // The key is kept busy, so what follows waits in its mailbox.
      const burst = async (from: number, failing?: number) => {
        const busy = rt.ask('counter', key, { kind: 'stall', ms: 300 });
        await sleep(50);
        const sends: Promise<string>[] = [];
        for (let seq = from; seq < from + 20; seq++)
          sends.push(rt.send('counter', key, { kind: 'note', seq, ...(seq === failing ? { failBatch: true } : {}) }));
        await Promise.all(sends);
        await busy;
        await waitFor(() => (seen.notes.get(key)?.length ?? 0) >= from + 19, 10_000, 'every note handled');
      };
      await burst(1);
      assert.ok(
        seen.noteBatches.some((n) => n > 1),
        `several in one batch: ${JSON.stringify(seen.noteBatches)}`,
      );
      const batched = seen.noteBatches.reduce((a, b) => a + b, 0);
      await burst(21, 25);
      await sleep(100);
      assert.deepEqual(
        seen.notes.get(key),
        Array.from({ length: 40 }, (_, i) => i + 1),
        'each once, in order',
      );
      assert.ok(
        seen.noteBatches.reduce((a, b) => a + b, 0) - batched < 20,
        'the batch holding the refused message was handled one by one',
      );
      assert.equal(seen.maxConcurrentPerKey, 1);
    });

    test('stats: the backlog of an actor type and how long its oldest message has waited; none once handled', async () => {
      const key = 'aged';
      const busy = rt.ask('counter', key, { kind: 'stall', ms: 1_200 }, 5_000);
      await sleep(100);
      await Promise.all([1, 2, 3].map((seq) => rt.send('counter', key, { kind: 'note', seq })));
      await sleep(700);
      const waiting = (await rt.stats()).find((s) => s.type === 'counter')!;
      assert.ok(waiting.pending >= 3, `backlog ${waiting.pending}`);
      assert.ok(
        waiting.oldestAgeSeconds >= 0.6 && waiting.oldestAgeSeconds < 5,
        `oldest waited ${waiting.oldestAgeSeconds} s`,
      );
      await busy;
      await waitFor(
        async () => (await rt.stats()).find((s) => s.type === 'counter')!.pending === 0,
        10_000,
        'backlog handled',
      );
      assert.equal((await rt.stats()).find((s) => s.type === 'counter')!.oldestAgeSeconds, 0);
    });

    test('ask returns the handler value', async () => {
      const answer = await rt.ask<{ key: string; value: string }>('counter', 'asked', { kind: 'echo', value: 'hello' });
      assert.deepEqual(answer, { key: 'asked', value: 'hello' });
    });

    test('a query is answered from the activated state at once, not behind the messages queued for its key; a key not activated answers in its turn', async () => {
      // Not activated yet: the query waits its turn, which activates the key.
      assert.deepEqual(await rt.ask('shelf', 'q', { kind: 'count' }), { puts: 0, readOnly: false });
      for (let i = 0; i < 20; i++) await rt.send('shelf', 'q', { kind: 'put', pauseMs: 50 });
      await waitFor(async () => (await rt.ask<{ puts: number }>('shelf', 'q', { kind: 'count' })).puts >= 1);
      // About a second of puts is queued: answered in order, the count would be 20.
      const early = await rt.ask<{ puts: number; readOnly: boolean }>('shelf', 'q', { kind: 'count' });
      assert.equal(early.readOnly, true, 'answered out of the mailbox order');
      assert.ok(early.puts < 20, `answered before the queue drained (${early.puts} of 20 puts handled)`);
      await waitFor(async () => (await rt.ask<{ puts: number }>('shelf', 'q', { kind: 'count' })).puts === 20);
    });

    test('ask rejects with service_unavailable after its timeout', async () => {
      const started = Date.now();
      await assert.rejects(rt.ask('counter', 'slow', { kind: 'stall', ms: 600 }, 150), (err: unknown) => {
        assert.ok(err instanceof AppError);
        assert.equal(err.code, 'service_unavailable');
        return true;
      });
      assert.ok(Date.now() - started < 550, 'rejected at the timeout, not when the handler finished');
    });

    test('a timer fires once, not before its delay', async () => {
      const sentAt = Date.now();
      const id = await rt.send('counter', 'timer', { kind: 'tick' }, { delayMs: 300 });
      await sleep(150);
      assert.equal(seen.fired.get(id) ?? 0, 0, 'not fired early');
      await waitFor(() => (seen.fired.get(id) ?? 0) > 0, 5_000, 'timer fired');
      assert.ok(Date.now() - sentAt >= 300);
      await sleep(400);
      assert.equal(seen.fired.get(id), 1, 'fired exactly once');
    });

    test('a timer 33 days ahead, past what one Node timer holds, is not delivered early (sent plainly, or once by id)', async () => {
      const delayMs = 33 * 24 * 3600 * 1000;
      const timersBefore = (await rt.stats()).find((s) => s.type === 'counter')!.timers;
      const plain = await rt.send('counter', 'far', { kind: 'tick' }, { delayMs });
      const once = await rt.send('counter', 'far', { kind: 'tick' }, { delayMs, onceId: `far-${Math.random()}` });
      // Many polls of the due timers (every 20 ms here), and far past the 1 ms an overflowing setTimeout waits.
      await sleep(600);
      assert.equal(seen.fired.get(plain) ?? 0, 0, 'a plain send is not delivered early');
      assert.equal(seen.fired.get(once) ?? 0, 0, 'a send once by id is not delivered early');
      const timers = (await rt.stats()).find((s) => s.type === 'counter')!.timers;
      assert.equal(timers - timersBefore, 2, 'both are still waiting');
    });

    test('a message that keeps failing goes to the dead letters after maxDeliveries', async () => {
      const before = seen.failures;
      const id = await rt.send('counter', 'doomed', { kind: 'explode' });
      await waitFor(
        async () => (await rt.deadLetters('counter')).some((d) => d.envelope?.id === id),
        10_000,
        'dead letter',
      );
      const dead = (await rt.deadLetters('counter')).find((d) => d.envelope?.id === id)!;
      assert.equal(seen.failures - before, cfg.maxDeliveries, 'delivered exactly maxDeliveries times');
      assert.equal(dead.deliveries, cfg.maxDeliveries);
      assert.match(dead.error, /handler exploded/);
      assert.equal(dead.envelope?.key, 'doomed');
      const stats = await rt.stats();
      assert.ok((stats.find((s) => s.type === 'counter')?.deadLetters ?? 0) >= 1);
    });

    test('a message for an unknown handler is dead-lettered without retries', async () => {
      const id = await rt.send('counter', 'nohandler', { kind: 'no-such-kind' });
      await waitFor(
        async () => (await rt.deadLetters('counter')).some((d) => d.envelope?.id === id),
        10_000,
        'dead letter',
      );
      const dead = (await rt.deadLetters('counter')).find((d) => d.envelope?.id === id)!;
      assert.equal(dead.deliveries, 1);
    });

    test('messages after a dead letter still reach the same actor', async () => {
      await rt.send('counter', 'doomed-then-ok', { kind: 'explode' });
      await rt.send('counter', 'doomed-then-ok', { kind: 'add', seq: 1 });
      await waitFor(() => (seen.order.get('doomed-then-ok')?.length ?? 0) === 1, 10_000, 'later message handled');
    });
  });
}
