import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { AppError } from '../../src/errors.ts';
import {
  scopedFilter,
  type Collection,
  type Doc,
  type Filter,
  type IndexSpec,
  type Scope,
  type Update,
} from '../../src/store/collection.ts';
import { EmbeddedStore, storeFile, type WalCheckpointReport } from '../../src/store/embedded-store.ts';
import { processAlive } from '../support/answer-recorder.ts';
import { applyUpdate, matches } from '../../src/store/query.ts';
import { storeContract } from './store-contract.ts';

storeContract('embedded', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-store-'));
  const store = new EmbeddedStore(dir);
  return {
    store,
    dispose: async () => {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
});

test('the embedded store keeps everything across a restart, with its unique indexes', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-store-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const scope = { tenantId: 'org_r' };
  let store = new EmbeddedStore(dir);
  let col = store.collection<{ id: string; tenantId: string; n: number }>('things', [
    { keys: { tenantId: 1, n: 1 }, unique: true },
  ]);
  await store.init();
  for (let i = 0; i < 300; i++) await col.insertOne(scope, { id: `t${i}`, tenantId: '', n: i });
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
  await assert.rejects(
    col.insertOne(scope, { id: 'dup', tenantId: '', n: 10_005 }),
    /already exists/,
    'unique index kept',
  );
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
async function reopen(
  dir: string,
  indexes = thingIndexes,
): Promise<{ store: EmbeddedStore; things: Collection<Thing>; all: Thing[] }> {
  const store = new EmbeddedStore(dir);
  const things = store.collection<Thing>('things', indexes);
  await store.init();
  return { store, things, all: await things.find(scope, {}, { sort: { id: 1 } }) };
}

/** A copy of the directory as it is now (synchronously: before any pending commit), as a process killed at this instant would leave it. */
function killedCopy(t: TestContext, dir: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'relaybox-store-'));
  t.after(() => rm(copy, { recursive: true, force: true }));
  // Not the lock FIFO (a copy cannot hold one): the copy's lock is made anew when it is opened.
  cpSync(dir, copy, { recursive: true, filter: (src) => !src.endsWith('.in-use') });
  return copy;
}

test('every write method resolves only once its change is committed, and the writes of one tick commit together', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir, { syncIntervalMs: 5 });
  t.after(() => store.close());
  const things = store.collection<Thing>('things', thingIndexes);
  const steps: Array<[string, () => Promise<unknown>]> = [
    ['insertOne', () => things.insertOne(scope, { id: 'a', tenantId: '', n: 1 })],
    [
      'insertMany',
      () =>
        things.insertMany(scope, [
          { id: 'b', tenantId: '', n: 2 },
          { id: 'c', tenantId: '', n: 3 },
          { id: 'd', tenantId: '', n: 4 },
        ]),
    ],
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

  const writes = [1, 2, 3].map((i) => things.insertOne(scope, { id: `g${i}`, tenantId: '', n: 100 + i }));
  const before = await reopen(killedCopy(t, dir));
  assert.deepEqual(
    before.all.filter((d) => d.id.startsWith('g')),
    [],
    'nothing is committed before the tick ends',
  );
  await before.store.close();
  const seen = await Promise.all(
    writes.map(async (w) => {
      await w;
      const copy = await reopen(killedCopy(t, dir));
      await copy.store.close();
      return copy.all.filter((d) => d.id.startsWith('g')).length;
    }),
  );
  assert.deepEqual(seen, [3, 3, 3], 'each caller resolves after the one commit that holds all three');
});

