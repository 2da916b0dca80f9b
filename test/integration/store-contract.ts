import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AppError } from '../../src/errors.ts';
import { afterKeys, literalContains, type Collection, type Doc, type Store } from '../../src/store/collection.ts';
import { createLogger } from '../../src/log.ts';
import { MessageRollups, RollupTally, rollupCollection, type StatsBucket } from '../../src/messages/message-rollups.ts';

interface Item extends Doc {
  name: string;
  n?: number;
  tags?: string[];
  status?: string;
  at?: string;
  meta?: { color?: string };
}

const A = { tenantId: 'org_a' };
const B = { tenantId: 'org_b' };
const A1 = { tenantId: 'org_a', teamId: 'team_1' };
const A2 = { tenantId: 'org_a', teamId: 'team_2' };

/** The behaviour every store adapter promises; run once per adapter. */
export function storeContract(name: string, open: () => Promise<{ store: Store; dispose(): Promise<void> }>): void {
  describe(`store contract: ${name}`, () => {
    let store: Store;
    let dispose: () => Promise<void>;
    let items: Collection<Item>;
    let uniq: Collection<Item>;
    let ranked: Collection<Item>;

    before(async () => {
      ({ store, dispose } = await open());
      items = store.collection<Item>('items', [{ keys: { tenantId: 1, n: 1 } }]);
      ranked = store.collection<Item>('ranked', [{ keys: { tenantId: 1, status: 1 } }]);
      uniq = store.collection<Item>('uniq', [{ keys: { tenantId: 1, name: 1 }, unique: true }]);
      await store.init();
      await items.insertMany(A, [
        {
          id: 'i1',
          tenantId: '',
          name: 'alpha',
          n: 3,
          tags: ['x', 'y'],
          status: 'queued',
          at: '2026-01-01T00:00:02.000Z',
          meta: { color: 'red' },
        },
        {
          id: 'i2',
          tenantId: '',
          name: 'Beta (b.*)',
          n: 1,
          tags: ['y'],
          status: 'sent',
          at: '2026-01-01T00:00:01.000Z',
        },
        { id: 'i3', tenantId: '', name: 'gamma', n: 2, tags: [], status: 'queued', at: '2026-01-01T00:00:03.000Z' },
        { id: 'i4', tenantId: '', name: 'delta' },
      ]);
      await items.insertOne(B, { id: 'b1', tenantId: '', name: 'alpha', n: 3, tags: ['x'] });
      await items.insertOne(A1, { id: 't1', tenantId: '', name: 'team one', n: 10 });
      await items.insertOne(A2, { id: 't2', tenantId: '', name: 'team two', n: 20 });
    });

    after(async () => {
      await dispose();
    });

    const ids = (docs: Item[]) => docs.map((d) => d.id);

    test('topTenants groups across organizations and ranks them by a count, a sum or an earliest time, ties by id, cut at the limit', async () => {
      const at = (s: number) => `2026-01-01T00:00:0${s}.000Z`;
      const put = (tenantId: string, docs: Array<Omit<Item, 'tenantId'>>) =>
        ranked.insertMany(
          { tenantId },
          docs.map((d) => ({ ...d, tenantId: '' }) as Item),
        );
      await put('org_a', [
        { id: 'ra1', name: 'r1', status: 'queued', n: 2, at: at(5) },
        { id: 'ra2', name: 'r2', status: 'queued', n: 1, at: at(3) },
        { id: 'ra3', name: 'r3', status: 'sent', n: 50, at: at(0) },
      ]);
      await put('org_b', [{ id: 'rb1', name: 'r1', status: 'queued', n: 10, at: at(4) }]);
      await put('org_c', [
        { id: 'rc1', name: 'r1', status: 'queued', at: at(1) },
        { id: 'rc2', name: 'r2', status: 'queued', n: 0 },
      ]);
      await put('org_d', [
        { id: 'rd1', name: 'skip', status: 'queued', n: 100, at: at(0) },
        { id: 'rd2', name: 'r1', status: 'sent', n: 7 },
      ]);
      const rank = async (
        filter: Record<string, unknown>,
        measure: Parameters<typeof ranked.topTenants>[1],
        limit = 10,
      ) => (await ranked.topTenants(filter, measure, limit)).map((f) => [f.tenantId, f.value]);
      // A condition SQL cannot say ($regex) is grouped after the SQL part has selected: the same answers.
      const named = { status: 'queued', name: { $regex: '^r' } };
      assert.deepEqual(await rank(named, { count: true }), [
        ['org_a', 2],
        ['org_c', 2],
        ['org_b', 1],
      ]);
      assert.deepEqual(await rank(named, { count: true }, 2), [
        ['org_a', 2],
        ['org_c', 2],
      ]);
      assert.deepEqual(await rank(named, { sum: 'n' }), [
        ['org_b', 10],
        ['org_a', 3],
      ]);
      assert.deepEqual(await rank(named, { earliest: 'at' }), [
        ['org_c', at(1)],
        ['org_a', at(3)],
        ['org_b', at(4)],
      ]);
      const queued = { status: 'queued' };
      assert.deepEqual(await rank(queued, { count: true }), [
        ['org_a', 2],
        ['org_c', 2],
        ['org_b', 1],
        ['org_d', 1],
      ]);
      assert.deepEqual(await rank(queued, { sum: 'n' }, 2), [
        ['org_d', 100],
        ['org_b', 10],
      ]);
      assert.deepEqual(await rank(queued, { earliest: 'at' }), [
        ['org_d', at(0)],
        ['org_c', at(1)],
        ['org_a', at(3)],
        ['org_b', at(4)],
      ]);
      assert.deepEqual(await rank({ status: 'failed' }, { count: true }), []);
    });

    test('find sorts, skips, limits and counts', async () => {
      assert.deepEqual(ids(await items.find(A, { n: { $exists: true } }, { sort: { n: 1 } })), [
        'i2',
        'i3',
        'i1',
        't1',
        't2',
      ]);
      assert.deepEqual(ids(await items.find(A, {}, { sort: { n: -1 }, skip: 1, limit: 2 })), ['t1', 'i1']);
      assert.deepEqual(ids(await items.find(A, { at: { $exists: true } }, { sort: { at: -1 } })), ['i3', 'i1', 'i2']);
      assert.equal(ids(await items.find(A, {}, { sort: { n: 1 } }))[0], 'i4', 'a missing field sorts first ascending');
      assert.equal(await items.count(A, {}), 6);
      assert.equal(await items.count(A, { status: 'queued' }), 2);
    });

    test('countBy counts the matches of each combination of values, a missing field as null, in the tenant', async () => {
      const groups = async (filter: Record<string, unknown>, fields: string[]) =>
        (await items.countBy(A, filter, fields)).map((g) => `${g.values.map(String).join('/')}=${g.count}`).sort();
      // On key columns (SQL on the embedded store), and on a field without one (grouped from the documents).
      assert.deepEqual(await groups({}, ['n']), ['10=1', '1=1', '20=1', '2=1', '3=1', 'null=1']);
      assert.deepEqual(await groups({ n: { $gte: 2 } }, ['status']), ['null=2', 'queued=2']);
      assert.deepEqual(await groups({ status: 'queued' }, ['n', 'status']), ['2/queued=1', '3/queued=1']);
      assert.deepEqual(await items.countBy(B, { name: 'nobody' }, ['n']), []);
    });

    test('each filter operator', async () => {
      const q = async (filter: Record<string, unknown>) => ids(await items.find(A, filter, { sort: { id: 1 } }));
      assert.deepEqual(await q({ n: { $gt: 1, $lte: 3 } }), ['i1', 'i3']);
      assert.deepEqual(await q({ n: { $gte: 3, $lt: 11 } }), ['i1', 't1']);
      assert.deepEqual(await q({ status: { $in: ['sent', 'failed'] } }), ['i2']);
      assert.deepEqual(await q({ status: { $nin: ['queued'] }, n: { $exists: true } }), ['i2', 't1', 't2']);
      assert.deepEqual(await q({ status: { $ne: 'queued' }, n: { $lt: 5 } }), ['i2']);
      assert.deepEqual(await q({ tags: 'y' }), ['i1', 'i2'], 'equality matches an array element');
      assert.deepEqual(await q({ tags: { $all: ['x', 'y'] } }), ['i1']);
      assert.deepEqual(await q({ 'meta.color': 'red' }), ['i1']);
      assert.deepEqual(await q({ $or: [{ name: 'delta' }, { n: 1 }] }), ['i2', 'i4']);
      assert.deepEqual(await q({ $or: [{ n: 3 }, { id: 'i4' }] }), ['i1', 'i4']);
      assert.deepEqual(
        await q({ $or: [{ n: { $lt: 2 } }, { n: 2, id: { $gt: 'i2' } }] }),
        ['i2', 'i3'],
        'an $or of ranges on an indexed field and the id',
      );
      assert.deepEqual(await q({ id: { $gte: 'i2', $lt: 'i4' } }), ['i2', 'i3']);
      assert.deepEqual(await q({ $and: [{ status: 'queued' }, { n: { $gt: 2 } }] }), ['i1']);
      assert.deepEqual(await q({ name: { $regex: '^AL', $options: 'i' } }), ['i1']);
      assert.deepEqual(await q({ name: { $eq: 'gamma' } }), ['i3']);
    });

    test('literalContains matches text literally, never as a pattern', async () => {
      assert.deepEqual(ids(await items.find(A, { name: literalContains('(B.*)') })), ['i2']);
      assert.deepEqual(ids(await items.find(A, { name: literalContains('.*') })), ['i2']);
      assert.deepEqual(ids(await items.find(A, { name: literalContains('a.p') })), []);
    });

    test('each update operator, and updateOne as compare-and-set', async () => {
      await items.insertOne(A, { id: 'u1', tenantId: '', name: 'upd', n: 1, tags: ['a'], status: 'queued' });
      let doc = await items.updateOne(
        A,
        { id: 'u1', status: 'queued' },
        { $set: { status: 'processing', 'meta.color': 'blue' }, $inc: { n: 2 } },
      );
      assert.equal(doc?.status, 'processing');
      assert.equal(doc?.n, 3);
      assert.equal(doc?.meta?.color, 'blue');
      assert.equal(
        await items.updateOne(A, { id: 'u1', status: 'queued' }, { $set: { status: 'sent' } }),
        null,
        'a stale expected state changes nothing',
      );
      assert.equal((await items.findOne(A, { id: 'u1' }))?.status, 'processing');
      doc = await items.updateOne(A, { id: 'u1' }, { $push: { tags: 'b' } });
      assert.deepEqual(doc?.tags, ['a', 'b']);
      doc = await items.updateOne(A, { id: 'u1' }, { $addToSet: { tags: 'b' } });
      assert.deepEqual(doc?.tags, ['a', 'b']);
      doc = await items.updateOne(A, { id: 'u1' }, { $pull: { tags: 'a' }, $unset: { status: '' } });
      assert.deepEqual(doc?.tags, ['b']);
      assert.equal(doc?.status, undefined);
      const up = await items.updateOne(
        A,
        { id: 'u2', name: 'fresh' },
        { $set: { n: 7 }, $setOnInsert: { status: 'new' } },
        { upsert: true },
      );
      assert.equal(up?.id, 'u2');
      assert.equal(up?.name, 'fresh');
      assert.equal(up?.status, 'new');
      assert.equal(up?.tenantId, 'org_a');
      const again = await items.updateOne(
        A,
        { id: 'u2', name: 'fresh' },
        { $set: { n: 8 }, $setOnInsert: { status: 'other' } },
        { upsert: true },
      );
      assert.equal(again?.status, 'new', '$setOnInsert only on insert');
      assert.equal(await items.updateMany(A, { id: { $in: ['u1', 'u2'] } }, { $set: { status: 'done' } }), 2);
      assert.equal(await items.deleteMany(A, { id: { $in: ['u1', 'u2'] } }), 2);
    });

    /** `${p}1` to `${p}3` in organization A (two open, one closed), `${p}4` open in B. */
    const idListItems = async (p: string) => {
      await items.insertMany(A, [
        { id: `${p}1`, tenantId: '', name: 'c', n: 3, status: 'open' },
        { id: `${p}2`, tenantId: '', name: 'a', n: 1, status: 'open' },
        { id: `${p}3`, tenantId: '', name: 'b', n: 2, status: 'closed' },
      ]);
      await items.insertOne(B, { id: `${p}4`, tenantId: '', name: 'd', n: 0, status: 'open' });
    };

    test("an id list reads, updates and deletes only the tenant's documents that also match the rest of the filter", async () => {
      await idListItems('l');
      const list = ['l1', 'l2', 'l3', 'l4', 'l1', 'missing'];
      const names = async (filter: Parameters<typeof items.find>[1], opts?: Parameters<typeof items.find>[2]) =>
        (await items.find(A, filter, opts)).map((d) => d.name);
      assert.deepEqual(
        await names({ id: { $in: list } }, { sort: { n: 1 } }),
        ['a', 'b', 'c'],
        'sorted, once each, no other tenant',
      );
      assert.deepEqual(await names({ id: { $in: list } }, { sort: { n: -1 }, skip: 1, limit: 1 }), ['b']);
      assert.deepEqual(await names({ id: { $in: list }, status: 'open' }, { sort: { name: 1 } }), ['a', 'c']);
      assert.deepEqual(await names({ id: { $in: [] } }), []);
      assert.equal(await items.updateMany(A, { id: { $in: list }, status: 'open' }, { $set: { status: 'done' } }), 2);
      assert.equal((await items.findOne(A, { id: 'l3' }))?.status, 'closed');
      assert.equal((await items.findOne(B, { id: 'l4' }))?.status, 'open', "the other tenant's document is untouched");
      assert.equal(await items.updateMany(A, { id: { $in: [] } }, { $set: { status: 'x' } }), 0);
      assert.equal(await items.deleteMany(A, { id: { $in: list }, status: 'done' }), 2);
      assert.equal(await items.deleteMany(A, { id: { $in: list } }), 1);
      assert.equal(await items.count(B, { id: 'l4' }), 1);
      assert.equal(await items.deleteMany(B, { id: { $in: list } }), 1);
    });

    test('updateManyReturning updates every match in the tenant and answers each as written; a second claim gets nothing', async () => {
      await idListItems('r');
      const list = ['r1', 'r2', 'r3', 'r4', 'r5'];
      const claim = (mark: string) =>
        items.updateManyReturning(
          A,
          { id: { $in: list }, status: 'open' },
          { $set: { status: 'claimed', meta: { color: mark } }, $inc: { n: 10 } },
          { id: { $in: list }, 'meta.color': mark },
        );
      const got = (await claim('first')).sort((a, b) => a.id.localeCompare(b.id));
      assert.deepEqual(
        got.map((d) => [d.id, d.tenantId, d.status, d.n, d.meta?.color, d.name]),
        [
          ['r1', 'org_a', 'claimed', 13, 'first', 'c'],
          ['r2', 'org_a', 'claimed', 11, 'first', 'a'],
        ],
      );
      assert.equal((await items.findOne(A, { id: 'r1' }))?.status, 'claimed', 'stored as answered');
      assert.equal((await items.findOne(A, { id: 'r3' }))?.status, 'closed');
      assert.equal((await items.findOne(B, { id: 'r4' }))?.status, 'open', "the other tenant's document is untouched");
      assert.deepEqual(await claim('second'), []);
      assert.equal(await items.deleteMany(A, { id: { $in: list } }), 3);
      assert.equal(await items.deleteMany(B, { id: { $in: list } }), 1);
    });

    test('bulkWrite applies independent compare-and-sets, upserts and deletes in one call, scoped, and reports unique-key refusals by index', async () => {
      await items.insertMany(A, [
        { id: 'w1', tenantId: '', name: 'w1', n: 1, status: 'open' },
        { id: 'w2', tenantId: '', name: 'w2', n: 2, status: 'closed' },
        { id: 'w3', tenantId: '', name: 'w3', n: 3, status: 'open' },
      ]);
      await items.insertOne(B, { id: 'w4', tenantId: '', name: 'w4', n: 4, status: 'open' });
      const result = await items.bulkWrite(A, [
        { updateOne: { filter: { id: 'w1', status: 'open' }, update: { $set: { status: 'done' }, $inc: { n: 10 } } } },
        { updateOne: { filter: { id: 'w2', status: 'open' }, update: { $set: { status: 'done' } } } },
        {
          updateOne: {
            filter: { id: 'w5' },
            update: { $set: { status: 'new' }, $setOnInsert: { name: 'w5' } },
            upsert: true,
          },
        },
        { updateOne: { filter: { id: 'w4' }, update: { $set: { status: 'stolen' } } } },
        { deleteOne: { filter: { id: 'w3' } } },
        { deleteOne: { filter: { id: 'w4' } } },
        // Deletes that find nothing, side by side with the one that does: none of them takes its count away.
        { deleteOne: { filter: { id: 'w-none-1' } } },
        { deleteOne: { filter: { id: 'w-none-2' } } },
      ]);
      assert.deepEqual(result, { matched: 1, upserted: 1, deleted: 1, conflicts: [] });
      const w1 = await items.findOne(A, { id: 'w1' });
      assert.deepEqual([w1?.status, w1?.n], ['done', 11]);
      assert.equal(
        (await items.findOne(A, { id: 'w2' }))?.status,
        'closed',
        'a compare-and-set that does not match writes nothing',
      );
      const w5 = await items.findOne(A, { id: 'w5' });
      assert.deepEqual([w5?.name, w5?.status, w5?.tenantId], ['w5', 'new', 'org_a']);
      assert.equal(await items.findOne(A, { id: 'w3' }), null);
      assert.equal(
        (await items.findOne(B, { id: 'w4' }))?.status,
        'open',
        "another tenant's document is neither changed nor deleted",
      );
      assert.deepEqual(await items.bulkWrite(A, []), { matched: 0, upserted: 0, deleted: 0, conflicts: [] });
      await items.deleteOne(B, { id: 'w4' });

      await uniq.insertOne(A, { id: 'bw1', tenantId: '', name: 'taken' });
      const clash = await uniq.bulkWrite(A, [
        { updateOne: { filter: { id: 'bw2' }, update: { $set: { name: 'taken' } }, upsert: true } },
        { updateOne: { filter: { id: 'bw3' }, update: { $set: { name: 'free' } }, upsert: true } },
      ]);
      assert.deepEqual(clash.conflicts, [0]);
      assert.equal(clash.upserted, 1, 'the operation after the refused one is still applied');
      assert.equal((await uniq.findOne(A, { id: 'bw3' }))?.name, 'free');
      assert.equal(await uniq.findOne(A, { id: 'bw2' }), null);
    });

    test('a unique index violation is a conflict', async () => {
      await uniq.insertOne(A, { id: 'q1', tenantId: '', name: 'same' });
      await assert.rejects(
        uniq.insertOne(A, { id: 'q2', tenantId: '', name: 'same' }),
        (e: unknown) => e instanceof AppError && e.code === 'conflict',
      );
      await assert.rejects(
        uniq.insertOne(A, { id: 'q1', tenantId: '', name: 'other' }),
        (e: unknown) => e instanceof AppError && e.code === 'conflict',
      );
      await uniq.insertOne(B, { id: 'q3', tenantId: '', name: 'same' });
      await uniq.insertOne(A, { id: 'q4', tenantId: '', name: 'else' });
      await assert.rejects(
        uniq.updateOne(A, { id: 'q4' }, { $set: { name: 'same' } }),
        (e: unknown) => e instanceof AppError && e.code === 'conflict',
      );
    });

    test("a tenant never reads, changes or deletes another tenant's documents", async () => {
      assert.equal(await items.findOne(B, { id: 'i1' }), null);
      assert.deepEqual(ids(await items.find(B, {})), ['b1']);
      assert.equal(await items.count(B, { name: 'alpha' }), 1);
      assert.equal(await items.updateOne(B, { id: 'i1' }, { $set: { name: 'stolen' } }), null);
      assert.equal(await items.updateMany(B, { id: 'i1' }, { $set: { name: 'stolen' } }), 0);
      assert.equal(await items.deleteOne(B, { id: 'i1' }), false);
      assert.equal(await items.deleteMany(B, { id: 'i1' }), 0);
      assert.equal((await items.findOne(A, { id: 'i1' }))?.name, 'alpha');
      assert.equal(
        await items.findOne(A, { tenantId: 'org_b', id: 'b1' }),
        null,
        'a tenantId in the filter cannot widen the scope',
      );
    });

    test('a team scope sees only its team', async () => {
      assert.deepEqual(ids(await items.find(A1, {})), ['t1']);
      assert.equal(await items.findOne(A1, { id: 't2' }), null);
      assert.equal(await items.updateOne(A2, { id: 't1' }, { $set: { n: 0 } }), null);
      assert.equal(await items.deleteOne(A2, { id: 't1' }), false);
      const t1 = await items.findOne(A1, { id: 't1' });
      assert.equal(t1?.teamId, 'team_1');
    });

    test('returned documents carry id, not _id, and are copies', async () => {
      const doc = (await items.findOne(A, { id: 'i1' }))!;
      assert.equal(doc.id, 'i1');
      assert.equal('_id' in doc, false);
      doc.tags!.push('mutated');
      assert.deepEqual((await items.findOne(A, { id: 'i1' }))?.tags, ['x', 'y']);
    });

    test('scan reads every match in pages, in sort order with id breaking ties, and lets other work run between pages', async () => {
      const scanned = store.collection<Item>('scanned', [{ keys: { tenantId: 1, at: 1, id: 1 } }]);
      await store.init();
      const docs: Item[] = [];
      // Three documents share each timestamp, so a page boundary falls inside a run of equal keys.
      for (let i = 0; i < 23; i++)
        docs.push({
          id: `s${String(22 - i).padStart(2, '0')}`,
          tenantId: '',
          name: `n${i}`,
          n: i % 2,
          at: `2026-01-01T00:00:0${Math.floor(i / 3)}.000Z`,
        });
      await scanned.insertMany(A, docs);
      await scanned.insertOne(B, {
        id: 'other',
        tenantId: '',
        name: 'other tenant',
        n: 1,
        at: '2026-01-01T00:00:00.000Z',
      });
      await scanned.insertOne(A1, {
        id: 'team',
        tenantId: '',
        name: 'in a team',
        n: 1,
        at: '2026-01-01T00:00:00.000Z',
      });
      const byKey = (dir: 1 | -1) => (a: Item, b: Item) =>
        a.at! < b.at! ? -dir : a.at! > b.at! ? dir : a.id < b.id ? -dir : a.id > b.id ? dir : 0;

      const read = async (scope: typeof A, filter: Record<string, unknown>, dir: 1 | -1) => {
        const pages: string[][] = [];
        let ran = true;
        for await (const page of scanned.scan(scope, filter, { sort: { at: dir }, pageSize: 5 })) {
          assert.ok(ran, 'the event loop ran between two pages');
          ran = false;
          setImmediate(() => (ran = true));
          pages.push(ids(page));
        }
        return pages;
      };
      const ascending = await read(A, {}, 1);
      assert.deepEqual(
        ascending.map((p) => p.length),
        [5, 5, 5, 5, 4],
      );
      assert.deepEqual(
        ascending.flat(),
        ids([...docs, { id: 'team', tenantId: '', name: '', at: '2026-01-01T00:00:00.000Z' }].sort(byKey(1))),
      );
      const descending = await read(A, { n: 1 }, -1);
      assert.deepEqual(
        descending.flat(),
        ids(
          [
            ...docs.filter((d) => d.n === 1),
            { id: 'team', tenantId: '', name: '', at: '2026-01-01T00:00:00.000Z' },
          ].sort(byKey(-1)),
        ),
      );
      assert.deepEqual(await read(A1, {}, 1), [['team']]);
      assert.deepEqual(await read(B, { n: 0 }, 1), []);

      const page = (
        await scanned
          .scan(A, { id: 's00' }, { sort: { at: 1 } })
          [Symbol.asyncIterator]()
          .next()
      ).value as Item[];
      page[0]!.name = 'changed';
      assert.equal((await scanned.findOne(A, { id: 's00' }))?.name, 'n22', 'scanned documents are copies');
    });

    test('afterKeys: the documents after one in sort order (newest first, ties by id ascending), in the tenant', async () => {
      const keyset = store.collection<Item>('keyset', [{ keys: { tenantId: 1, at: -1, id: 1 } }]);
      await store.init();
      // Three documents share each timestamp, and another tenant's sits among them.
      const docs = Array.from({ length: 15 }, (_, i): Item => ({
        id: `k${String((i * 7) % 15).padStart(2, '0')}`,
        tenantId: '',
        name: `n${i}`,
        at: `2026-01-01T00:00:0${Math.floor(i / 3)}.000Z`,
      }));
      await keyset.insertMany(A, docs);
      await keyset.insertOne(B, { id: 'other', tenantId: '', name: 'other tenant', at: '2026-01-01T00:00:02.000Z' });
      const sort = { at: -1, id: 1 } as const;
      const expected = ids([...docs].sort((a, b) => (a.at! > b.at! ? -1 : a.at! < b.at! ? 1 : a.id < b.id ? -1 : 1)));
      assert.deepEqual(ids(await keyset.find(A, {}, { sort })), expected);
      for (const [i, id] of expected.entries()) {
        const doc = docs.find((d) => d.id === id)!;
        assert.deepEqual(
          ids(await keyset.find(A, afterKeys(sort, [doc.at, doc.id]), { sort, limit: 4 })),
          expected.slice(i + 1, i + 5),
          `after ${id}`,
        );
      }
    });

    test('counters: upserts with $inc on nested paths create, then add up, across bulk writes; $setOnInsert only on creation', async () => {
      const counters = store.collection<Item & { c?: number; h?: Record<string, Record<string, number>> }>('counters');
      await store.init();
      const ops = (n: number, label: string, ids = ['c1', 'c2']) =>
        ids.map((id) => ({
          updateOne: {
            filter: { id },
            update: { $inc: { c: n, 'h.sent.b99': 1 }, $setOnInsert: { name: label } },
            upsert: true,
          },
        }));
      assert.deepEqual(await counters.bulkWrite(A, ops(1, 'first')), {
        matched: 0,
        upserted: 2,
        deleted: 0,
        conflicts: [],
      });
      assert.deepEqual(await counters.bulkWrite(A, ops(2, 'second')), {
        matched: 2,
        upserted: 0,
        deleted: 0,
        conflicts: [],
      });
      await counters.bulkWrite(B, ops(5, 'other', ['cb1']));
      const c1 = await counters.findOne(A, { id: 'c1' });
      assert.deepEqual([c1?.c, c1?.h, c1?.name], [3, { sent: { b99: 2 } }, 'first']);
      assert.equal((await counters.findOne(B, { id: 'cb1' }))?.c, 5);
      assert.equal(await counters.findOne(B, { id: 'c1' }), null, 'another tenant does not see them');
    });

    test('message rollups: tallies add up per bucket and dimension, read back zero-filled with percentiles, per tenant; retention removes only expired buckets', async () => {
      const rollups = new MessageRollups(rollupCollection(store), createLogger('silent'), {
        coalesce: store.kind !== 'embedded',
      });
      await store.init();
      // This hour's quarter past (the writes prune what is past its retention now, so the buckets are recent).
      const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
      const at = hour + 15 * 60_000 + 30_000;
      const iso = (ms: number) => new Date(ms).toISOString();
      const tally = new RollupTally();
      for (const ms of [100, 200, 300, 400, 5_000])
        tally.add('org_a', 'sent', at, { phoneNumber: '+14155550111', relayId: 'relay_1' }, ms);
      tally.add('org_a', 'accepted', at, { phoneNumber: null });
      tally.add('org_b', 'accepted', at, {});
      // Written twice side by side: both add up.
      await Promise.all([rollups.write(tally), rollups.write(tally)]);
      await rollups.settled();
      const read = (
        tenantId: string,
        interval: '1m' | '1h' | '1d',
        dims: { phoneNumber?: string; relayId?: string } = {},
      ) => rollups.read(tenantId, { fromMs: hour + 13 * 60_000 + 10_000, toMs: hour + 17 * 60_000, interval, ...dims });
      const minutes = await read('org_a', '1m');
      assert.deepEqual(
        minutes.map((b) => b.start),
        [13, 14, 15, 16].map((m) => iso(hour + m * 60_000)),
      );
      const busy = minutes[2]!;
      assert.deepEqual([busy.accepted, busy.sent, busy.delivered], [2, 10, 0]);
      assert.deepEqual(
        busy.latency.sent,
        { p50: 304, p95: 5_312, p99: 5_312 },
        "each percentile is its bin's upper bound (2^(n/8) ms)",
      );
      assert.deepEqual(busy.latency.delivered, { p50: null, p95: null, p99: null });
      const empty: Omit<StatsBucket, 'start'> = {
        accepted: 0,
        sent: 0,
        delivered: 0,
        read: 0,
        failed: 0,
        received: 0,
        latency: { sent: { p50: null, p95: null, p99: null }, delivered: { p50: null, p95: null, p99: null } },
      };
      assert.deepEqual(minutes[0], { start: iso(hour + 13 * 60_000), ...empty });
      assert.deepEqual(
        (await read('org_a', '1h')).map((b) => [b.start, b.sent, b.accepted]),
        [[iso(hour), 10, 2]],
      );
      assert.deepEqual(
        (await read('org_a', '1d')).map((b) => [b.start, b.sent]),
        [[iso(Math.floor(hour / 86_400_000) * 86_400_000), 10]],
      );
      assert.deepEqual((await read('org_a', '1m', { phoneNumber: '+14155550111' }))[2]!.sent, 10);
      assert.deepEqual(
        (await read('org_a', '1m', { phoneNumber: '+14155550111' }))[2]!.accepted,
        0,
        "an accepted message without a sender number is not the number's",
      );
      assert.deepEqual((await read('org_a', '1m', { relayId: 'relay_1' }))[2]!.latency.sent.p50, 304);
      assert.deepEqual((await read('org_b', '1m'))[2]!.accepted, 2);
      assert.deepEqual((await read('org_b', '1m'))[2]!.sent, 0, "another tenant's buckets are its own");

      // Two days on: the minute buckets are past their 48 h; hour and day buckets stay.
      const removed = await rollups.prune('org_a', at + 49 * 3_600_000);
      assert.equal(removed, 3, 'the minute buckets of all, the number and the relay');
      assert.equal((await read('org_a', '1m'))[2]!.sent, 0);
      assert.equal((await read('org_a', '1h'))[0]!.sent, 10);
      assert.equal((await read('org_b', '1m'))[2]!.accepted, 2, "another tenant's are not pruned by this one's");
      assert.equal(await rollups.prune('org_a', at + 91 * 86_400_000), 3, 'then the hour buckets, past 90 days');
      assert.equal((await read('org_a', '1d'))[0]!.sent, 10, 'day buckets are kept');
    });
  });
}
