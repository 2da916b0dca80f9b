import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyGrant, noteRelays } from '../../src/actors/tenant/tenant-state.ts';
import { tenantState } from './tenant-fixtures.ts';

test('the time since a relay has been online is kept while one is, and dropped when none is', () => {
  const state = tenantState([{ id: 'relay_1', credits: 0 }]);
  noteRelays(state);
  const since = state.relayOnlineSince;
  assert.equal(typeof since, 'number');
  state.relays.set('relay_2', { ...state.relays.get('relay_1')!, id: 'relay_2' });
  noteRelays(state);
  assert.equal(state.relayOnlineSince, since, 'another relay coming online does not restart the clock');
  state.relays.clear();
  noteRelays(state);
  assert.equal(state.relayOnlineSince, undefined);
});

test("a grant counts only for the relay's current session and join; a negative one takes credits back", () => {
  const state = tenantState([{ id: 'relay_1', credits: 0 }]);
  const relay = state.relays.get('relay_1')!;
  assert.equal(applyGrant(state, 'relay_1', { session: 1, epoch: 'epoch_relay_1', credits: 3, capacity: 5 }), 3);
  assert.deepEqual([relay.credits, relay.capacity], [3, 5]);
  assert.equal(applyGrant(state, 'relay_1', { session: 1, epoch: 'an earlier join', credits: 3, capacity: 5 }), 0);
  assert.equal(applyGrant(state, 'relay_1', { session: 2, epoch: 'epoch_relay_1', credits: 3, capacity: 5 }), 0);
  assert.equal(applyGrant(state, 'relay_9', { session: 1, epoch: 'epoch_relay_1', credits: 3, capacity: 5 }), 0);
  assert.equal(relay.credits, 3);
  assert.equal(applyGrant(state, 'relay_1', { session: 1, epoch: 'epoch_relay_1', credits: -2, capacity: 1 }), -2);
  assert.deepEqual([relay.credits, relay.capacity], [1, 1]);
});
