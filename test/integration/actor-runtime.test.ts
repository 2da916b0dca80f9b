import { Type } from '@sinclair/typebox';
import { Redis } from 'ioredis';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import type { RuntimeConfig } from '../../src/runtime/types.ts';
import { AppError, RetryableError, TerminalError, toHttpError } from '../../src/errors.ts';
import { domainEvent, type EventStream } from '../../src/events/event-stream.ts';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { createLogger } from '../../src/log.ts';
import { actorClient, defineActor, defineProtocol } from '../../src/runtime/actor.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { LocalTransport } from '../../src/runtime/local-transport.ts';
import { RedisEventStream } from '../../src/events/redis-event-stream.ts';
import { RedisTransport } from '../../src/runtime/redis-transport.ts';
import type { Transport } from '../../src/runtime/types.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { testRuntimeConfig, waitFor } from './runtime-contract.ts';
import { fileServiceUrl } from '../support/services.ts';

const redisUrl = await fileServiceUrl('REDIS_URL');

async function deletePrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
}

const probeProtocol = defineProtocol('probe', {
  /** Appends an event and sets a timer, then fails its first `failFirst` deliveries. */
  emit: { failFirst: Type.Integer({ minimum: 0 }) },
  tick: { from: Type.String({ maxLength: 64 }) },
  terminal: {},
  retryable: { afterMs: Type.Integer({ minimum: 0 }) },
  missing: {},
  count: {},
  hang: {},
  /** Keeps `ctx.owned`, to see when ownership of the key ends. */
  own: {},
});

interface Seen {
  deliveries: Map<string, number[]>;
  ticks: string[];
  activations: Map<string, number>;
  failActivation: number;
  counted: number;
  owned: Map<string, AbortSignal>;
}

function probeActor(seen: Seen, events: () => EventStream) {
  const delivered = (id: string) => {
    const list = seen.deliveries.get(id) ?? [];
    list.push(Date.now());
    seen.deliveries.set(id, list);
    return list.length;
  };
  return defineActor<typeof probeProtocol, { count: number }>(probeProtocol, {
    activate: (ctx) => {
      if (seen.failActivation > 0) {
        seen.failActivation--;
        throw new RetryableError('the store did not answer', { retryAfterMs: 5 });
      }
      seen.activations.set(ctx.key, (seen.activations.get(ctx.key) ?? 0) + 1);
      return { count: 0 };
    },
    handlers: {
      async emit(ctx, msg) {
        const n = delivered(ctx.id);
        await events().append(
          [domainEvent('relay.online', { tenantId: 'org_probe' }, { from: ctx.id }, ctx.derivedId('probe.emitted'))],
          { once: true },
        );
        await ctx.send(probeProtocol, ctx.key, { kind: 'tick', from: ctx.id }, { delayMs: 50 });
        if (n <= msg.failFirst) throw new Error(`failing delivery ${n} on purpose`);
      },
      tick(_ctx, msg) {
        seen.ticks.push(msg.from);
      },
      terminal(ctx) {
        delivered(ctx.id);
        throw new TerminalError('this can never work');
      },
      retryable(ctx, msg) {
        if (delivered(ctx.id) === 1) throw new RetryableError('not yet', { retryAfterMs: msg.afterMs });
      },
      missing() {
        throw new AppError('not_found', 'no such probe');
      },
      count(ctx) {
        ctx.state.count++;
        seen.counted++;
        return ctx.state.count;
      },
      hang: () => new Promise(() => {}),
      own(ctx) {
        seen.owned.set(ctx.key, ctx.owned);
      },
    },
  });
}

interface Harness {
  rt: Transport;
  events: EventStream;
  seen: Seen;
  readEvents(): Promise<string[]>;
}

type Make = (t: TestContext, cfg: RuntimeConfig, seen: Seen) => Promise<Harness>;

const newSeen = (): Seen => ({
  deliveries: new Map(),
  ticks: [],
  activations: new Map(),
  failActivation: 0,
  counted: 0,
  owned: new Map(),
});