test('insertMany stops at the first conflict and keeps, durably, what came before it', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir);
  const things = store.collection<Thing>('things', thingIndexes);
  await things.insertOne(scope, { id: 'x', tenantId: '', n: 7 });
  const batch = [1, 2, 7, 3].map((n) => ({ id: `m${n}`, tenantId: '', n }));
  await assert.rejects(things.insertMany(scope, batch), (e: unknown) => e instanceof AppError && e.code === 'conflict');
  const copy = await reopen(killedCopy(t, dir));
  assert.deepEqual(
    copy.all.map((d) => d.id),
    ['m1', 'm2', 'x'],
  );
  await copy.store.close();
  await assert.rejects(
    things.insertMany(scope, [
      { id: 'm9', tenantId: '', n: 9 },
      { id: 'm9', tenantId: '', n: 10 },
    ]),
    /already exists/,
  );
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
  await assert.rejects(
    things.insertOne(scope, { id: 'late', tenantId: '', n: 2 }),
    (e: unknown) => e instanceof AppError && e.code === 'service_unavailable',
  );
  await assert.rejects(things.updateOne(scope, { id: 'early' }, { $set: { n: 3 } }), /closed/);
  await assert.rejects(things.deleteMany(scope, {}), /closed/);
  await assert.rejects(things.findOne(scope, { id: 'early' }), /closed/);
  const again = await reopen(dir);
  assert.deepEqual(
    again.all.map((d) => [d.id, d.n]),
    [['early', 1]],
  );
  await again.store.close();
});

test('a process killed with SIGKILL mid-write loses no acknowledged write', async (t) => {
  const dir = await tempDir(t);
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/chaos/store-writer.ts'], {
    env: { ...process.env, DATA_DIR: dir },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(() => child.kill('SIGKILL'));
  const acked: string[] = [];
  let buffered = '';
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the writer exited with ${code}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      acked.push(...lines.filter((l) => l.startsWith('ack ')));
      if (acked.length >= 3_000) resolve();
    });
  });
  child.removeAllListeners('exit');
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
  const store = new EmbeddedStore(dir);
  t.after(() => store.close());
  const things = store.collection<Thing>('items', [
    { keys: { tenantId: 1, status: 1 } },
    { keys: { tenantId: 1, n: 1 }, unique: true },
  ]);
  const items = (await things.find({ tenantId: 'org_kill' }, {})).map((d) => [d.id, d] as const);
  const stored = new Map(items);
  // Ids ending in 4 are deleted later, ids whose number divides by 3 updated: only their acknowledged final states are certain.
  const deletedLater = (id: string) => Number(id.slice(1)) % 10 === 4;
  let checked = 0;
  for (const line of acked) {
    const [, op, id] = line.split(' ') as [string, string, string];
    if (op === 'del') assert.equal(stored.has(id), false, `${id} was deleted`);
    else if (!deletedLater(id)) {
      assert.ok(stored.has(id), `${id} was acknowledged (${op})`);
      if (op === 'set') assert.equal(stored.get(id)!.status, 'done');
    }
    checked++;
  }
  assert.ok(checked >= 3_000);
  const kept = store.statement("SELECT count(*) AS n FROM relaybox_counts WHERE collection = 'items'").get() as {
    n: number;
  };
  assert.ok(kept.n >= 2, `the writer's counts were kept in the store (${kept.n})`);
  assert.equal(
    await things.count({ tenantId: 'org_kill' }, { status: 'done' }),
    items.filter(([, d]) => d.status === 'done').length,
    'the status index and the kept count agree with the documents',
  );
  assert.equal(
    await things.count({ tenantId: 'org_kill' }, { status: 'new' }),
    items.filter(([, d]) => d.status === 'new').length,
  );
  assert.equal(await things.count({ tenantId: 'org_kill' }, {}), items.length);
});

