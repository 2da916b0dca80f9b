import assert from 'node:assert/strict';
import { appendFileSync, cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { AppError } from '../../src/errors.ts';
import { scopedFilter, type Collection, type Doc, type Filter, type IndexSpec, type Scope, type Update } from '../../src/store/collection.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { applyUpdate, matches } from '../../src/store/query.ts';
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

interface Thing extends Doc {
  n: number;
  status?: string;
  tags?: string[];
  pad?: string;
}

const scope = { tenantId: 'org_r' };
const thingIndexes: IndexSpec[] = [{ keys: { tenantId: 1, n: 1 }, unique: true }, { keys: { tenantId: 1, status: 1 } }];

async function tempDir(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-store-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Opens the store a restarted process would: a new EmbeddedStore on what is on disk. */
async function reopen(dir: string): Promise<{ store: EmbeddedStore; things: Collection<Thing>; all: Thing[] }> {
  const store = new EmbeddedStore(dir);
  const things = store.collection<Thing>('things', thingIndexes);
  await store.init();
  return { store, things, all: await things.find(scope, {}, { sort: { id: 1 } }) };
}

/** A copy of the directory as it is now (synchronously: before any pending flush), as a process killed at this instant would leave it. */
function killedCopy(t: TestContext, dir: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'relaybox-store-'));
  t.after(() => rm(copy, { recursive: true, force: true }));
  cpSync(dir, copy, { recursive: true });
  return copy;
}

test('every write method resolves only once its change is in the log, and one tick is one write', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir, { syncIntervalMs: 5 });
  t.after(() => store.close());
  const things = store.collection<Thing>('things', thingIndexes);
  const steps: Array<[string, () => Promise<unknown>]> = [
    ['insertOne', () => things.insertOne(scope, { id: 'a', tenantId: '', n: 1 })],
    ['insertMany', () => things.insertMany(scope, [{ id: 'b', tenantId: '', n: 2 }, { id: 'c', tenantId: '', n: 3 }, { id: 'd', tenantId: '', n: 4 }])],
    ['updateOne', () => things.updateOne(scope, { id: 'a' }, { $set: { status: 'sent' } })],
    ['upsert', () => things.updateOne(scope, { id: 'e' }, { $set: { n: 5 } }, { upsert: true })],
    ['updateMany', () => things.updateMany(scope, { n: { $gte: 2 } }, { $set: { status: 'queued' } })],
    ['deleteOne', () => things.deleteOne(scope, { id: 'b' })],
    ['deleteMany', () => things.deleteMany(scope, { id: { $in: ['c', 'd'] } })],
  ];
  for (const [name, step] of steps) {
    await step();
    const copy = await reopen(killedCopy(t, dir));
    assert.deepEqual(copy.all, await things.find(scope, {}, { sort: { id: 1 } }), `after ${name}`);
    await copy.store.close();
  }

  const log = join(dir, 'things.log');
  const before = readFileSync(log, 'utf8').split('\n').length;
  const writes = [1, 2, 3].map((i) => things.insertOne(scope, { id: `g${i}`, tenantId: '', n: 100 + i }));
  assert.equal(readFileSync(log, 'utf8').split('\n').length, before, 'nothing is written before the tick ends');
  const seen = await Promise.all(writes.map((w) => w.then(() => readFileSync(log, 'utf8').split('\n').length)));
  assert.deepEqual(seen, [before + 3, before + 3, before + 3], 'each caller resolves after the one write that holds all three');
});

test('insertMany stops at the first conflict and keeps, durably, what came before it', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir);
  const things = store.collection<Thing>('things', thingIndexes);
  await things.insertOne(scope, { id: 'x', tenantId: '', n: 7 });
  const batch = [1, 2, 7, 3].map((n) => ({ id: `m${n}`, tenantId: '', n }));
  await assert.rejects(things.insertMany(scope, batch), (e: unknown) => e instanceof AppError && e.code === 'conflict');
  const copy = await reopen(killedCopy(t, dir));
  assert.deepEqual(copy.all.map((d) => d.id), ['m1', 'm2', 'x']);
  await copy.store.close();
  await assert.rejects(things.insertMany(scope, [{ id: 'm9', tenantId: '', n: 9 }, { id: 'm9', tenantId: '', n: 10 }]), /already exists/);
  assert.equal((await things.findOne(scope, { id: 'm9' }))?.n, 9);
  await store.close();
});

test('a write after close rejects; writes issued before close are kept', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir);
  const things = store.collection<Thing>('things', thingIndexes);
  const early = things.insertOne(scope, { id: 'early', tenantId: '', n: 1 });
  await store.close();
  await early;
  await assert.rejects(things.insertOne(scope, { id: 'late', tenantId: '', n: 2 }), (e: unknown) => e instanceof AppError && e.code === 'service_unavailable');
  await assert.rejects(things.updateOne(scope, { id: 'early' }, { $set: { n: 3 } }), /closed/);
  await assert.rejects(things.deleteMany(scope, {}), /closed/);
  assert.equal((await things.findOne(scope, { id: 'early' }))?.n, 1, 'a refused write changes nothing');
  const again = await reopen(dir);
  assert.deepEqual(again.all.map((d) => [d.id, d.n]), [['early', 1]]);
  await again.store.close();
});

