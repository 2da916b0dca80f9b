import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { Type } from '@sinclair/typebox';
import { createLogger } from '../../src/log.ts';
import { actorClient, defineActor, defineProtocol, inSteps, workClass } from '../../src/runtime/actor.ts';
import { LocalTransport } from '../../src/runtime/local-transport.ts';
import { Mailboxes } from '../../src/runtime/mailboxes.ts';
import { newEnvelope, readEnvelope, tenantOfEnvelope } from '../../src/runtime/envelope.ts';
import { maxShareWeight, setShareWeights, shareWeightOf } from '../../src/runtime/share-weights.ts';
import { WorkLane } from '../../src/runtime/work-lane.ts';
import { afterInteractive, commitFirst, nextTurn } from '../../src/runtime/ahead-of-bulk.ts';
import { testRuntimeConfig } from '../integration/runtime-contract.ts';

interface Item {
  name: string;
  cls: 1 | 3;
}

/** Mailboxes whose handler records each item's start, and holds each bulk item for a turn (its write's commit). */
function recorded() {
  const started: string[] = [];
  const boxes = new Mailboxes<Item>(
    async (items) => {
      for (const item of items) started.push(item.name);
      if (items[0]!.cls === 3) await turn();
    },
    () => false,
    256,
    (item) => item.cls,
  );
  return { started, boxes };
}

test('an interactive item posted after bulk items of other keys is handled before them', async () => {
  const { started, boxes } = recorded();
  for (const name of ['job 1', 'job 2', 'job 3']) boxes.post(name, { name, cls: 3 });
  boxes.post('single', { name: 'single', cls: 1 });
  await boxes.idle();
  assert.deepEqual(started, ['single', 'job 1', 'job 2', 'job 3']);
});

test('one bulk step at a time: an interactive item posted during a bulk step goes before the next bulk step', async () => {
  const { started, boxes } = recorded();
  for (const name of ['job 1', 'job 2']) boxes.post(name, { name, cls: 3 });
  while (started.length === 0) await turn();
  assert.deepEqual(started, ['job 1'], 'the second bulk step waits for the first');
  boxes.post('single', { name: 'single', cls: 1 });
  await boxes.idle();
  assert.deepEqual(started, ['job 1', 'single', 'job 2']);
});

test('a bulk item and an interactive item of one key keep their order', async () => {
  const { started, boxes } = recorded();
  boxes.post('tenant', { name: 'job', cls: 3 });
  boxes.post('tenant', { name: 'single', cls: 1 });
  await boxes.idle();
  assert.deepEqual(started, ['job', 'single']);
});

test('the in-process transport serves a message sent as bulk work after interactive ones sent later', async () => {
  const protocol = defineProtocol('lane', { ping: { n: Type.Number() } });
  const handled: string[] = [];
  const rt = new LocalTransport(testRuntimeConfig(), createLogger('silent'));
  await rt.start([
    defineActor(protocol, {
      handlers: {
        async ping(ctx, m) {
          handled.push(`${ctx.key}:${m.n}`);
        },
      },
    }),
  ]);
  const client = actorClient(rt, protocol);
  await client.send('job', { kind: 'ping', n: 1 }, { workClass: workClass.bulk });
  await client.send('single', { kind: 'ping', n: 2 });
  for (let i = 0; i < 1_000 && handled.length < 2; i++) await turn();
  await rt.stop();
  assert.deepEqual(handled, ['single:2', 'job:1']);
});

/** Spins for `ms`: a synchronous store write's cost. */
function spin(ms: number): void {
  for (const until = performance.now() + ms; performance.now() < until;);
}

test('inSteps sizes pieces by the time their synchronous part takes, in order, a turn between two', async () => {
  const items = Array.from({ length: 400 }, (_, i) => i);
  const pieces: number[][] = [];
  await inSteps(items, async (piece) => {
    pieces.push(piece);
    spin(piece.length * 0.5); // 0.5 ms an item: about 4 items make a 2 ms step
  });
  assert.deepEqual(pieces.flat(), items, 'every item once, in order');
  assert.equal(pieces[0]!.length, 50, 'the first piece');
  assert.ok(
    pieces.slice(1).every((p) => p.length <= 10),
    `later pieces shrink to about 2 ms: ${pieces.map((p) => p.length).join(',')}`,
  );
});

