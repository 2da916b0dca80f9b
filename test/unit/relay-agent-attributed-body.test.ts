import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  decodeAttributedBody,
  encodeAttributedBody,
  readAttributedBody,
} from '../../packages/relay-agent/src/attributed-body.ts';

/** An archive laid out as Messages writes one, with the string's length bytes given explicitly. */
function blob(lengthBytes: number[], text: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from([0x04, 0x0b]),
    Buffer.from('streamtyped'),
    Buffer.from([0x81, 0xe8, 0x03, 0x84, 0x01, 0x40, 0x84, 0x84, 0x84, 0x12]),
    Buffer.from('NSAttributedString'),
    Buffer.from([0x00, 0x84, 0x84, 0x08]),
    Buffer.from('NSObject'),
    Buffer.from([0x00, 0x85, 0x92, 0x84, 0x84, 0x84, 0x08]),
    Buffer.from('NSString'),
    Buffer.from([0x01, 0x94, 0x84, 0x01, 0x2b]),
    Buffer.from(lengthBytes),
    text,
    Buffer.from([0x86, 0x84, 0x02, 0x69, 0x49, 0x01, 0x05, 0x92, 0x84, 0x84, 0x84, 0x0c]),
    Buffer.from('NSDictionary'),
  ]);
}

test('a short body follows NSString, the + tag and a one-byte length', () => {
  const text = Buffer.from('Hello 👋 — ça va?', 'utf8');
  assert.equal(decodeAttributedBody(blob([text.length], text)), 'Hello 👋 — ça va?');
});

test('a body of 128 bytes or more uses 0x81 and a two-byte little-endian length', () => {
  const text = Buffer.from('x'.repeat(300) + ' end', 'utf8');
  const length = text.length; // 304 = 0x0130
  const decoded = decodeAttributedBody(blob([0x81, length & 0xff, length >> 8], text));
  assert.equal(decoded, 'x'.repeat(300) + ' end');
});

test('the length is honoured: bytes after the string are not part of the body', () => {
  const text = Buffer.from('exact', 'utf8');
  assert.equal(decodeAttributedBody(blob([3], text)), 'exa');
});

test('blobs without the marker decode to undefined', () => {
  assert.equal(decodeAttributedBody(null), undefined);
  assert.equal(decodeAttributedBody(Buffer.alloc(0)), undefined);
  assert.equal(decodeAttributedBody(Buffer.from('streamtyped NSDictionary nothing here')), undefined);
});

test('a declared length past the end of the blob: the string as far as the blob goes, said to be cut', () => {
  const truncated = blob([0x81, 0xff, 0x00], Buffer.from('short'));
  const held = truncated.subarray(0, truncated.indexOf('short') + 5);
  assert.equal(decodeAttributedBody(held), 'short');
  assert.deepEqual(readAttributedBody(held), { text: 'short', cut: { declaredBytes: 255, heldBytes: 5 } });
});

test('an archive cut short (the simulator encoder truncated) keeps the body up to the cut', () => {
  const body = 'Running late, see you at the station at 7 — bring the tickets';
  const whole = encodeAttributedBody(body);
  assert.deepEqual(readAttributedBody(whole), { text: body }, 'a whole body is not cut');
  const at = whole.indexOf(Buffer.from('see you'));
  const read = readAttributedBody(whole.subarray(0, at));
  assert.equal(read?.text, 'Running late, ');
  assert.deepEqual(read?.cut, { declaredBytes: Buffer.byteLength(body), heldBytes: 14 });
});

test('a cut in the middle of a multi-byte character drops the partial character, not the body', () => {
  for (const [text, whole] of [
    ['ça va 👋 bye', 'ça va '],
    ['merci ç', 'merci '],
    ['日本語', '日'],
  ] as const) {
    const encoded = encodeAttributedBody(text);
    const start = encoded.indexOf(Buffer.from(whole)) + Buffer.byteLength(whole);
    for (let partial = 1; partial < Buffer.byteLength([...text.slice(whole.length)][0]!); partial++) {
      const read = readAttributedBody(encoded.subarray(0, start + partial));
      assert.equal(read?.text, whole, `${text} cut ${partial} byte(s) into a character`);
      assert.ok(!read?.text.includes('\uFFFD'), 'no replacement character');
      assert.equal(read?.cut?.heldBytes, Buffer.byteLength(whole) + partial);
    }
  }
});

test('the simulator encoder round-trips through the decoder, including long bodies', () => {
  for (const text of ['', 'a', 'quote " and \\ backslash', 'é'.repeat(100), 'z'.repeat(70_000)]) {
    assert.equal(decodeAttributedBody(encodeAttributedBody(text)), text);
  }
});