test('a torn last line is cut off, and what is appended after it survives the next restart', async (t) => {
  const dir = await tempDir(t);
  let { store, things } = await reopen(dir);
  await things.insertOne(scope, { id: 'a', tenantId: '', n: 1 });
  await store.close();
  appendFileSync(join(dir, 'things.log'), '{"op":"put","doc":{"id":"torn","ten');
  ({ store, things } = await reopen(dir));
  await things.insertOne(scope, { id: 'b', tenantId: '', n: 2 });
  await store.close();
  const again = await reopen(dir);
  assert.deepEqual(again.all.map((d) => d.id), ['a', 'b']);
  await again.store.close();
});

test('a restart at any stage of a compaction loses nothing', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir);
  const things = store.collection<Thing>('things', thingIndexes);
  const pad = 'x'.repeat(400);
  await things.insertMany(scope, Array.from({ length: 5_000 }, (_, i) => ({ id: `t${String(i).padStart(5, '0')}`, tenantId: '', n: i, status: 'queued', pad })));
  await store.compact();
  // The log before the next compaction: updates, deletes, a delete then a re-insert.
  await things.updateMany(scope, { n: { $lt: 300 } }, { $set: { status: 'sent' } });
  await things.deleteMany(scope, { n: { $gte: 4_900 } });
  await things.insertOne(scope, { id: 't04950', tenantId: '', n: 4_950, status: 'back' });
  const old = { snapshot: readFileSync(join(dir, 'things.snapshot')), log: readFileSync(join(dir, 'things.log')) };
  const atSwitch = await things.find(scope, {}, { sort: { id: 1 } });

  const compaction = store.compact();
  assert.ok(existsSync(join(dir, 'things.log.next')), 'appends switch to .log.next at once');
  // Changes during the compaction, touching documents the old log and the snapshot both hold.
  await Promise.all([
    things.updateOne(scope, { id: 't00001' }, { $set: { status: 'after' } }),
    things.deleteOne(scope, { id: 't04950' }),
    things.insertOne(scope, { id: 't04999', tenantId: '', n: 4_999, status: 'new' }),
    things.updateMany(scope, { n: { $gte: 1_000, $lt: 1_100 } }, { $inc: { n: 10_000 } }),
  ]);
  const final = await things.find(scope, {}, { sort: { id: 1 } });
  await compaction;
  assert.deepEqual(readdirSync(dir).sort(), ['things.log', 'things.snapshot']);
  const done = { snapshot: readFileSync(join(dir, 'things.snapshot')), log: readFileSync(join(dir, 'things.log')) };
  const snapshotLines = done.snapshot.toString().split('\n');

  const stages: Array<[string, Record<string, Buffer | string>, Thing[]]> = [
    ['switched, nothing new yet', { snapshot: old.snapshot, log: old.log, 'log.next': '' }, atSwitch],
    ['snapshot half written', { snapshot: old.snapshot, log: old.log, 'log.next': done.log, 'snapshot.tmp': snapshotLines.slice(0, 2_000).join('\n') + '\n{"id":"t0' }, final],
    ['snapshot renamed in', { snapshot: done.snapshot, log: old.log, 'log.next': done.log }, final],
    ['log renamed in', { snapshot: done.snapshot, log: done.log }, final],
  ];
  for (const [stage, files, expected] of stages) {
    const copy = await tempDir(t);
    for (const [suffix, content] of Object.entries(files)) writeFileSync(join(copy, `things.${suffix}`), content);
    const restarted = await reopen(copy);
    assert.deepEqual(restarted.all, expected, stage);
    assert.equal(await restarted.things.count(scope, { status: 'sent' }), expected.filter((d) => d.status === 'sent').length, `${stage}: indexes rebuilt`);
    await restarted.store.compact(); // finishes an interrupted compaction
    await restarted.store.close();
    assert.deepEqual(readdirSync(copy).sort(), ['things.log', 'things.snapshot'], stage);
    const again = await reopen(copy);
    assert.deepEqual(again.all, expected, `${stage}, after the compaction it owed`);
    await again.store.close();
  }
  await store.close();
});

test('close abandons a running compaction, and the next start finishes it', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir);
  const things = store.collection<Thing>('things', thingIndexes);
  await things.insertMany(scope, Array.from({ length: 10_000 }, (_, i) => ({ id: `t${i}`, tenantId: '', n: i })));
  const expected = await things.find(scope, {}, { sort: { id: 1 } });
  void store.compact();
  await store.close();
  assert.ok(existsSync(join(dir, 'things.log.next')));
  assert.ok(!existsSync(join(dir, 'things.snapshot.tmp')), 'the half-written snapshot is removed');
  const restarted = await reopen(dir);
  assert.deepEqual(restarted.all, expected);
  await restarted.store.compact();
  assert.deepEqual(readdirSync(dir).sort(), ['things.log', 'things.snapshot']);
  await restarted.store.close();
  const again = await reopen(dir);
  assert.deepEqual(again.all, expected);
  await again.store.close();
});

