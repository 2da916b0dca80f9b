import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Value } from '@sinclair/typebox/value';
import { queueItem, queueItemOf } from '../../src/actors/tenant/protocol.ts';

const stored = {
  id: 'msg_1',
  priority: 5,
  fromNumber: '+15550001111',
  to: '+15550002222',
  createdAt: '2026-01-01T00:00:00.000Z',
};

test('a message read back from the store has waited since it was accepted; one handed over as it is queued leaves that to the queue; both carry their place in the store', () => {
  const acceptedAt = Date.parse('2026-01-01T00:00:00.000Z');
  assert.deepEqual(queueItemOf(stored, 'accepted'), {
    id: 'msg_1',
    priority: 5,
    fromNumber: '+15550001111',
    to: '+15550002222',
    queuedAt: acceptedAt,
    acceptedAt,
  });
  assert.deepEqual(queueItemOf(stored, 'taken'), {
    id: 'msg_1',
    priority: 5,
    fromNumber: '+15550001111',
    to: '+15550002222',
    acceptedAt,
  });
  const unreadable = queueItemOf({ ...stored, createdAt: 'not a time' }, 'accepted');
  assert.equal('queuedAt' in unreadable || 'acceptedAt' in unreadable, false);
});

test("a queued message's source is its bulk job, else its group send, else none; every item fits the protocol's schema", () => {
  const items = [
    queueItemOf({ ...stored, jobId: 'job_1' }, 'taken'),
    queueItemOf({ ...stored, parentId: 'msg_parent' }, 'accepted'),
    queueItemOf(stored, 'accepted'),
  ];
  assert.deepEqual(
    items.map((i) => i.source),
    ['job_1', 'msg_parent', undefined],
  );
  for (const item of items) assert.ok(Value.Check(queueItem, item), JSON.stringify(item));
});
