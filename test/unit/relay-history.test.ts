import assert from 'node:assert/strict';
import { test } from 'node:test';
import { onlineShare, onlineSpans, type RelayEvent } from '../../web/relay-history.ts';

const at = (min: number) => new Date(Date.UTC(2026, 0, 1, 0, min)).toISOString();
const ev = (event: 'relay.online' | 'relay.offline', min: number, id = 'rly_a'): RelayEvent => ({
  event,
  timestamp: at(min),
  data: { id, name: 'mac', status: event.slice(6) },
});
const ms = (min: number) => Date.parse(at(min));

test("a relay's events cut the window into online and offline stretches, in time order whatever order they come in", () => {
  const events = [
    ev('relay.offline', 40),
    ev('relay.online', 10),
    ev('relay.online', 50),
    ev('relay.online', 5, 'rly_other'),
  ];
  assert.deepEqual(onlineSpans(events, 'rly_a', ms(0), ms(60)), [
    { start: ms(0), end: ms(10), online: null },
    { start: ms(10), end: ms(40), online: true },
    { start: ms(40), end: ms(50), online: false },
    { start: ms(50), end: ms(60), online: true },
  ]);
  assert.equal(onlineShare(onlineSpans(events, 'rly_a', ms(0), ms(60))), 40 / 50);
});

test('the state at the start of the window is the last one before it; a repeated state and events after the window change nothing', () => {
  const events = [
    ev('relay.online', -30),
    ev('relay.offline', -20),
    ev('relay.offline', 15),
    ev('relay.online', 30),
    ev('relay.online', 45),
    ev('relay.offline', 70),
  ];
  assert.deepEqual(onlineSpans(events, 'rly_a', ms(0), ms(60)), [
    { start: ms(0), end: ms(30), online: false },
    { start: ms(30), end: ms(60), online: true },
  ]);
  assert.equal(onlineShare(onlineSpans(events, 'rly_a', ms(0), ms(60))), 0.5);
});

test('no event: one stretch nobody can speak for, and no share', () => {
  assert.deepEqual(onlineSpans([], 'rly_a', ms(0), ms(60)), [{ start: ms(0), end: ms(60), online: null }]);
  assert.equal(onlineShare(onlineSpans([], 'rly_a', ms(0), ms(60))), null);
});
