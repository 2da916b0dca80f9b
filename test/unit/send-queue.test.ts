import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { QueueItem } from '../../src/actors/tenant/protocol.ts';
import { priorityBands, SendQueue } from '../../src/actors/tenant/send-queue.ts';

const item = (id: string, source?: string, priority = 0): QueueItem => ({
  id,
  priority,
  fromNumber: null,
  ...(source ? { source } : {}),
});
const takeAll = (q: SendQueue) => q.take(() => true).map((m) => m.id);
/** What a relay with room for one send at a time gets, pump after pump. */
const oneByOne = (q: SendQueue, n: number) =>
  Array.from({ length: n }, () => q.take((_m) => true, 1).map((m) => m.id)[0]);

test('higher priority first; first in first out within a source', () => {
  const q = new SendQueue();
  q.push(item('low1'));
  q.push(item('high1', undefined, 90));
  q.push(item('low2'));
  q.push(item('high2', undefined, 90));
  assert.deepEqual(takeAll(q), ['high1', 'high2', 'low1', 'low2']);
  assert.equal(q.size, 0);
});

test('within a priority the sources take turns: jobs, group sends and single sends', () => {
  const q = new SendQueue();
  for (let i = 1; i <= 5; i++) q.push(item(`a${i}`, 'job_a'));
  for (let i = 1; i <= 3; i++) q.push(item(`b${i}`, 'job_b'));
  q.push(item('s1'));
  q.push(item('s2'));
  assert.deepEqual(takeAll(q), ['a1', 'b1', 's1', 'a2', 'b2', 's2', 'a3', 'b3', 'a4', 'a5']);
});

test('a single send queued after a 2,000-message job goes second, pump after pump', () => {
  const q = new SendQueue();
  for (let i = 0; i < 2_000; i++) q.push(item(`j${i}`, 'job_big'));
  q.push(item('single'));
  const order = oneByOne(q, 4);
  assert.deepEqual(order, ['j0', 'single', 'j1', 'j2']);
  assert.equal(q.size, 1_997);
});

test('turns carry over from one take to the next', () => {
  const q = new SendQueue();
  for (let i = 0; i < 3; i++) q.push(item(`a${i}`, 'a'));
  for (let i = 0; i < 3; i++) q.push(item(`b${i}`, 'b'));
  assert.deepEqual(oneByOne(q, 6), ['a0', 'b0', 'a1', 'b1', 'a2', 'b2']);
});

test('a message the pick passes over keeps its place; a handed-back one goes first in its source; duplicates are ignored', () => {
  const q = new SendQueue();
  q.push(item('x1', 'job'));
  q.push(item('x2', 'job'));
  q.push(item('x3', 'job'));
  q.push(item('x2', 'job'));
  assert.equal(q.size, 3);
  assert.deepEqual(
    q.take((m) => m.id !== 'x1').map((m) => m.id),
    ['x2', 'x3'],
  );
  assert.ok(q.has('x1'));
  q.pushFront(item('x0', 'job'));
  q.push(item('x4', 'job'));
  assert.deepEqual(takeAll(q), ['x0', 'x1', 'x4']);
});

test('stop ends the scan and the scan limit bounds it', () => {
  const q = new SendQueue();
  for (let i = 0; i < 10; i++) q.push(item(`m${i}`, i % 2 ? 'odd' : 'even'));
  let n = 0;
  assert.deepEqual(
    q.take(() => (++n > 3 ? 'stop' : true)).map((m) => m.id),
    ['m0', 'm1', 'm2'],
  );
  assert.equal(q.take(() => false, 4).length, 0);
  assert.equal(q.size, 7);
  q.clear();
  assert.equal(q.size, 0);
  assert.deepEqual(takeAll(q), []);
});

test('a long job drains from the head without losing order', () => {
  const q = new SendQueue();
  for (let i = 0; i < 5_000; i++) q.push(item(`j${i}`, 'job'));
  const seen: string[] = [];
  while (q.size > 0) seen.push(...q.take(() => true, 7).map((m) => m.id));
  assert.deepEqual(
    seen,
    Array.from({ length: 5_000 }, (_, i) => `j${i}`),
  );
});

test('an id is queued once; a handed-back single send goes before younger ones of its priority', () => {
  const q = new SendQueue();
  q.push(item('a'));
  q.push(item('a'));
  q.push(item('b'));
  q.pushFront(item('back'));
  q.pushFront(item('b'));
  assert.equal(q.size, 3);
  assert.deepEqual(takeAll(q), ['back', 'a', 'b']);
});

test("take keeps what pick declines, stops at 'stop', and looks at no more than the scan limit", () => {
  const q = new SendQueue();
  for (let i = 0; i < 10; i++) q.push(item(`m${i}`));
  assert.deepEqual(
    q.take((i) => i.id !== 'm1' && (i.id === 'm4' ? 'stop' : true)).map((i) => i.id),
    ['m0', 'm2', 'm3'],
  );
  assert.equal(q.size, 7);
  assert.ok(q.has('m1') && q.has('m4'));
  assert.deepEqual(
    q.take(() => true, 2).map((i) => i.id),
    ['m1', 'm4'],
  );
  assert.equal(q.size, 5);
});

test('priorities outside 0..100 are clamped, not lost', () => {
  const q = new SendQueue();
  q.push(item('low', undefined, -5));
  q.push(item('high', undefined, 1_000));
  q.push(item('mid', undefined, 50));
  assert.deepEqual(takeAll(q), ['high', 'mid', 'low']);
});

test('the oldest waiting message of each priority band: a handed-back message counts from when it was first queued', () => {
  const q = new SendQueue();
  assert.deepEqual(q.oldestByBand(), [undefined, undefined, undefined, undefined]);
  q.push({ id: 'a', priority: 0, fromNumber: null, queuedAt: 1_000 });
  q.push({ id: 'b', priority: 0, fromNumber: null, source: 'job_1', queuedAt: 500 });
  q.push({ id: 'c', priority: 50, fromNumber: null, queuedAt: 2_000 });
  q.push({ id: 'd', priority: 100, fromNumber: null });
  const [zero, low, mid, high] = q.oldestByBand();
  assert.equal(zero, 500, 'the oldest head of the sources in the band');
  assert.equal(low, undefined);
  assert.equal(mid, 2_000);
  assert.ok(high !== undefined && Math.abs(high - Date.now()) < 1_000, 'without a time, from when the queue took it');
  const [taken] = q.take((item) => item.id === 'b');
  assert.equal(q.oldestByBand()[0], 1_000);
  q.pushFront(taken!);
  assert.equal(q.oldestByBand()[0], 500);
  assert.equal(priorityBands.map((b) => b.band).join(' '), '0 1-33 34-66 67-100');
});
