import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';

test("a stored document leaves out the id and tenant its row's columns hold, and reads back whole", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-document-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const store = new EmbeddedStore(dir);
  t.after(() => store.close());
  const things = store.collection<{ id: string; tenantId: string; n?: number }>('things', [{ keys: { n: 1 } }]);
  const odd = 'id \u0000 with \u0001 escapes "quoted"';
  const scope = { tenantId: 'org_\u0001x' };
  await things.insertMany(scope, [
    { id: odd, tenantId: '', n: 1 },
    { id: 'bare', tenantId: '' },
  ]);
  const rows = store.statement('SELECT doc FROM things ORDER BY rid').all() as Array<{ doc: ArrayBuffer }>;
  assert.deepEqual(
    rows.map((r) => Buffer.from(r.doc).toString()),
    ['{"n":1}', '{}'],
  );
  assert.deepEqual(await things.find(scope, {}, { sort: { n: 1 } }), [
    { id: 'bare', tenantId: scope.tenantId },
    { id: odd, tenantId: scope.tenantId, n: 1 },
  ]);
  // Read by id (kept in memory after a write), by a key and by a scan.
  await things.updateOne(scope, { id: odd }, { $set: { n: 2 } });
  assert.deepEqual(await things.findOne(scope, { id: odd }), { id: odd, tenantId: scope.tenantId, n: 2 });
  assert.deepEqual(await things.findOne(scope, { n: 2 }), { id: odd, tenantId: scope.tenantId, n: 2 });
  const scanned = [];
  for await (const page of things.scan(scope, {}, { sort: { id: 1 } })) scanned.push(...page);
  assert.deepEqual(
    scanned.map((d) => d.id),
    ['bare', odd],
  );
  assert.equal(await things.findOne({ tenantId: 'org_other' }, { id: odd }), null);
});
