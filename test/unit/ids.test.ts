import assert from 'node:assert/strict';
import { test } from 'node:test';
import { changeEventId } from '../../src/events/event-stream.ts';
import { idTimeChars, isId, newId, newOrderedId } from '../../src/ids.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('an ordered id has the shape of any other id and is unique', () => {
  const ids = Array.from({ length: 10_000 }, () => newOrderedId('msg'));
  for (const id of ids.slice(0, 100)) assert.ok(isId('msg', id), id);
  assert.equal(new Set(ids).size, ids.length);
  assert.equal(newOrderedId('msg').length, newId('msg').length);
});

test('ordered ids made later sort after earlier ones, byte by byte (as the store compares them)', async () => {
  const made: string[] = [];
  for (let i = 0; i < 5; i++) {
    made.push(newOrderedId('msg'));
    await sleep(3);
  }
  assert.deepEqual([...made].sort(), made);
  const buffers = made.map((id) => Buffer.from(id));
  for (let i = 1; i < buffers.length; i++) assert.ok(Buffer.compare(buffers[i - 1]!, buffers[i]!) < 0);
  // The time is in the leading characters: ids of the same millisecond share them, later ones differ there.
  assert.notEqual(made[0]!.slice(4, 4 + idTimeChars), made[4]!.slice(4, 4 + idTimeChars));
});

test("a change's event id is fixed by the change and, for an ordered subject, sorts with it", async () => {
  const first = newOrderedId('msg');
  await sleep(3);
  const second = newOrderedId('msg');
  assert.equal(
    changeEventId('message.sent', first),
    changeEventId('message.sent', first),
    'the same change, the same id',
  );
  assert.notEqual(
    changeEventId('message.sent', first),
    changeEventId('message.failed', first),
    'another change of it, another id',
  );
  assert.ok(changeEventId('message.queued', first) < changeEventId('message.queued', second));
  assert.ok(isId('evt', changeEventId('message.queued', first)));
  assert.ok(isId('evt', changeEventId('relay.online', `rly_x\u0000session`)), 'any subject makes a well-formed id');
});