test('strings holding NUL or \\u0001 stay distinct in ids, key columns and ranges, and keep their order', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir);
  t.after(() => store.close());
  const things = store.collection<Thing>('nul', [{ keys: { tenantId: 1, status: 1 }, unique: true }]);
  const values = ['a', 'a\u0000', 'a\u0000b', 'a\u0001', 'a\u0001\u0001', 'ab'];
  for (const [i, v] of values.entries()) await things.insertOne(scope, { id: `x${v}`, tenantId: '', n: i, status: v });
  for (const [i, v] of values.entries()) {
    assert.deepEqual(
      (await things.find(scope, { status: v })).map((d) => d.n),
      [i],
      `status ${JSON.stringify(v)}`,
    );
    assert.equal((await things.findOne(scope, { id: `x${v}` }))?.n, i, `id ${JSON.stringify(v)}`);
  }
  assert.deepEqual(
    (await things.find(scope, { status: { $in: ['a\u0000', 'a\u0001'] } })).map((d) => d.n).sort(),
    [1, 3],
  );
  assert.deepEqual((await things.find(scope, { id: { $in: ['xa\u0000b', 'xa'] } })).map((d) => d.n).sort(), [0, 2]);
  assert.deepEqual(
    (await things.find(scope, { status: { $gt: 'a\u0000' } }, { sort: { status: 1 } })).map((d) => d.status),
    values.slice(2),
  );
  assert.deepEqual(
    (await things.find(scope, {}, { sort: { status: -1 } })).map((d) => d.status),
    [...values].reverse(),
  );
  await assert.rejects(things.insertOne(scope, { id: 'y', tenantId: '', n: 9, status: 'a\u0000b' }), /already exists/);
});

test('a document looked up by id is answered from memory until a write changes it, in its scope only; a rolled back commit takes back what memory held', async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir, { countCache: { min: 1 } });
  t.after(() => store.close());
  const things = store.collection<Thing>('cached', [{ keys: { tenantId: 1, status: 1 } }]);
  await things.insertOne(scope, { id: 'a', tenantId: '', n: 1, status: 'x' });
  await things.insertOne({ tenantId: 'org_other', teamId: 'team_o' }, { id: 'b', tenantId: '', n: 2, status: 'x' });
  for (let i = 0; i < 2; i++) {
    assert.equal((await things.findOne(scope, { id: 'a' }))?.status, 'x');
    assert.equal(await things.findOne({ tenantId: 'org_other' }, { id: 'a' }), null, 'another tenant does not find it');
    assert.equal((await things.findOne({ tenantId: 'org_other' }, { id: 'b' }))?.n, 2);
    assert.equal(
      await things.findOne({ tenantId: 'org_other', teamId: 'team_p' }, { id: 'b' }),
      null,
      'nor another team',
    );
  }
  await things.updateMany(scope, { status: 'x' }, { $set: { status: 'y' } });
  assert.equal((await things.findOne(scope, { id: 'a' }))?.status, 'y', 'a write by another filter is seen');
  assert.equal(await things.count(scope, { status: 'y' }), 1);
  const lost = things.updateOne(scope, { id: 'a' }, { $set: { status: 'z' } });
  store.exec('ROLLBACK'); // the transaction of this turn ends without its commit, as when SQLite rolls one back
  await assert.rejects(lost, /could not commit/);
  assert.equal(
    (await things.findOne(scope, { id: 'a' }))?.status,
    'y',
    'the rolled back write is gone from memory too',
  );
  assert.equal(await things.count(scope, { status: 'y' }), 1);
  assert.equal(await things.count(scope, { status: 'z' }), 0);
  assert.equal(await things.deleteOne(scope, { id: 'a' }), true);
  assert.equal(await things.findOne(scope, { id: 'a' }), null);
  await things.insertOne(scope, { id: 'a', tenantId: '', n: 3, status: 'w' });
  assert.equal((await things.findOne(scope, { id: 'a' }))?.n, 3);
});

