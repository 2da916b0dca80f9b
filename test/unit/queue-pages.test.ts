import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { QueueItem } from '../../src/actors/tenant/protocol.ts';
import { PagedQueue, type QueuePart } from '../../src/actors/tenant/queue-pages.ts';

const item = (n: number, fields: Partial<QueueItem> = {}): QueueItem => ({
  id: `msg_${String(n).padStart(3, '0')}`,
  priority: 0,
  fromNumber: null,
  acceptedAt: 1_000 + n,
  ...fields,
});
const takeAll = (q: PagedQueue) => q.take(() => true).map((m) => m.id);
const part = (q: PagedQueue, priority = 0): QueuePart => [...q.partitions()].find((p) => p.priority === priority)!;

test('arrivals beyond a full window are counted, not held; a page brings them from the frontier, and a short page ends the tail', () => {
  const q = new PagedQueue(3);
  for (let n = 0; n < 5; n++) q.push(item(n));
  assert.equal(q.size, 5);
  assert.equal(q.held, 3);
  assert.deepEqual(part(q).frontier, { at: 1_002, id: 'msg_002' });
  assert.deepEqual(
    q.wanting().map((p) => p.priority),
    [],
    'a full window wants no page',
  );
  assert.deepEqual(takeAll(q), ['msg_000', 'msg_001', 'msg_002']);
  assert.equal(q.size, 2);
  const [wanting] = q.wanting();
  assert.ok(wanting, 'an emptied window with more in the store wants a page');
  q.applyPage(wanting, { items: [item(3), item(4)], last: { at: 1_004, id: 'msg_004' }, full: false });
  assert.equal(q.size, 2);
  assert.equal(part(q).tail, false);
  q.push(item(5));
  assert.equal(q.held, 3, 'with no tail, an arrival is held again');
  assert.deepEqual(takeAll(q), ['msg_003', 'msg_004', 'msg_005']);
  assert.equal(q.size, 0);
});

test('a message at or before the frontier (a retry, a hand-back) is held whatever the window; a page skips what is held', () => {
  const q = new PagedQueue(2);
  for (let n = 0; n < 4; n++) q.push(item(n));
  assert.deepEqual(takeAll(q), ['msg_000', 'msg_001']);
  q.pushFront(item(0));
  assert.equal(q.held, 1);
  const [wanting] = q.wanting();
  q.applyPage(wanting!, { items: [item(0), item(2)], last: { at: 1_002, id: 'msg_002' }, full: true });
  assert.equal(q.held, 2, 'msg_000 was held already');
  assert.equal(q.size, 3, 'msg_003 is still counted in the store');
});

test("the recovery's count is not counted again by an arrival accepted before it; one accepted after it is", () => {
  const q = new PagedQueue(2);
  q.seed(0, null, undefined, 10, 1_050);
  assert.equal(q.size, 10);
  q.push(item(20));
  assert.equal(q.size, 10, 'accepted before the count: maybe in it already, left to a page');
  q.push(item(60));
  assert.equal(q.size, 11);
  assert.equal(q.held, 0);
});

test('a hand-out stops before a lower priority once a window with more in the store is empty', () => {
  const q = new PagedQueue(2);
  for (let n = 0; n < 3; n++) q.push(item(n, { priority: 80 }));
  q.push(item(10, { priority: 10 }));
  assert.deepEqual(takeAll(q), ['msg_000', 'msg_001'], 'msg_002 (priority 80, in the store) goes before msg_010');
  const [wanting] = q.wanting();
  q.applyPage(wanting!, { items: [item(2, { priority: 80 })], last: { at: 1_002, id: 'msg_002' }, full: false });
  assert.deepEqual(takeAll(q), ['msg_002', 'msg_010']);
});

test("a closed source's messages in the store are no longer counted", () => {
  const q = new PagedQueue(1);
  for (let n = 0; n < 4; n++) q.push(item(n, { source: 'job_a' }));
  q.push(item(9));
  assert.equal(q.size, 5);
  q.dropSource('job_a');
  assert.equal(q.size, 2, 'its held message stays until the hand-out drops it');
});
