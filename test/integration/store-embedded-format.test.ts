import assert from 'node:assert/strict';
import { cpSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { scopedDoc, type Doc } from '../../src/store/collection.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { wasmStoreCollections, wasmStoreCountMin, wasmStoreScope as scope } from '../fixtures/wasm-store-contents.ts';

const fixture = join(import.meta.dirname, '../fixtures/wasm-store');

function open(dir: string): EmbeddedStore {
  const store = new EmbeddedStore(dir, { countCache: { min: wasmStoreCountMin } });
  for (const [name, { indexes }] of Object.entries(wasmStoreCollections)) store.collection(name, indexes);
  return store;
}

/** Every document the fixture holds, as stored: the script's writes applied. */
function expected(name: string): Doc[] {
  const docs = wasmStoreCollections[name]!.docs.map((d) => scopedDoc(scope, structuredClone(d)));
  if (name === 'messages') docs.find((d) => d.id === 'msg_3')!.status = 'sent';
  return docs.sort((a, b) => (a.id < b.id ? -1 : 1));
}

test('a DATA_DIR written by the store on SQLite compiled to WebAssembly opens as it is, and everything in it reads back', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-store-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  cpSync(fixture, dir, { recursive: true });
  let store = open(dir);
  t.after(() => store.close());
  for (const name of Object.keys(wasmStoreCollections)) {
    assert.deepEqual(await store.collection(name).find(scope, {}, { sort: { id: 1 } }), expected(name), name);
  }
  const messages = store.collection('messages');
  assert.deepEqual(
    store.statement("SELECT n FROM relaybox_counts WHERE collection = 'messages' ORDER BY n").all(),
    [{ n: 5 }, { n: 6 }],
    'the kept counts',
  );
  assert.equal(await messages.count(scope, { status: 'sent' }), 5);
  assert.equal(await messages.count(scope, {}), 6);
  // Strings holding NUL were stored escaped: they are found by their own value, and a NUL-free value does not meet them.
  assert.deepEqual(
    (await messages.find(scope, { status: 'sent\u0000' })).map((d) => d.id),
    ['msg_5'],
  );
  assert.equal((await messages.findOne(scope, { id: 'msg_\u0000nul' }))?.to, '+1415\u00005550102');
  assert.deepEqual(
    (await messages.find(scope, { to: '+1415\u00005550102' })).map((d) => d.id),
    ['msg_\u0000nul'],
  );
  assert.equal(await messages.findOne(scope, { id: 'msg_' }), null);
  assert.deepEqual(
    (await messages.find(scope, { tags: 'a' })).map((d) => d.id),
    ['msg_1'],
    'a field that held an array is still known as one',
  );
  assert.deepEqual(
    (await messages.find(scope, { to: '+14155550100' }, { sort: { at: -1 } })).map((d) => d.id),
    ['msg_3', 'msg_1'],
  );
  await assert.rejects(
    store.collection('contacts').insertOne(scope, { id: 'ct_3', tenantId: '', phone: '+14155550101' }),
    /already exists/,
    'the unique index holds',
  );

  await messages.insertOne(scope, { id: 'msg_7', tenantId: '', to: '+14155550100', status: 'sent', at: 7 });
  await messages.updateOne(scope, { id: 'msg_\u0000nul' }, { $set: { status: 'failed' } });
  await store.close();
  store = open(dir);
  const again = store.collection('messages');
  assert.equal(
    await again.count(scope, { status: 'sent' }),
    5,
    'the kept count moved with the writes, across a restart',
  );
  assert.equal((await again.findOne(scope, { id: 'msg_\u0000nul' }))?.status, 'failed');
  assert.equal((await again.findOne(scope, { id: 'msg_7' }))?.at, 7);
});
