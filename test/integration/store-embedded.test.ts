import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { storeContract } from './store-contract.ts';

storeContract('embedded', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-store-'));
  const store = new EmbeddedStore(dir);
  return { store, dispose: async () => { await store.close(); await rm(dir, { recursive: true, force: true }); } };
});

test('the embedded store keeps everything across a restart, including after compaction', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-store-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const scope = { tenantId: 'org_r' };
  let store = new EmbeddedStore(dir);
  let col = store.collection<{ id: string; tenantId: string; n: number }>('things', [{ keys: { tenantId: 1, n: 1 }, unique: true }]);
  await store.init();
  for (let i = 0; i < 300; i++) await col.insertOne(scope, { id: `t${i}`, tenantId: '', n: i });
  // Enough rewrites to pass the compaction threshold several times over.
  for (let round = 0; round < 10; round++) {
    for (let i = 0; i < 300; i++) await col.updateOne(scope, { id: `t${i}` }, { $inc: { n: 1000 } });
    await new Promise((r) => setImmediate(r));
  }
  await col.deleteOne(scope, { id: 't0' });
  await store.close();

  store = new EmbeddedStore(dir);
  col = store.collection('things', [{ keys: { tenantId: 1, n: 1 }, unique: true }]);
  await store.init();
  assert.equal(await col.count(scope, {}), 299);
  assert.equal((await col.findOne(scope, { id: 't5' }))?.n, 10_005);
  assert.equal(await col.findOne(scope, { id: 't0' }), null);
  await assert.rejects(col.insertOne(scope, { id: 'dup', tenantId: '', n: 10_005 }), /already exists/, 'unique index rebuilt on load');
  await store.close();
});