test("a bulk write's upserts of stored documents are read ahead in one statement, each taken once and checked against its filter", async (t) => {
  const dir = await tempDir(t);
  const store = new EmbeddedStore(dir);
  t.after(() => store.close());
  const things = store.collection<Thing>('ahead', [{ keys: { tenantId: 1, status: 1 } }]);
  await things.insertMany(scope, [
    { id: 'u1', tenantId: '', n: 1, status: 'open' },
    { id: 'u2', tenantId: '', n: 2, status: 'closed' },
    { id: 'u4', tenantId: '', n: 4, status: 'open' },
    { id: 'u5', tenantId: '', n: 5, status: 'open' },
  ]);
  const result = await things.bulkWrite(scope, [
    { updateOne: { filter: { id: 'u1' }, update: { $inc: { n: 10 } }, upsert: true } },
    { updateOne: { filter: { id: 'u2', status: 'closed' }, update: { $set: { status: 'reopened' } }, upsert: true } },
    { updateOne: { filter: { id: 'u3' }, update: { $set: { status: 'new', n: 3 } }, upsert: true } },
    { updateOne: { filter: { id: 'u4', status: 'closed' }, update: { $set: { status: 'x' } }, upsert: true } },
    // Applied in order: each sees what the operations before it wrote, not what was read ahead.
    { updateOne: { filter: { id: 'u1', n: 11 }, update: { $set: { status: 'seen' } } } },
    { updateOne: { filter: { id: 'u2', status: 'closed' }, update: { $set: { status: 'lost' } } } },
    // A filter that names no id may change a document read ahead: the next operation on it reads it again.
    { updateOne: { filter: { n: 5 }, update: { $set: { status: 'by n' } } } },
    { updateOne: { filter: { id: 'u5', status: 'by n' }, update: { $set: { status: 'then by id' } }, upsert: true } },
    { deleteOne: { filter: { id: 'u4' } } },
  ]);
  assert.deepEqual(result, { matched: 5, upserted: 1, deleted: 1, conflicts: [3] });
  const now = Object.fromEntries((await things.find(scope, {})).map((d) => [d.id, [d.status, d.n]]));
  assert.deepEqual(now, { u1: ['seen', 11], u2: ['reopened', 2], u3: ['new', 3], u5: ['then by id', 5] });
});

test('a kept count is stored with the writes that move it and read back after a restart, not counted again', async (t) => {
  const dir = await tempDir(t);
  let store = new EmbeddedStore(dir, { countCache: { min: 10 } });
  let things = store.collection<Thing>('kept', [{ keys: { tenantId: 1, status: 1 } }]);
  const scope = { tenantId: 'org_k' };
  await things.insertMany(
    scope,
    Array.from({ length: 50 }, (_, i) => ({ id: `k${i}`, tenantId: '', n: i, status: i % 2 ? 'odd' : 'even' })),
  );
  assert.equal(await things.count(scope, { status: 'odd' }), 25);
  assert.equal(await things.count(scope, { status: 'even' }), 25);
  assert.equal(await things.count({ tenantId: 'org_small' }, {}), 0, 'a count below the minimum is not kept');
  await things.insertOne(scope, { id: 'k50', tenantId: '', n: 50, status: 'odd' });
  await things.updateOne(scope, { id: 'k0' }, { $set: { status: 'odd' } });
  await things.deleteOne(scope, { id: 'k2' });
  await store.close();

  store = new EmbeddedStore(dir, { countCache: { min: 10 } });
  t.after(() => store.close());
  const stored = store
    .statement("SELECT filter, n FROM relaybox_counts WHERE collection = 'kept' ORDER BY n")
    .all() as Array<{ filter: string; n: number }>;
  assert.deepEqual(
    stored.map((r) => [JSON.parse(r.filter).status, r.n]),
    [
      ['even', 23],
      ['odd', 27],
    ],
  );
  // Proof that the restart reads the stored count instead of counting: a count changed behind the store's back is what it answers.
  store.statement("UPDATE relaybox_counts SET n = n + 1000 WHERE collection = 'kept' AND filter LIKE '%even%'").run();
  things = store.collection<Thing>('kept', [{ keys: { tenantId: 1, status: 1 } }]);
  assert.equal(await things.count(scope, { status: 'even' }), 1_023);
  assert.equal(await things.count(scope, { status: 'odd' }), 27);
});

