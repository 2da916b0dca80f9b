import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { IndexSpec } from '../../src/store/collection.ts';
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

test('a stored document leaves out what its form says the row tells again, and reads, sorts and filters as if it held it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-document-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  let store = new EmbeddedStore(dir);
  type Note = {
    id: string;
    tenantId: string;
    to: string;
    who: string;
    at: string;
    seen: string;
    tries: number;
    tags: string[];
  };
  const form = { defaults: { tries: 0, tags: [] as const }, copies: { who: 'to', seen: 'at' } };
  const open = () => store.collection<Note>('notes', [{ keys: { tenantId: 1, at: 1 } }], form);
  let notes = open();
  const scope = { tenantId: 'org_f' };
  const docs: Note[] = [
    { id: 'a', tenantId: 'org_f', to: '+1', who: '+1', at: '2026-01-02', seen: '2026-01-02', tries: 0, tags: [] },
    { id: 'b', tenantId: 'org_f', to: '+2', who: '+9', at: '2026-01-01', seen: '2026-01-05', tries: 3, tags: ['x'] },
    { id: 'c', tenantId: 'org_f', to: '+3', who: '+3', at: '2026-01-03', seen: '2026-01-03', tries: 0, tags: [] },
  ];
  await notes.insertMany(scope, docs);
  const stored = () =>
    (store.statement('SELECT id, doc FROM notes ORDER BY id').all() as Array<{ id: string; doc: ArrayBuffer }>).map(
      (r) => Buffer.from(r.doc).toString(),
    );
  assert.deepEqual(stored(), [
    '{"to":"+1","at":"2026-01-02"}',
    '{"to":"+2","who":"+9","at":"2026-01-01","seen":"2026-01-05","tries":3,"tags":["x"]}',
    '{"to":"+3","at":"2026-01-03"}',
  ]);
  const byId = (list: Note[]) => [...list].sort((x, y) => (x.id < y.id ? -1 : 1));
  assert.deepEqual(byId(await notes.find(scope, {})), docs, 'read back whole');
  // A field left out, with no key column: sorted on and filtered by as the document holds it.
  assert.deepEqual(
    (await notes.find(scope, {}, { sort: { seen: -1 } })).map((d) => d.id),
    ['b', 'c', 'a'],
  );
  assert.deepEqual(
    (await notes.find(scope, { tries: 0, who: { $in: ['+1', '+3'] } }, { sort: { at: 1 } })).map((d) => d.id),
    ['a', 'c'],
  );
  assert.deepEqual(await notes.topTenants({}, { earliest: 'seen' }, 5), [{ tenantId: 'org_f', value: '2026-01-02' }]);
  // A change away from the default is stored, and back to it left out again; a restart reads the same.
  await notes.updateOne(scope, { id: 'a' }, { $set: { tries: 1, who: '+5' } });
  await notes.updateOne(scope, { id: 'b' }, { $set: { tries: 0, who: '+2', tags: [] } });
  assert.deepEqual(stored().slice(0, 2), [
    '{"to":"+1","at":"2026-01-02","tries":1,"who":"+5"}',
    '{"to":"+2","at":"2026-01-01","seen":"2026-01-05"}',
  ]);
  await store.close();
  store = new EmbeddedStore(dir);
  t.after(() => store.close());
  notes = open();
  assert.deepEqual(await notes.findOne(scope, { id: 'b' }), { ...docs[1], who: '+2', tries: 0, tags: [] });
  assert.deepEqual((await notes.findOne(scope, { id: 'a' }))?.who, '+5');
});

test('with keyColumns a stored document leaves out the scalars its key columns hold, and every read (by id, by a query, a scan, after a restart) puts them back', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-document-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  let store = new EmbeddedStore(dir);
  type Item = { id: string; tenantId: string; k: unknown; n?: number; flag?: boolean; note: string };
  const indexes: IndexSpec[] = [{ keys: { tenantId: 1, k: 1 } }, { keys: { tenantId: 1, n: 1, flag: 1 } }];
  const open = (more: IndexSpec[] = []) =>
    store.collection<Item>('items', [...indexes, ...more], { keyColumns: true, copies: { note: 'k' } });
  let items = open();
  const scope = { tenantId: 'org_k' };
  const docs: Item[] = [
    { id: 'a', tenantId: 'org_k', k: 'x\u0000y', n: 1.5, flag: true, note: 'x\u0000y' },
    { id: 'b', tenantId: 'org_k', k: null, n: 2, flag: false, note: 'b' },
    { id: 'c', tenantId: 'org_k', k: { deep: 1 }, note: 'c' },
    { id: 'd', tenantId: 'org_k', k: ['p', 'q'], n: -0.25, note: 'd' },
  ];
  await items.insertMany(scope, docs);
  const stored = () =>
    (store.statement('SELECT doc FROM items ORDER BY id').all() as Array<{ doc: ArrayBuffer }>).map((r) =>
      Buffer.from(r.doc).toString(),
    );
  assert.deepEqual(stored(), ['{}', '{"note":"b"}', '{"k":{"deep":1},"note":"c"}', '{"k":["p","q"],"note":"d"}']);
  const sorted = (list: Item[]) => [...list].sort((x, y) => (x.id < y.id ? -1 : 1));
  assert.deepEqual(sorted(await items.find(scope, {})), docs, 'a query');
  assert.deepEqual(await items.findOne(scope, { k: 'x\u0000y' }), docs[0], 'by its key column');
  const scanned: Item[] = [];
  for await (const page of items.scan(scope, {}, { sort: { n: 1, id: 1 } })) scanned.push(...page);
  assert.deepEqual(
    scanned.map((d) => d.id),
    ['c', 'd', 'a', 'b'],
  );
  await items.updateOne(scope, { id: 'b' }, { $set: { n: 3, flag: true } });
  assert.deepEqual(await items.findOne(scope, { id: 'b' }), { ...docs[1], n: 3, flag: true }, 'by id, from memory');
  assert.deepEqual(await items.findOne(scope, { id: 'a' }), docs[0]);
  assert.deepEqual(await items.findOne(scope, { id: 'a' }), docs[0], 'by id again, from memory');
  await store.close();
  // A column added later: the rows before hold the field in their JSON.
  store = new EmbeddedStore(dir);
  t.after(() => store.close());
  items = open([{ keys: { tenantId: 1, note: 1 } }]);
  assert.deepEqual(sorted(await items.find(scope, {})), [docs[0], { ...docs[1], n: 3, flag: true }, docs[2], docs[3]]);
  assert.deepEqual(
    (await items.find(scope, { note: 'c' })).map((d) => d.id),
    ['c'],
  );
  await items.insertOne(scope, { id: 'e', tenantId: '', k: 'e', note: 'e2' });
  assert.deepEqual(stored()[4], '{}', 'a new row leaves out its new column too');
  assert.deepEqual(await items.findOne(scope, { id: 'e' }), { id: 'e', tenantId: 'org_k', k: 'e', note: 'e2' });
});
