import assert from 'node:assert/strict';
import { test } from 'node:test';
import { changeEventId } from '../../src/events/event-stream.ts';
import { digestId, idTimeChars, isId, newId, newOrderedId } from '../../src/ids.ts';
import { conversationIdOf } from '../../src/messages/recipients.ts';
import { derivedId } from '../../src/runtime/envelope.ts';

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

test('ids that follow from what they name stay what earlier versions stored (conversations, derived envelopes, events)', () => {
  // Written by the versions before digestId; a stored conversation or a redelivered emission must keep its id.
  assert.equal(conversationIdOf('org_a', 'team_b', '+14155550100'), 'conv_L49Gl-UDl5Y-hHjiPX075xlc');
  assert.equal(derivedId('env_1', 'deliver'), 'L33ArThJ-2Y1AJwVaw-XEVQw');
  assert.equal(changeEventId('message.sent', 'msg_ABCDEFGHxyz'), 'evt_ABCDEFGHHD4Iiq2F_yKnWq');
  assert.equal(digestId('a', 43).length, 43);
});