test('inSteps grows pieces to their bound when the step costs nothing synchronously (a remote database)', async () => {
  const items = Array.from({ length: 5_000 }, (_, i) => i);
  const sizes: number[] = [];
  await inSteps(items, async (piece) => void sizes.push(piece.length), { maxPiece: 1_000 });
  assert.equal(
    sizes.reduce((a, b) => a + b),
    5_000,
  );
  assert.ok(sizes.includes(1_000), `grows to 1,000: ${sizes.join(',')}`);
});

/** Mailboxes whose bulk items name their tenant: `tenant/step`. */
function tenantBoxes(weights: Record<string, number> = {}) {
  const started: string[] = [];
  const lane = new WorkLane(2, 1, (tenant) => weights[tenant] ?? 1);
  const run = (name: string) =>
    lane.run(workClass.bulk, async () => void started.push(name), name.split('/')[0]!).then(() => undefined);
  return { started, run };
}

test('within a class tenants take turns: a job queued first does not hold back another tenant’s steps', async () => {
  const { started, run } = tenantBoxes();
  const all = [...['a/1', 'a/2', 'a/3', 'a/4'].map(run), ...['b/1', 'b/2'].map(run)];
  await Promise.all(all);
  assert.deepEqual(started, ['a/1', 'b/1', 'a/2', 'b/2', 'a/3', 'a/4']);
});

test('a tenant of weight 3 takes three steps at its turn for one of a tenant at 1', async () => {
  const { started, run } = tenantBoxes({ b: 3 });
  const all = [...['a/1', 'a/2', 'a/3'].map(run), ...['b/1', 'b/2', 'b/3', 'b/4', 'b/5'].map(run)];
  await Promise.all(all);
  assert.deepEqual(started, ['a/1', 'b/1', 'b/2', 'b/3', 'a/2', 'b/4', 'b/5', 'a/3']);
});

test('the tenant ring serves lower classes first, whatever the tenants', async () => {
  const started: string[] = [];
  const lane = new WorkLane(2, 1, () => 1);
  const all = [
    lane.run(workClass.maintenance, async () => void started.push('a/sweep'), 'a'),
    lane.run(workClass.bulk, async () => void started.push('b/job'), 'b'),
    lane.run(workClass.bulk, async () => void started.push('a/job'), 'a'),
  ];
  await Promise.all(all);
  assert.deepEqual(started, ['b/job', 'a/job', 'a/sweep']);
});

test('share weights: 1 by default, set ones clamped to 1..16, a new table replaces the old', () => {
  setShareWeights({ big: 4, huge: 1_000, odd: 0, bad: Number.NaN });
  assert.equal(shareWeightOf('big'), 4);
  assert.equal(shareWeightOf('huge'), maxShareWeight);
  assert.equal(shareWeightOf('odd'), 1);
  assert.equal(shareWeightOf('bad'), 1);
  assert.equal(shareWeightOf('other'), 1);
  setShareWeights({});
  assert.equal(shareWeightOf('big'), 1);
});

test('an envelope sent as bulk work carries its class; an interactive one carries none', () => {
  const bulk = newEnvelope('1', 'tenant', 't1', { kind: 'x', tenantId: 'org_1' }, undefined, workClass.bulk);
  const single = newEnvelope('2', 'relay', 'r1', { kind: 'x' }, undefined, workClass.interactive);
  assert.equal(bulk.workClass, 3);
  assert.equal('workClass' in single, false);
  assert.equal(tenantOfEnvelope(bulk), 'org_1');
  assert.equal(tenantOfEnvelope(single), 'r1');
  const read = readEnvelope(JSON.stringify(bulk));
  assert.ok(read.ok && read.envelope.workClass === 3);
});

test('mailboxes: an organization with many keys of bulk work takes one turn in the ring, as one with a single key', async () => {
  const started: string[] = [];
  const boxes = new Mailboxes<{ name: string }>(
    async (items) => {
      for (const item of items) started.push(item.name);
      await turn();
    },
    () => false,
    256,
    () => workClass.bulk,
    (item) => item.name.split('/')[0]!,
  );
  for (const job of ['a/job1', 'a/job2', 'a/job3', 'a/job4']) boxes.post(job, { name: job });
  boxes.post('b/job', { name: 'b/job' });
  boxes.post('b/job', { name: 'b/job again' });
  await boxes.idle();
  assert.deepEqual(started, ['a/job1', 'b/job', 'a/job2', 'b/job again', 'a/job3', 'a/job4']);
});