test('a DATA_DIR of the previous store is imported on first start, with its indexes, and its files are moved aside', async (t) => {
  const dir = await tempDir(t);
  const doc = (id: string, n: number, status: string) =>
    JSON.stringify({ id, tenantId: 'org_r', n, status, tags: ['a'] });
  writeFileSync(
    join(dir, 'things.snapshot'),
    [doc('s1', 1, 'queued'), doc('s2', 2, 'queued'), doc('s3', 3, 'sent')].join('\n') + '\n',
  );
  writeFileSync(
    join(dir, 'things.log'),
    [
      JSON.stringify({ op: 'put', doc: JSON.parse(doc('s1', 1, 'sent')) }),
      JSON.stringify({ op: 'del', id: 's3' }),
      JSON.stringify({ op: 'put', doc: JSON.parse(doc('l4', 4, 'queued')) }),
    ].join('\n') + '\n',
  );
  // A compaction was interrupted: appends had moved to .log.next, whose last line a crash tore.
  writeFileSync(
    join(dir, 'things.log.next'),
    JSON.stringify({ op: 'put', doc: JSON.parse(doc('n5', 5, 'queued')) }) + '\n{"op":"put","doc":{"id":"torn","ten',
  );
  writeFileSync(
    join(dir, 'other.log'),
    JSON.stringify({ op: 'put', doc: { id: 'o1', tenantId: 'org_r', n: 1 } }) + '\n',
  );

  const { store, things, all } = await reopen(dir);
  assert.deepEqual(
    all.map((d) => [d.id, d.status]),
    [
      ['l4', 'queued'],
      ['n5', 'queued'],
      ['s1', 'sent'],
      ['s2', 'queued'],
    ],
  );
  assert.equal(
    await things.count(scope, { status: 'queued' }),
    3,
    'the declared index is filled in for imported documents',
  );
  assert.equal((await things.find(scope, { tags: 'a' })).length, 4);
  await assert.rejects(
    things.insertOne(scope, { id: 'dup', tenantId: '', n: 4 }),
    /already exists/,
    'unique index built over imported documents',
  );
  const other = store.collection<Thing>('other');
  assert.equal((await other.findOne(scope, { id: 'o1' }))?.n, 1, 'a collection nobody declared yet is imported too');
  await things.insertOne(scope, { id: 'new', tenantId: '', n: 6 });
  await store.close();

  assert.deepEqual(
    readdirSync(dir).filter((f) => /\.(snapshot|log|next)$/.test(f)),
    [],
    'the old files are gone from DATA_DIR',
  );
  assert.deepEqual(readdirSync(join(dir, 'pre-sqlite')).sort(), [
    'other.log',
    'things.log',
    'things.log.next',
    'things.snapshot',
  ]);
  const again = await reopen(dir);
  assert.equal(again.all.length, 5, 'imported once, and later writes kept');
  await again.store.close();
});

