import assert from 'node:assert/strict';
import { test } from 'node:test';
import { keywordOf, maxKeywordTextChars } from '../../src/suppressions/opt-out-keywords.ts';

test('a keyword is the whole text, trimmed and case-folded; anything else is a message', () => {
  for (const text of ['STOP', 'stop', ' Stop \n', 'STOPALL', 'unsubscribe', 'Cancel', 'END', 'quit', 'ＳＴＯＰ'])
    assert.equal(keywordOf(text, []), 'stop', JSON.stringify(text));
  for (const text of ['START', ' unstop']) assert.equal(keywordOf(text, []), 'start', text);
  assert.equal(keywordOf('Help', []), 'help');
  for (const text of ['stop it', 'please stop', 'STOP!', '', '   ', 'stopp', 'help me'])
    assert.equal(keywordOf(text, []), undefined, JSON.stringify(text));
});

test("an organization's own stop keywords count beside the standard ones, compared case-folded", () => {
  assert.equal(keywordOf('Basta', ['basta']), 'stop');
  assert.equal(keywordOf('basta', []), undefined);
  assert.equal(keywordOf(' ARRÊT ', ['arrêt']), 'stop');
});

test('a text longer than any keyword can be is answered by its length', () => {
  assert.equal(keywordOf(`${' '.repeat(maxKeywordTextChars)}stop`, []), undefined);
  assert.equal(keywordOf(`${' '.repeat(maxKeywordTextChars - 4)}stop`, []), 'stop');
});
