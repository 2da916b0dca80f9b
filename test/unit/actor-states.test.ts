import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActorStates } from '../../src/runtime/actor-states.ts';
import { RecentIds } from '../../src/runtime/recent-ids.ts';

test('a state expires after the idle time, unless a handler is running on it', () => {
  const states = new ActorStates(1_000);
  const a = states.begin('tenant', 'a');
  states.activate(a, { n: 1 });
  states.end(a);
  const b = states.begin('tenant', 'b'); // still running
  const now = Date.now();
  states.expire(now + 500);
  assert.equal(states.size, 2);
  states.expire(now + 1_500);
  assert.equal(states.size, 1, 'the idle one went; the busy one stays');
  states.end(b);
  states.expire(Date.now() + 1_500);
  assert.equal(states.size, 0);
});

test("dropping a shard's keys leaves other types and keys alone", () => {
  const states = new ActorStates(60_000);
  for (const key of ['a', 'b', 'c']) states.end(states.begin('tenant', key));
  states.end(states.begin('relay', 'a'));
  assert.equal(
    states.dropWhere('tenant', (key) => key !== 'b'),
    2,
  );
  assert.equal(states.size, 2);
  const again = states.begin('tenant', 'a');
  assert.equal(again.activated, false, 'a dropped key is activated again');
});

test('an id is remembered for its ttl, then forgotten', () => {
  const ids = new RecentIds(1_000);
  assert.equal(ids.add('x', 0), true);
  assert.equal(ids.add('x', 999), false);
  assert.equal(ids.add('y', 999), true);
  assert.equal(ids.add('x', 1_000), true, 'expired: new again');
});