const makeLocal: Make = async (t, cfg, seen) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-actor-'));
  const store = new EmbeddedStore(dir);
  const events = new StoreEventStream(store);
  await store.init();
  const rt = new LocalTransport(cfg, createLogger('silent'));
  await rt.start([probeActor(seen, () => events)], { consume: true });
  t.after(async () => {
    await rt.stop();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const group = `g-${Math.random()}`;
  return { rt, events, seen, readEvents: async () => (await events.read(group, 'c', 1_000)).map((e) => e.event.id) };
};

const makeRedis: Make = async (t, cfg, seen) => {
  const rt = new RedisTransport(redisUrl!, cfg, `node-${cfg.keyPrefix}`, createLogger('silent'));
  let events: EventStream | undefined;
  await rt.start([probeActor(seen, () => events!)], { consume: true });
  events = new RedisEventStream(rt.connection, `${cfg.keyPrefix}:events`, cfg.dedupeTtlMs);
  t.after(async () => {
    await rt.stop();
    await deletePrefix(redisUrl!, cfg.keyPrefix);
  });
  const group = `g-${Math.random()}`;
  return { rt, events, seen, readEvents: async () => (await events!.read(group, 'c', 1_000)).map((e) => e.event.id) };
};

const transports: Array<[string, Make]> = [['local', makeLocal]];
if (redisUrl) transports.push(['redis', makeRedis]);
else test('actor runtime: redis', (t) => void t.skip('REDIS_URL not set'));

for (const [name, make] of transports) {
  describe(`actor runtime: ${name}`, () => {
    test('a redelivered message emits its event once and sets its timer once', async (t) => {
      const h = await make(t, testRuntimeConfig({ maxDeliveries: 3, redeliveryDelayMs: 10 }), newSeen());
      const probe = actorClient(h.rt, probeProtocol);
      const id = await probe.send('k1', { kind: 'emit', failFirst: 1 });
      await waitFor(() => (h.seen.deliveries.get(id)?.length ?? 0) === 2, 5_000, 'second delivery');
      await waitFor(() => h.seen.ticks.length >= 1, 5_000, 'the timer');
      await sleep(400); // a second timer would have fired by now
      assert.equal(h.seen.deliveries.get(id)?.length, 2, 'delivered twice: it failed once');
      assert.deepEqual(h.seen.ticks, [id], 'one timer, not two');
      assert.equal((await h.readEvents()).length, 1, 'one event, not two');
    });

    test('a terminal error is dead-lettered at its first delivery', async (t) => {
      const h = await make(t, testRuntimeConfig({ maxDeliveries: 5 }), newSeen());
      const id = await actorClient(h.rt, probeProtocol).send('k2', { kind: 'terminal' });
      await waitFor(
        async () => (await h.rt.deadLetters('probe')).some((d) => d.envelope?.id === id),
        5_000,
        'dead letter',
      );
      const dead = (await h.rt.deadLetters('probe')).find((d) => d.envelope?.id === id)!;
      assert.equal(dead.deliveries, 1);
      assert.equal(dead.error, 'this can never work');
      await sleep(200);
      assert.equal(h.seen.deliveries.get(id)?.length, 1, 'never delivered again');
    });

    test('a retryable error is delivered again after its retryAfterMs, not before', async (t) => {
      const h = await make(t, testRuntimeConfig({ maxDeliveries: 3, redeliveryDelayMs: 1 }), newSeen());
      const id = await actorClient(h.rt, probeProtocol).send('k3', { kind: 'retryable', afterMs: 400 });
      await waitFor(() => (h.seen.deliveries.get(id)?.length ?? 0) === 2, 5_000, 'the retry');
      const [first, second] = h.seen.deliveries.get(id)!;
      // setTimeout may fire a millisecond before Date.now() says the delay is over.
      assert.ok(second! - first! >= 395, `retried after ${second! - first!} ms`);
      assert.equal((await h.rt.deadLetters('probe')).length, 0);
    });

    test("an AppError('not_found') thrown in an actor answers 404 through ask, and is no dead letter", async (t) => {
      const h = await make(t, testRuntimeConfig(), newSeen());
      await assert.rejects(actorClient(h.rt, probeProtocol).ask('k4', { kind: 'missing' }), (err: unknown) => {
        assert.ok(err instanceof AppError);
        assert.equal(err.code, 'not_found');
        assert.equal(err.message, 'no such probe');
        assert.equal(toHttpError(err).statusCode, 404);
        return true;
      });
      assert.equal((await h.rt.deadLetters('probe')).length, 0);
    });

    test('a message that does not match its schema is dead-lettered with the reason, without a delivery', async (t) => {
      const h = await make(t, testRuntimeConfig(), newSeen());
      const wrongField = await h.rt.send('probe', 'k5', { kind: 'emit', failFirst: 'twice' });
      const wrongKind = await h.rt.send('probe', 'k5', { kind: 'emitt' });
      await waitFor(async () => (await h.rt.deadLetters('probe')).length === 2, 5_000, 'two dead letters');
      const dead = await h.rt.deadLetters('probe');
      assert.match(
        dead.find((d) => d.envelope?.id === wrongField)!.error,
        /malformed "probe.emit" message: \/failFirst must be integer/,
      );
      assert.match(dead.find((d) => d.envelope?.id === wrongKind)!.error, /has no message "emitt"/);
      assert.equal(h.seen.deliveries.size, 0);
    });

    test('state is activated once per key, kept between messages, and built again after a failed activation', async (t) => {
      const seen = newSeen();
      seen.failActivation = 1;
      const h = await make(t, testRuntimeConfig({ maxDeliveries: 3 }), seen);
      const probe = actorClient(h.rt, probeProtocol);
      assert.equal(
        await probe.ask('k6', { kind: 'count' }),
        1,
        'the first delivery failed to activate; the second did',
      );
      assert.equal(await probe.ask('k6', { kind: 'count' }), 2);
      assert.equal(await probe.ask('k6', { kind: 'count' }), 3);
      assert.equal(seen.activations.get('k6'), 1);
      assert.equal(h.rt.liveStates(), 1);
    });

    test('ctx.owned holds while the runtime owns the key, and is aborted when it stops', async (t) => {
      const seen = newSeen();
      const h = await make(t, testRuntimeConfig(), seen);
      const probe = actorClient(h.rt, probeProtocol);
      await probe.ask('k7', { kind: 'own' });
      await probe.ask('k7', { kind: 'own' });
      const owned = seen.owned.get('k7')!;
      assert.equal(owned.aborted, false);
      await h.rt.stop();
      assert.equal(owned.aborted, true, 'background work of the key learns that it must start nothing more');
    });
  });
}

test('100,000 tenant keys touched once, then idle: the live state count falls back to 0', async (t) => {
  const idleMs = 1_000;
  const seen = newSeen();
  const h = await makeLocal(t, testRuntimeConfig({ actorIdleMs: idleMs }), seen);
  const probe = actorClient(h.rt, probeProtocol);
  const keys = 100_000;
  let peak = 0;
  for (let i = 0; i < keys; i += 5_000) {
    await Promise.all(Array.from({ length: 5_000 }, (_, j) => probe.send(`org_${i + j}`, { kind: 'count' })));
    peak = Math.max(peak, h.rt.liveStates());
  }
  await waitFor(() => seen.counted === keys, 60_000, 'every key handled');
  peak = Math.max(peak, h.rt.liveStates());
  const idleFrom = Date.now();
  await waitFor(() => h.rt.liveStates() === 0, idleMs * 10 + 10_000, 'no live state');
  console.log(
    `idle states: ${keys} keys, peak ${peak} live states, 0 after ${Date.now() - idleFrom} ms (ACTOR_IDLE_MS ${idleMs})`,
  );
  assert.ok(peak > keys / 2, `the states were live before (peak ${peak})`);
  assert.equal(seen.activations.size, keys);
  // Touched again: built again from the store, not remembered.
  assert.equal(await probe.ask('org_7', { kind: 'count' }), 1);
  assert.equal(seen.activations.get('org_7'), 2);
});

describe('actor runtime: redis shard ownership and state', () => {
  test('a shard that leaves a worker and comes back brings no state from before', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 1, leaseTtlMs: 600, leaseRenewMs: 100, rebalanceMs: 100 });
    const seen = newSeen();
    const h = await makeRedis(t, cfg, seen);
    const probe = actorClient(h.rt, probeProtocol);
    assert.equal(await probe.ask('k', { kind: 'count' }), 1);
    assert.equal(await probe.ask('k', { kind: 'count' }), 2);
    const redis = new Redis(redisUrl);
    t.after(() => redis.disconnect());
    const lease = `${cfg.keyPrefix}:lease:probe:0`;
    // Another worker takes the shard: this one's renewal fails and it lets go.
    await redis.set(lease, 'another-worker', 'PX', 60_000);
    await waitFor(() => h.rt.liveStates() === 0, 5_000, 'state dropped with the shard');
    await redis.del(lease);
    assert.equal(await probe.ask('k', { kind: 'count' }, 5_000), 1, 'activated again, not counting on from 2');
    assert.equal(seen.activations.get('k'), 2);
  });

  test('ctx.owned is aborted when the shard lease is lost; the next message, owned again, gets a live signal', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 1, leaseTtlMs: 600, leaseRenewMs: 100, rebalanceMs: 100 });
    const seen = newSeen();
    const h = await makeRedis(t, cfg, seen);
    const probe = actorClient(h.rt, probeProtocol);
    await probe.ask('k', { kind: 'own' });
    const before = seen.owned.get('k')!;
    const redis = new Redis(redisUrl);
    t.after(() => redis.disconnect());
    const lease = `${cfg.keyPrefix}:lease:probe:0`;
    await redis.set(lease, 'another-worker', 'PX', 60_000);
    await waitFor(() => before.aborted, 5_000, 'ownership ended with the lease');
    await redis.del(lease);
    await probe.ask('k', { kind: 'own' }, 5_000);
    const after = seen.owned.get('k')!;
    assert.notEqual(after, before);
    assert.equal(after.aborted, false);
  });

  test('ctx.owned is aborted for the keys of a shard a worker gives to a worker that joins, and only for those', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 2, leaseTtlMs: 1_000, leaseRenewMs: 100, rebalanceMs: 100 });
    const first = await makeRedis(t, cfg, newSeen());
    const probe = actorClient(first.rt, probeProtocol);
    // Keys on both shards: one of them is about to move.
    const keys = Array.from({ length: 8 }, (_, i) => `key-${i}`);
    for (const key of keys) await probe.ask(key, { kind: 'own' });
    const signals = keys.map((k) => first.seen.owned.get(k)!);
    assert.ok(signals.every((s) => !s.aborted));
    const joined = new RedisTransport(redisUrl, cfg, `node-joined-${cfg.keyPrefix}`, createLogger('silent'));
    const joinedSeen = newSeen();
    await joined.start([probeActor(joinedSeen, () => first.events)], { consume: true });
    t.after(() => joined.stop());
    await waitFor(() => signals.some((s) => s.aborted), 5_000, 'a shard released to the new worker');
    const moved = keys.filter((_, i) => signals[i]!.aborted);
    assert.ok(
      moved.length > 0 && moved.length < keys.length,
      `the keys of one shard of two moved (${moved.length} of ${keys.length})`,
    );
    // The moved keys now run on the worker that joined, under a live signal.
    for (const key of moved) await actorClient(joined, probeProtocol).ask(key, { kind: 'own' }, 5_000);
    for (const key of moved) assert.equal(joinedSeen.owned.get(key)?.aborted, false);
  });

  test('a message whose worker died after emitting is emitted once by the next owner', async (t) => {
    if (!redisUrl) return t.skip('REDIS_URL not set');
    const cfg = testRuntimeConfig({ defaultShards: 1, leaseTtlMs: 600, leaseRenewMs: 100 });
    const seen = newSeen();
    const dyingSeen = newSeen();
    const dying = new RedisTransport(redisUrl, cfg, 'w-dying', createLogger('silent'));
    let dyingEvents: EventStream | undefined;
    // The dying worker emits, then hangs before acknowledging: its crash leaves the entry pending.
    const hanging = defineActor(probeProtocol, {
      handlers: {
        async emit(ctx) {
          await dyingEvents!.append(
            [domainEvent('relay.online', { tenantId: 'org_probe' }, {}, ctx.derivedId('probe.emitted'))],
            { once: true },
          );
          await ctx.send(probeProtocol, ctx.key, { kind: 'tick', from: ctx.id }, { delayMs: 50 });
          await new Promise(() => {});
        },
        tick: (_ctx, msg) => void dyingSeen.ticks.push(msg.from),
        terminal: () => {},
        retryable: () => {},
        missing: () => {},
        count: () => {},
        hang: () => {},
        own: () => {},
      },
    });
    await dying.start([hanging], { consume: true });
    dyingEvents = new RedisEventStream(dying.connection, `${cfg.keyPrefix}:events`, cfg.dedupeTtlMs);
    const id = await actorClient(dying, probeProtocol).send('k', { kind: 'emit', failFirst: 0 });
    await sleep(300);
    const crashed = dying as unknown as {
      stopping: boolean;
      loops: NodeJS.Timeout[];
      cmd: Redis;
      reader: Redis;
      sub: Redis;
    };
    crashed.stopping = true;
    for (const timer of crashed.loops) clearInterval(timer);
    for (const conn of [crashed.cmd, crashed.reader, crashed.sub]) conn.disconnect();
    const heir = await makeRedis(t, cfg, seen);
    await waitFor(() => (seen.deliveries.get(id)?.length ?? 0) === 1, 5_000, 'redelivered to the heir');
    await waitFor(() => seen.ticks.length >= 1, 5_000, 'the timer');
    await sleep(400);
    assert.deepEqual(seen.ticks, [id], 'one timer');
    assert.equal((await heir.readEvents()).length, 1, 'one event');
  });
});