/** The reference the indexes must agree with: every document scanned, in the order of its last write. */
class Scan {
  readonly docs = new Map<string, Thing>();
  matching(scope: Scope, filter: Filter): Thing[] {
    const scoped = scopedFilter(scope, filter);
    return [...this.docs.values()].filter((d) => matches(d, scoped));
  }
  put(doc: Thing): void {
    this.docs.delete(doc.id);
    this.docs.set(doc.id, structuredClone(doc));
  }
  update(scope: Scope, doc: Thing, update: Update): void {
    const next = structuredClone(doc);
    applyUpdate(next, update, false);
    this.put({ ...next, id: doc.id, tenantId: doc.tenantId, ...(doc.teamId === undefined ? {} : { teamId: doc.teamId }), ...(scope.teamId === undefined ? {} : { teamId: scope.teamId }) });
  }
}

test('tenant and equality indexes agree with a full scan across inserts, updates, deletes and a restart', async (t) => {
  const dir = await tempDir(t);
  const indexes: IndexSpec[] = [{ keys: { tenantId: 1, status: 1 } }, { keys: { tenantId: 1, teamId: 1, n: 1 } }, { keys: { tenantId: 1, tags: 1 } }];
  let store = new EmbeddedStore(dir);
  let col = store.collection<Thing>('indexed', indexes);
  const scan = new Scan();
  let seed = 7;
  const random = (n: number) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n);
  const pick = <V>(list: V[]): V => list[random(list.length)]!;
  const scopes: Scope[] = [{ tenantId: 'org_a' }, { tenantId: 'org_b' }, { tenantId: 'org_a', teamId: 'team_1' }, { tenantId: 'org_a', teamId: 'team_2' }];
  const statuses = ['queued', 'sent', 'failed'];
  const tags = ['x', 'y', 'z'];
  const filters: Filter[] = [
    {}, { status: 'queued' }, { status: 'sent', n: { $gt: 5 } }, { tags: 'x' }, { tags: 'y', status: 'failed' }, { teamId: 'team_1' },
    { n: 3 }, { status: { $in: ['queued', 'failed'] } }, { $or: [{ status: 'sent' }, { tags: 'z' }] }, { status: 'queued', teamId: 'team_2' },
    { id: { $in: ['d1', 'd5', 'd9', 'd5', 'd400', 'd1000', 'd2000'] } }, { id: 'd7', status: 'sent' },
  ];
  for (let i = 0; i < 3_000; i++) {
    const scope = pick(scopes);
    const filter = pick(filters);
    const op = random(10);
    if (op < 4) {
      const doc: Thing = { id: `d${i}`, tenantId: '', n: random(10), status: pick(statuses), tags: tags.filter(() => random(2) === 0) };
      await col.insertOne(scope, doc);
      scan.put({ ...doc, tenantId: scope.tenantId, ...(scope.teamId === undefined ? {} : { teamId: scope.teamId }) });
    } else if (op < 7) {
      const update: Update = pick([{ $set: { status: pick(statuses) } }, { $inc: { n: 1 } }, { $push: { tags: pick(tags) } }, { $pull: { tags: pick(tags) } }, { $unset: { status: '' } }]);
      const targets = op === 6 ? scan.matching(scope, filter) : scan.matching(scope, filter).slice(0, 1);
      if (op === 6) assert.equal(await col.updateMany(scope, filter, update), targets.length);
      else assert.equal((await col.updateOne(scope, filter, update))?.id, targets[0]?.id);
      for (const doc of targets) scan.update(scope, doc, update);
    } else if (op < 9) {
      const targets = scan.matching(scope, filter).slice(0, 1);
      assert.equal(await col.deleteOne(scope, filter), targets.length === 1);
      for (const doc of targets) scan.docs.delete(doc.id);
    } else if (random(4) === 0) {
      const targets = scan.matching(scope, filter);
      assert.equal(await col.deleteMany(scope, filter), targets.length);
      for (const doc of targets) scan.docs.delete(doc.id);
    }
    if (i % 500 === 499) {
      await store.close();
      store = new EmbeddedStore(dir);
      col = store.collection<Thing>('indexed', indexes);
    }
    if (i % 100 !== 0) continue;
    for (const s of scopes) {
      for (const f of filters) {
        const expected = scan.matching(s, f);
        assert.deepEqual(await col.find(s, f), expected, `find ${JSON.stringify(s)} ${JSON.stringify(f)} at op ${i}`);
        assert.equal(await col.count(s, f), expected.length);
        const byN = [...expected].sort((a, b) => b.n - a.n || (a.id < b.id ? -1 : 1));
        assert.deepEqual(await col.find(s, f, { sort: { n: -1, id: 1 }, skip: 1, limit: 3 }), byN.slice(1, 4));
      }
    }
  }
  await store.close();
});