test('a DATA_DIR held by a live process is refused; the moment that process is killed (a zombie still, its id still taken) it is taken over', async (t) => {
  const dir = await tempDir(t);
  const first = await reopen(dir);
  await first.things.insertOne(scope, { id: 'a', tenantId: '', n: 1 });
  assert.throws(() => new EmbeddedStore(dir), /already open/);
  await first.store.close();

  // The writer's parent execs into sleep, which never reaps it: once killed, the writer stays a zombie.
  const parent = spawn(
    'sh',
    ['-c', `"${process.execPath}" --import tsx test/chaos/store-writer.ts & echo "writer $!"; exec sleep 120`],
    { env: { ...process.env, DATA_DIR: dir }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => parent.kill('SIGKILL'));
  const writerPid = await new Promise<number>((resolve, reject) => {
    let out = '';
    let pid = 0;
    parent.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      pid ||= Number(/writer (\d+)/.exec(out)?.[1] ?? 0);
      if (pid && out.includes('ready')) resolve(pid);
    });
    parent.once('exit', (code) => reject(new Error(`the writer's parent exited with ${code}: ${out}`)));
  });
  assert.throws(
    () => new EmbeddedStore(dir),
    new RegExp(`in use by another running process \\(process ${writerPid}\\): stop it first`),
  );
  process.kill(writerPid, 'SIGKILL');
  const zombie = () => readFileSync(`/proc/${writerPid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z');
  const deadline = Date.now() + 10_000;
  while (process.platform === 'linux' && !zombie() && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 10));
  if (process.platform === 'linux') assert.ok(zombie(), 'the killed writer is a zombie');
  assert.ok(processAlive(writerPid), 'its process id still answers a signal');

  const taken = await reopen(dir);
  assert.equal(taken.all.find((d) => d.id === 'a')?.n, 1);
  assert.ok(
    (await taken.store.collection('items').count({ tenantId: 'org_kill' }, {})) > 0,
    'what the writer committed is there',
  );
  await taken.store.close();
});

test('an index declared later is built over the documents already stored', async (t) => {
  const dir = await tempDir(t);
  let { store, things } = await reopen(dir, []);
  await things.insertMany(
    scope,
    Array.from({ length: 2_500 }, (_, i) => ({
      id: `d${i}`,
      tenantId: '',
      n: i,
      status: i % 5 === 0 ? 'sent' : 'queued',
      tags: i % 2 ? ['odd'] : ['even'],
    })),
  );
  await store.close();
  ({ store, things } = await reopen(dir, [...thingIndexes, { keys: { tenantId: 1, tags: 1 } }]));
  assert.equal(await things.count(scope, { status: 'sent' }), 500);
  assert.equal(await things.count(scope, { tags: 'odd' }), 1_250, 'an array field matches on its elements');
  assert.deepEqual(
    (await things.find(scope, { n: { $gte: 2_497 } }, { sort: { n: -1 } })).map((d) => d.n),
    [2_499, 2_498, 2_497],
  );
  await store.close();
});

test('a newest-first index is kept oldest first and read backwards: its pages fill, an index built descending before is replaced, the same orders read from it', async (t) => {
  const dir = await tempDir(t);
  const descending: IndexSpec = { keys: { tenantId: 1, n: -1, id: -1 } };
  let { store, things } = await reopen(dir, [descending]);
  const docs = Array.from({ length: 3_000 }, (_, i) => ({
    id: `d${String(i).padStart(4, '0')}`,
    tenantId: '',
    n: i >> 1,
  }));
  for (let i = 0; i < docs.length; i += 100) await things.insertMany(scope, docs.slice(i, i + 100));
  const indexes = () =>
    (
      store.statement("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'things'").all() as Array<{
        name: string;
      }>
    )
      .map((r) => r.name)
      .sort();
  /** The share of its pages' bytes the index's entries use. */
  const fill = (name: string) => {
    const row = store
      .statement('SELECT sum(payload) AS payload, sum(pgsize) AS size FROM dbstat WHERE name = ?')
      .get([name]) as {
      payload: number;
      size: number;
    };
    return row.payload / row.size;
  };
  const descendingFill = fill('things:tenantId,n-,id-');
  await store.close();

  ({ store, things } = await reopen(dir, [{ ...descending, newestFirst: true }]));
  assert.deepEqual(
    indexes(),
    ['things:id', 'things:tenantId-,n,id'],
    'the descending index replaced by the reversed one',
  );
  const newest = async (filter: Filter) =>
    (await things.find(scope, filter, { sort: { n: -1, id: -1 }, limit: 3 })).map((d) => d.id);
  assert.deepEqual(await newest({}), ['d2999', 'd2998', 'd2997']);
  assert.deepEqual(await newest({ n: { $lt: 10 } }), ['d0019', 'd0018', 'd0017']);
  assert.deepEqual(
    (await things.find(scope, {}, { sort: { n: 1, id: 1 }, limit: 2 })).map((d) => d.id),
    ['d0000', 'd0001'],
  );
  const plan = (
    store
      .statement(`EXPLAIN QUERY PLAN SELECT doc FROM things WHERE tenant = ? ORDER BY "f:n" DESC, id DESC`)
      .all(['org_r']) as Array<{ detail: string }>
  )
    .map((r) => r.detail)
    .join('; ');
  assert.match(plan, /USING INDEX things:tenantId-,n,id /);
  assert.doesNotMatch(plan, /TEMP B-TREE/, 'newest first without a sort');
  await store.close();

  // Filled as a service fills it, a batch of new documents at a time: nearly full pages where the descending index's
  // were half empty.
  const fresh = await tempDir(t);
  ({ store, things } = await reopen(fresh, [{ ...descending, newestFirst: true }]));
  for (let i = 0; i < docs.length; i += 100) await things.insertMany(scope, docs.slice(i, i + 100));
  const reversedFill = fill('things:tenantId-,n,id');
  assert.ok(descendingFill < 0.6, `the descending index's pages ${descendingFill.toFixed(2)} full`);
  assert.ok(
    reversedFill > 0.7,
    `the reversed index's pages ${reversedFill.toFixed(2)} full, the descending one's ${descendingFill.toFixed(2)}`,
  );
  await store.close();
});

