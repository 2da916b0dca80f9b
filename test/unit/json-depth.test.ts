import assert from 'node:assert/strict';
import { test } from 'node:test';
import { maxJsonDepth } from '../../src/config.ts';
import { textViolations } from '../../src/http/validation.ts';
import { jsonNestsDeeperThan } from '../../src/json-depth.ts';

const nested = (levels: number, open = '[', close = ']') => `${open.repeat(levels)}${close.repeat(levels)}`;
const deeper = (text: string) => jsonNestsDeeperThan(Buffer.from(text), maxJsonDepth);

test('the JSON depth limit is 64 levels of arrays and objects', () => {
  assert.equal(maxJsonDepth, 64);
});

test('a text nested up to the limit passes; one level more, or 100,000, does not', () => {
  assert.equal(deeper(nested(maxJsonDepth)), false);
  assert.equal(deeper(nested(maxJsonDepth + 1)), true);
  assert.equal(deeper(nested(100_000)), true);
  const objects = `${'{"a":'.repeat(maxJsonDepth)}1${'}'.repeat(maxJsonDepth)}`;
  assert.equal(deeper(objects), false);
  assert.equal(deeper(`[${objects}]`), true);
  assert.equal(deeper('{"to":"+14155550100","body":"hi","metadata":{"a":"b"}}'), false);
  assert.equal(deeper(''), false);
});

test('depth is counted across siblings, not summed: a wide text stays shallow', () => {
  assert.equal(deeper(`[${Array.from({ length: 10_000 }, () => '[[1]]').join(',')}]`), false);
});

test('brackets inside strings, after escaped quotes and escaped backslashes, are not nesting', () => {
  assert.equal(deeper(JSON.stringify({ body: '['.repeat(1000) })), false);
  assert.equal(
    deeper(JSON.stringify({ body: `"${'['.repeat(1000)}` })),
    false,
    'an escaped quote does not end the string',
  );
  assert.equal(deeper(JSON.stringify({ body: '\\' })), false);
  // An escaped backslash before the closing quote: the string ends there, and the brackets after it count.
  assert.equal(deeper(`[${JSON.stringify('a\\')},${nested(maxJsonDepth)}]`), true);
  assert.equal(deeper(`${JSON.stringify('a\\')}`), false);
  assert.equal(deeper('"an unterminated string [[[['), false);
});

test('the scan reads a Uint8Array that is not a Buffer', () => {
  const bytes = new TextEncoder().encode(nested(maxJsonDepth + 1));
  assert.equal(jsonNestsDeeperThan(bytes, maxJsonDepth), true);
});

test('the text rule walks a value of any depth without recursion: past the limit it names where it stopped', () => {
  let value: unknown = 'end';
  for (let i = 0; i < 100_000; i++) value = [value];
  const found = textViolations(value);
  assert.equal(found.length, 1);
  assert.equal(found[0]!.path, '/0'.repeat(maxJsonDepth));
  assert.match(found[0]!.message, /nested deeper than 64 levels/);
  let shallow: unknown = 'a\u0000b';
  for (let i = 0; i < maxJsonDepth; i++) shallow = { k: shallow };
  assert.deepEqual(textViolations(shallow), [
    {
      path: '/k'.repeat(maxJsonDepth),
      message: 'must not contain NUL (U+0000) or an unpaired surrogate (U+D800 to U+DFFF)',
    },
  ]);
});

test('the text rule lists violations in document order, a field name before its value', () => {
  const found = textViolations({ a: ['ok', '\u0000'], 'b\u0000': '\ud800', c: { d: '\udc00' } });
  assert.deepEqual(
    found.map((d) => d.path),
    ['/a/1', '/b\u0000', '/b\u0000', '/c/d'],
  );
  assert.match(found[1]!.message, /is a field name/);
  assert.deepEqual(textViolations({ a: 'fine', b: ['x', { c: 'y' }] }), []);
});