/** A store that groups a turn's writes into one commit, as the embedded store does: `write` resolves at the commit. */
function groupCommits() {
  let pending: (() => void)[] = [];
  const commits: number[] = [];
  const commit = () => {
    if (pending.length === 0) return false;
    commits.push(pending.length);
    for (const done of pending.splice(0)) done();
    return true;
  };
  const write = () =>
    new Promise<void>((resolve) => {
      if (pending.length === 0) setImmediate(commit);
      pending.push(resolve);
    });
  return { write, commits, leave: commitFirst(commit) };
}

test('writes made before a bulk step is due are committed first, and what waited on them runs before the step', async () => {
  const store = groupCommits();
  const order: string[] = [];
  const lane = new WorkLane();
  const bulk = lane.run(workClass.bulk, async () => void order.push('bulk step'));
  // A single send's write, made after the step was queued: its answer waits for the commit.
  const answered = store.write().then(() => order.push('answer'));
  await Promise.all([bulk, answered]);
  store.leave();
  assert.deepEqual(order, ['answer', 'bulk step']);
  assert.deepEqual(store.commits, [1], 'one commit, made ahead of the step');
});

test('a write request waiting out its read goes before a bulk step queued before it', async () => {
  const order: string[] = [];
  const lane = new WorkLane();
  const bulk = lane.run(workClass.bulk, async () => void order.push('bulk step'));
  const request = nextTurn().then(() => order.push('request'));
  await Promise.all([bulk, request]);
  assert.deepEqual(order, ['request', 'bulk step']);
});

test('bulk work still gets a slice about every 2 ms while interactive work waits at every turn', async () => {
  let asked = 0;
  const leave = commitFirst(() => ++asked > 0);
  const lane = new WorkLane(2);
  const started: number[] = [];
  const at: number[] = [];
  const began = performance.now();
  await Promise.all(
    [1, 2, 3, 4].map((n) =>
      lane.run(workClass.bulk, async () => {
        started.push(n);
        at.push(performance.now() - began);
      }),
    ),
  );
  leave();
  assert.deepEqual(started, [1, 2, 3, 4]);
  assert.ok(asked > 4, `interactive work went first at several turns before each step (${asked})`);
  // Each step waits about one slice (2 ms) for interactive work; a loaded machine may add to it, never starve it.
  assert.ok(at[3]! < 1_000, `the fourth step started at ${at[3]!.toFixed(1)} ms`);
});

/** Mailboxes that hand waiting items of one key over together, and record each handling's items. */
function batchingBoxes() {
  const handlings: string[][] = [];
  const boxes = new Mailboxes<Item & { tenant: string }>(
    async (items) => {
      handlings.push(items.map((i) => i.name));
      await turn();
    },
    () => true,
    256,
    (item) => item.cls,
    (item) => item.tenant,
  );
  return { handlings, boxes };
}

test('a job alone: its waiting bulk items are handed over together', async () => {
  const { handlings, boxes } = batchingBoxes();
  boxes.post('job', { name: 'first', cls: 3, tenant: 'a' });
  for (const name of ['r1', 'r2', 'r3']) boxes.post('job', { name, cls: 3, tenant: 'a' });
  // Its own organization's interactive work (its relays' reports) does not split it.
  boxes.post('relay', { name: 'own report', cls: 1, tenant: 'a' });
  await boxes.idle();
  assert.deepEqual(
    handlings.filter((h) => h[0] !== 'own report'),
    [['first', 'r1', 'r2', 'r3']],
  );
});

test('while another organization sends, a bulk key’s waiting items are handed over one at a time', async () => {
  const { handlings, boxes } = batchingBoxes();
  boxes.post('single', { name: 'single', cls: 1, tenant: 'b' });
  for (const name of ['r1', 'r2', 'r3']) boxes.post('job', { name, cls: 3, tenant: 'a' });
  await boxes.idle();
  assert.deepEqual(handlings, [['single'], ['r1'], ['r2'], ['r3']]);
});

test('bulk work continuing after its commit lets a request waiting for its turn go first', async () => {
  const order: string[] = [];
  const request = nextTurn().then(() => order.push('request'));
  await afterInteractive();
  order.push('hand-out');
  await request;
  assert.deepEqual(order, ['request', 'hand-out']);
});

test('bulk work continuing after its commit waits about 2 ms at most while interactive work keeps coming', async () => {
  const leave = commitFirst(() => true);
  const began = performance.now();
  await afterInteractive(2);
  leave();
  const waited = performance.now() - began;
  assert.ok(waited >= 2, `it waited for interactive work (${waited.toFixed(1)} ms)`);
  assert.ok(waited < 1_000, `and then went on (${waited.toFixed(1)} ms)`);
});
