import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RedisKeys } from '../../src/runtime/redis-keys.ts';

test('on one Redis server the keys keep the names a deployment already has', () => {
  const keys = new RedisKeys('rt', false);
  const shard = keys.shard('tenant', 3);
  assert.deepEqual(
    [
      shard.stream,
      shard.timers,
      shard.lease,
      shard.deadLetters,
      shard.sent('m1'),
      keys.events,
      keys.members,
      keys.replyChannel('n1'),
      keys.nodeChannel('n1'),
    ],
    [
      'rt:tenant:3',
      'rt:tenant:3:timers',
      'rt:lease:tenant:3',
      'rt:tenant:dlq',
      'rt:sent:m1',
      'rt:events',
      'rt:members',
      'rt:reply:n1',
      'rt:node:n1',
    ],
  );
  assert.deepEqual(keys.deadLetterStreams('tenant', 16), ['rt:tenant:dlq']);
});

test("on a cluster a shard's keys carry its hash tag, and each shard has its dead letters beside it", () => {
  const keys = new RedisKeys('rt', true);
  const shard = keys.shard('tenant', 3);
  assert.deepEqual(
    [
      shard.stream,
      shard.timers,
      shard.lease,
      shard.deadLetters,
      shard.sent('m1'),
      keys.events,
      keys.replyChannel('n1'),
      keys.nodeChannel('n1'),
    ],
    [
      '{rt:tenant:3}',
      '{rt:tenant:3}:timers',
      '{rt:tenant:3}:lease',
      '{rt:tenant:3}:dlq',
      '{rt:tenant:3}:sent:m1',
      '{rt:events}',
      '{rt:node:n1}:reply',
      '{rt:node:n1}',
    ],
  );
  assert.deepEqual(keys.deadLetterStreams('tenant', 2), ['{rt:tenant:0}:dlq', '{rt:tenant:1}:dlq']);
});