/** The reference the indexes must agree with: every document tested with `matches`. */
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
    this.put({
      ...next,
      id: doc.id,
      tenantId: doc.tenantId,
      ...(doc.teamId === undefined ? {} : { teamId: doc.teamId }),
      ...(scope.teamId === undefined ? {} : { teamId: scope.teamId }),
    });
  }
}

for (const [what, countCache] of [
  ['', undefined],
  [', every count kept and maintained by the writes', { min: 0, perTenant: 64 }],
] as const) {
  test(`tenant and equality indexes agree with a full scan across inserts, updates, deletes and a restart${what}`, async (t) => {
    const dir = await tempDir(t);
    const indexes: IndexSpec[] = [
      { keys: { tenantId: 1, status: 1 } },
      { keys: { tenantId: 1, teamId: 1, n: 1 } },
      { keys: { tenantId: 1, tags: 1 } },
    ];
    let store = new EmbeddedStore(dir, { countCache });
    let col = store.collection<Thing>('indexed', indexes);
    const scan = new Scan();
    let seed = 7;
    const random = (n: number) => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) % n;
    const pick = <V>(list: V[]): V => list[random(list.length)]!;
    const scopes: Scope[] = [
      { tenantId: 'org_a' },
      { tenantId: 'org_b' },
      { tenantId: 'org_a', teamId: 'team_1' },
      { tenantId: 'org_a', teamId: 'team_2' },
    ];
    const statuses = ['queued', 'sent', 'failed'];
    const tags = ['x', 'y', 'z'];
    const filters: Filter[] = [
      {},
      { status: 'queued' },
      { status: 'sent', n: { $gt: 5 } },
      { tags: 'x' },
      { tags: 'y', status: 'failed' },
      { teamId: 'team_1' },
      { n: 3 },
      { status: { $in: ['queued', 'failed'] } },
      { $or: [{ status: 'sent' }, { tags: 'z' }] },
      { status: 'queued', teamId: 'team_2' },
      { id: { $in: ['d1', 'd5', 'd9', 'd5', 'd400', 'd1000', 'd2000'] } },
      { id: 'd7', status: 'sent' },
    ];
    for (let i = 0; i < 3_000; i++) {
      const scope = pick(scopes);
      const filter = pick(filters);
      const op = random(10);
      if (op < 4) {
        const doc: Thing = {
          id: `d${i}`,
          tenantId: '',
          n: random(10),
          status: pick(statuses),
          tags: tags.filter(() => random(2) === 0),
        };
        await col.insertOne(scope, doc);
        scan.put({ ...doc, tenantId: scope.tenantId, ...(scope.teamId === undefined ? {} : { teamId: scope.teamId }) });
      } else if (op < 7) {
        const update: Update = pick([
          { $set: { status: pick(statuses) } },
          { $inc: { n: 1 } },
          { $push: { tags: pick(tags) } },
          { $pull: { tags: pick(tags) } },
          { $unset: { status: '' } },
        ]);
        // Which match updateOne and deleteOne take is not promised (nor by MongoDB): the reference follows the store's choice.
        let targets = scan.matching(scope, filter);
        if (op === 6) assert.equal(await col.updateMany(scope, filter, update), targets.length);
        else {
          const got = await col.updateOne(scope, filter, update);
          assert.equal(got === null, targets.length === 0);
          targets = targets.filter((d) => d.id === got?.id);
          assert.equal(targets.length, got ? 1 : 0, 'updateOne changed a match');
        }
        for (const doc of targets) scan.update(scope, doc, update);
      } else if (op < 9) {
        const matching = scan.matching(scope, filter);
        assert.equal(await col.deleteOne(scope, filter), matching.length > 0);
        const left = new Set((await col.find(scope, { id: { $in: matching.map((d) => d.id) } })).map((d) => d.id));
        const gone = matching.filter((d) => !left.has(d.id));
        assert.equal(gone.length, Math.min(1, matching.length), 'deleteOne removed one match');
        for (const doc of gone) scan.docs.delete(doc.id);
      } else if (random(4) === 0) {
        const targets = scan.matching(scope, filter);
        assert.equal(await col.deleteMany(scope, filter), targets.length);
        for (const doc of targets) scan.docs.delete(doc.id);
      }
      if (i % 500 === 499) {
        await store.close();
        store = new EmbeddedStore(dir, { countCache });
        col = store.collection<Thing>('indexed', indexes);
      }
      if (i % 100 !== 0) continue;
      for (const s of scopes) {
        for (const f of filters) {
          const expected = scan.matching(s, f);
          const byId = (docs: Thing[]) => [...docs].sort((a, b) => (a.id < b.id ? -1 : 1));
          assert.deepEqual(
            byId(await col.find(s, f)),
            byId(expected),
            `find ${JSON.stringify(s)} ${JSON.stringify(f)} at op ${i}`,
          );
          assert.equal(await col.count(s, f), expected.length);
          const byN = [...expected].sort((a, b) => b.n - a.n || (a.id < b.id ? -1 : 1));
          assert.deepEqual(await col.find(s, f, { sort: { n: -1, id: 1 }, skip: 1, limit: 3 }), byN.slice(1, 4));
        }
      }
    }
    await store.close();
  });
}

