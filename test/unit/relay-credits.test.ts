import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RelayCredits } from '../../src/actors/relay/relay-credits.ts';

const ready = (capacity: number) => {
  const c = new RelayCredits();
  c.capacity = capacity;
  return c;
};

/** A relay of this capacity whose free credits were granted to join `e1`, which handed over `handedOver` sends since. */
const granted = (capacity: number, handedOver: number, epoch = 'e1') => {
  const c = ready(capacity);
  c.attach(1, 'e1');
  c.due();
  c.consumed(epoch, handedOver);
  return c;
};

test('nothing is granted before a tenant activation attaches', () => {
  const c = ready(3);
  assert.equal(c.due(), undefined);
  c.attach(1, 'e1');
  assert.deepEqual(c.due(), { session: 1, epoch: 'e1', credits: 3, capacity: 3 });
  assert.equal(c.due(), undefined, 'granted once');
});

test('a send in flight takes a credit until it settles; only its own attempt settles it', () => {
  const c = granted(2, 1);
  c.add('m1', 1);
  assert.equal(c.due(), undefined, 'the credit was used, nothing new is free');
  assert.equal(c.settle('m1', 2), false, 'another attempt');
  assert.equal(c.settle('m1', 1), true);
  assert.equal(c.settle('m1', 1), false, 'settled once');
  assert.equal(c.due()?.credits, 1);
});

test('a hand-over nobody could claim gives its credit back', () => {
  const c = granted(2, 2);
  c.add('m1', 1); // m2 was cancelled before its claim
  assert.equal(c.due()?.credits, 1);
});

test('what is in flight when an activation attaches is not granted; a new attach starts counting again', () => {
  const c = ready(3);
  c.add('m1', 1);
  c.attach(4, 'e1');
  assert.equal(c.due()?.credits, 2);
  c.attach(4, 'e2'); // the tenant actor was activated again: e1's credits died with it
  assert.deepEqual(c.due(), { session: 4, epoch: 'e2', credits: 2, capacity: 3 });
});

test('hand-overs of another join are not counted against this one', () => {
  const c = granted(2, 1, 'e0');
  c.add('m1', 1);
  assert.equal(c.due()?.credits, -1, 'the relay took more than it granted: the tenant holds one less');
});

test('a smaller capacity takes credits back; a detached relay grants nothing', () => {
  const c = granted(4, 0);
  c.capacity = 1;
  assert.equal(c.due()?.credits, -3);
  c.detach();
  c.capacity = 5;
  assert.equal(c.due(), undefined);
});
