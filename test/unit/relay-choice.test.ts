import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pickRelay, type RelayCredit } from '../../src/actors/tenant/relay-choice.ts';

const relay = (id: string, capacity: number, inFlight: number, phoneNumbers: string[] = []): RelayCredit => ({
  id,
  capacity,
  phoneNumbers,
  credits: capacity - inFlight,
});

test('the least busy relay with credit, by share of its capacity', () => {
  const a = relay('a', 10, 5);
  const b = relay('b', 2, 0);
  const c = relay('c', 4, 1);
  assert.equal(pickRelay([a, b, c], null, [a, b, c])?.id, 'b');
  assert.equal(pickRelay([a, c], null, [a, b, c])?.id, 'c');
  assert.equal(pickRelay([], null, [a, b, c]), undefined);
});

test('a message from a number goes to the relay that owns it, and waits when that relay is full', () => {
  const owner = relay('owner', 2, 1, ['+14155550100']);
  const idle = relay('idle', 10, 0);
  assert.equal(pickRelay([owner, idle], '+14155550100', [owner, idle])?.id, 'owner');
  const full = relay('owner', 1, 1, ['+14155550100']);
  assert.equal(pickRelay([idle], '+14155550100', [full, idle]), undefined, 'not given to another relay');
});

test('a number no online relay owns goes to any relay with credit', () => {
  const a = relay('a', 2, 1, ['+14155550100']);
  const b = relay('b', 2, 0);
  assert.equal(pickRelay([a, b], '+19995550100', [a, b])?.id, 'b');
});

test('a line with relays goes to the first of them online, waits for its credit, and waits with none online', () => {
  const chain = ['primary', 'standby', 'second'];
  const primary = relay('primary', 2, 0);
  const standby = relay('standby', 2, 0);
  const second = relay('second', 2, 0);
  const idle = relay('idle', 10, 0, ['+14155550100']);
  const all = [primary, standby, second, idle];
  assert.equal(pickRelay(all, '+14155550100', all, chain)?.id, 'primary', 'the primary, over the owner by hello');
  const busy = relay('primary', 1, 1);
  assert.equal(pickRelay([standby, idle], '+14155550100', [busy, standby, idle], chain), undefined, 'waits for it');
  assert.equal(pickRelay([standby, second], '+14155550100', [standby, second], chain)?.id, 'standby', 'failover');
  assert.equal(pickRelay([second], '+14155550100', [second, idle], chain)?.id, 'second');
  assert.equal(pickRelay([idle], '+14155550100', [idle], chain), undefined, 'none of its relays online');
  assert.equal(pickRelay(all, '+14155550100', all, chain)?.id, 'primary', 'failback');
  assert.equal(pickRelay([idle], null, [busy, idle], chain)?.id, 'idle', 'no line: any relay with credit');
});
