import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileLines, replayLegacyCollection, type Change } from '../../src/store/legacy-files.ts';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'relaybox-legacy-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a file is read line by line in pieces: lines across reads, longer than a read, multi-byte characters split by a read', (t) => {
  const dir = tempDir(t);
  const lines = ['{"a":1}', '', 'é'.repeat(9), 'x'.repeat(40), '😀 ok', 'ü', 'last, with no newline'];
  const path = join(dir, 'things.log');
  writeFileSync(path, lines.join('\n'));
  for (const chunk of [1, 2, 3, 5, 7, 16, 1 << 20]) {
    assert.deepEqual([...fileLines(path, chunk)], lines, `read ${chunk} bytes at a time`);
  }
  writeFileSync(path, 'one\ntwo\n');
  assert.deepEqual([...fileLines(path, 3)], ['one', 'two'], 'a final newline ends the last line');
  writeFileSync(path, '');
  assert.deepEqual([...fileLines(path, 4)], []);
});

test("an old store's collection is replayed in its order; torn and foreign lines are skipped", (t) => {
  const dir = tempDir(t);
  const put = (id: string, n: number) => JSON.stringify({ op: 'put', doc: { id, tenantId: 'org_r', n } });
  writeFileSync(
    join(dir, 'things.snapshot'),
    [JSON.stringify({ id: 's1', tenantId: 'org_r', n: 1 }), 'null', '42'].join('\n') + '\n',
  );
  writeFileSync(
    join(dir, 'things.log'),
    [
      put('s1', 2),
      JSON.stringify({ op: 'del', id: 's1' }),
      '{"op":"del"}',
      '{"op":"move","id":"s1"}',
      put('l2', 3),
    ].join('\n') + '\n',
  );
  writeFileSync(join(dir, 'things.log.next'), put('n3', 4) + '\n{"op":"put","doc":{"id":"torn"');
  const seen: Change[] = [];
  replayLegacyCollection(dir, 'things', (change) => seen.push(change));
  assert.deepEqual(
    seen.map((c) => (c.op === 'put' ? `put ${c.doc.id} ${(c.doc as { n?: number }).n}` : `del ${c.id}`)),
    ['put s1 1', 'put s1 2', 'del s1', 'put l2 3', 'put n3 4'],
  );
});
