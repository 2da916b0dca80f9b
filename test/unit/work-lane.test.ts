import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import { Type } from '@sinclair/typebox';
import { createLogger } from '../../src/log.ts';
import { actorClient, defineActor, defineProtocol, inSteps, workClass } from '../../src/runtime/actor.ts';
import { LocalTransport } from '../../src/runtime/local-transport.ts';
import { Mailboxes } from '../../src/runtime/mailboxes.ts';
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