test('a count leaves no read open; a read that is left open makes the write-ahead log past walMaxBytes report and recover', async (t) => {
  const dir = await tempDir(t);
  const reports: WalCheckpointReport[] = [];
  const walMaxBytes = 2 << 20;
  const store = new EmbeddedStore(dir, { walMaxBytes, onWalCheckpoint: (r) => reports.push(r) });
  t.after(() => store.close());
  const things = store.collection<Thing>('things', thingIndexes);
  const walBytes = () => statSync(join(dir, `${storeFile}-wal`)).size;
  const write = async (from: number) => {
    let largest = 0;
    for (let i = from; i < from + 1_500; i++) {
      await things.insertOne(scope, { id: `w${i}`, tenantId: '', n: i, status: 'queued', pad: 'x'.repeat(2_000) });
      largest = Math.max(largest, walBytes());
    }
    return largest;
  };
  assert.equal(await things.count(scope, { status: 'queued' }), 0);
  assert.ok((await write(0)) <= walMaxBytes + (64 << 10), 'the automatic checkpoint keeps up after a count');
  assert.equal(reports.length, 0, 'nothing was left open');
  // Reads SQL cannot answer exactly stop early, with hundreds of candidate rows left: they must not stay on a row either.
  assert.equal((await things.findOne(scope, { pad: { $regex: '^x' } }))?.id, 'w0');
  assert.equal((await things.find(scope, { status: 'queued', pad: { $regex: 'x' } }, { limit: 2, skip: 1 })).length, 2);
  assert.ok((await write(5_000)) <= walMaxBytes + (64 << 10), 'the checkpoint keeps up after reads stopped early');
  assert.equal(reports.length, 0, 'nothing was left open by the reads stopped early');

  store.statement('SELECT rid FROM things').iterate().next(); // a statement left on its row (libsql's iterate stops there): a read held open
  const largest = await write(10_000);
  assert.ok(reports.length > 0, 'the blocked checkpoint is reported');
  assert.deepEqual(
    { ...reports[0]!, walBytes: 0 },
    { walBytes: 0, walMaxBytes, reason: 'database table is locked', recovered: true },
  );
  assert.ok(largest <= walMaxBytes + (64 << 10), `the log stayed at its bound (${largest} bytes)`);
});
