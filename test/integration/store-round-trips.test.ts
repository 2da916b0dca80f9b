import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { MongoClient } from 'mongodb';
import { loadConfig } from '../../src/config.ts';
import { AppError } from '../../src/errors.ts';
import type { Store } from '../../src/store/collection.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { serviceUrl } from '../support/services.ts';
import { storeOperations as storeCommands } from '../support/store-operations.ts';
import { apiKey, eachBackend, signup, startTestApp, type Backend } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';

/** What moved since `before`, the counts that did not move left out. */
async function since(before: Map<string, number>): Promise<Record<string, number>> {
  const moved: Record<string, number> = {};
  for (const [key, n] of await storeCommands())
    if (n !== (before.get(key) ?? 0)) moved[key] = n - (before.get(key) ?? 0);
  return moved;
}

const total = (moved: Record<string, number>) => Object.values(moved).reduce((s, n) => s + n, 0);

/**
 * On the embedded store the two in-process event consumers (webhooks,
 * automations) each save their cursor once per batch they read: once each
 * when the send's event arrives alone, twice each when a consumer's poll
 * catches it across two reads. Counted apart, within those bounds. (The
 * event stream's rows are the organizations' history there: no third
 * consumer copies them into a log of its own.)
 */
const cursorSaves = 'event_cursors.updateOne';
const cursorSavesPerSend = { min: 2, max: 4 };

/** Waits until nothing moved for a second: the background work of what came before is done. */
async function quiet(): Promise<void> {
  let last = -1;
  await until(
    'the store to go quiet',
    async () => {
      const now = total(Object.fromEntries(await storeCommands()));
      const still = now === last;
      last = now;
      if (!still) await sleep(1_000);
      return still;
    },
    60_000,
  );
}

/**
 * The store commands one accepted send to a known conversation costs, its
 * background work (outbox, event consumers, webhook routing) included, once
 * credentials and the conversation are warm. The embedded store's group
 * COMMIT (`*.transaction`) is left out: how many turns the writes fall into
 * depends on timing, so it is bounded below instead.
 */
const perSend: Record<Backend, Record<string, number>> = {
  embedded: {
    // the message row is also its message.queued event: no event row of its own
    'messages.insertMany': 1,
    'conversations.bulkWrite': 1,
    'webhooks.find': 1,
    // the statistics: its minute, hour and day buckets in one bulk write, in the send's transaction
    'message_rollups.bulkWrite': 1,
    // the request log: this request's entry, a chunk of its own here (a chunk holds up to 500 requests of a second)
    'request_log.insertOne': 1,
  },
  'redis+mongo': {
    'messages.insertMany': 1,
    'conversations.bulkWrite': 1,
    // the outbox: the event published, then cleared from the message (one bulk write for the batch)
    'messages.bulkWrite': 1,
    'org_events.insertMany': 1,
    'webhooks.find': 1,
    // the statistics' minute, hour and day buckets: one bulk write on MongoDB, one command per upsert on FerretDB 1.x (as counted here)
    'message_rollups.bulkWrite': 3,
    'request_log.insertOne': 1,
  },
};

eachBackend((backend) => {
  describe(`store round trips (${backend})`, () => {
    test('one accepted send moves relaybox_store_operations_total by its known, small number of commands', async () => {
      // Timers that would read the store in the middle of the measurement wait for minutes.
      const t = await startTestApp(backend, {
        CREDENTIAL_CACHE_MS: '600000',
        TENANT_SWEEP_MS: '600000',
        WEBHOOK_SWEEP_MS: '600000',
      });
      try {
        const org = await signup(t);
        const key = await apiKey(t, org, 'member');
        const send = (body: string) =>
          t.request('POST', '/api/v1/messages', { token: key, body: { to: '+14155550100', body } });
        // Credentials cached, the conversation stored and kept, the tenant actor awake. And the statistics' buckets
        // the measured send falls into already made: a send that opens a bucket (the first of a minute, so of an
        // hour or a day too) costs FerretDB's path one command more (an update that finds none, then the insert),
        // so the warm-ups and the measured send are made in one minute, with room to spare.
        const msLeftInMinute = () => 60_000 - (Date.now() % 60_000);
        const minute = () => Math.floor(Date.now() / 60_000);
        let warmedIn: number;
        do {
          if (msLeftInMinute() < 15_000) await sleep(msLeftInMinute() + 100);
          warmedIn = minute();
          for (const body of ['warm 1', 'warm 2']) assert.equal((await send(body)).status, 201);
          await quiet();
        } while (minute() !== warmedIn || msLeftInMinute() < 5_000);

        const before = await storeCommands();
        assert.equal((await send('measured')).status, 201);
        const expected = perSend[backend];
        await until("the send's background work", async () => {
          const moved = await since(before);
          delete moved['*.transaction'];
          return total(moved) >= total(expected);
        });
        await quiet();

        const moved = await since(before);
        const commits = moved['*.transaction'] ?? 0;
        delete moved['*.transaction'];
        const cursors = moved[cursorSaves] ?? 0;
        delete moved[cursorSaves];
        assert.deepEqual(moved, expected, `store commands of one send on ${backend}`);
        if (backend === 'embedded')
          assert.ok(
            cursors >= cursorSavesPerSend.min && cursors <= cursorSavesPerSend.max,
            `${cursors} event consumer cursor saves`,
          );
        else assert.equal(cursors, 0);
        if (backend === 'embedded') {
          const writeBatches =
            cursors +
            Object.entries(moved)
              .filter(([key]) => !/\.(find|findOne|count|scan_page)$/.test(key))
              .reduce((s, [, n]) => s + n, 0);
          assert.ok(commits >= 1 && commits <= writeBatches, `${commits} COMMITs for ${writeBatches} write batches`);
        } else {
          assert.equal(commits, 0);
        }
      } finally {
        await t.stop();
      }
    });
  });
});

/** The store commands `work` issues, by `collection.operation`. */
async function commandsOf(work: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = await storeCommands();
  await work();
  return since(before);
}

async function countsEachCommand(store: Store, commitsPerWrite: number, idListReads: number): Promise<void> {
  const scope = { tenantId: 'org_count' };
  const things = store.collection<{ id: string; tenantId: string; n: number }>('round_trip_things');
  await store.init();
  const commit = commitsPerWrite ? { '*.transaction': commitsPerWrite } : {};
  assert.deepEqual(
    await commandsOf(() =>
      things.insertMany(
        scope,
        [1, 2, 3].map((n) => ({ id: `t${n}`, tenantId: '', n })),
      ),
    ),
    { 'round_trip_things.insertMany': 1, ...commit },
  );
  // A refused write was a command too (on the embedded store its turn still commits).
  const refused = await commandsOf(async () => {
    await assert.rejects(
      things.insertOne(scope, { id: 't1', tenantId: '', n: 1 }),
      (err: unknown) => err instanceof AppError && err.code === 'conflict',
    );
    await new Promise((resolve) => setImmediate(resolve));
  });
  assert.deepEqual(refused, { 'round_trip_things.insertOne': 1, ...commit });
  assert.deepEqual(await commandsOf(() => things.find(scope, { id: { $in: ['t1', 't2', 't3'] } })), {
    'round_trip_things.find': idListReads,
  });
  assert.deepEqual(await commandsOf(() => things.count(scope, { n: { $gt: 1 } })), { 'round_trip_things.count': 1 });
  const pages = await commandsOf(async () => {
    for await (const page of things.scan(scope, {}, { sort: { n: 1 }, pageSize: 2 })) assert.ok(page.length <= 2);
  });
  assert.ok(
    pages['round_trip_things.scan_page']! >= 2,
    `a scan of 3 by 2 reads at least 2 pages: ${JSON.stringify(pages)}`,
  );
}

test('the embedded store counts a statement batch per call and one COMMIT per turn; a read it answers from memory is no command', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-round-trips-'));
  const store = new EmbeddedStore(dir);
  t.after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  await countsEachCommand(store, 1, 1);
  const things = store.collection<{ id: string; tenantId: string; n: number }>('round_trip_things');
  await things.findOne({ tenantId: 'org_count' }, { id: 't2' });
  assert.deepEqual(await commandsOf(() => things.findOne({ tenantId: 'org_count' }, { id: 't2' })), {});
  // Writes of one turn share one COMMIT; t2 and t3 are kept (read by id, and in a list), so each write is one batch, with no read first.
  assert.deepEqual(
    await commandsOf(() =>
      Promise.all([
        things.updateOne({ tenantId: 'org_count' }, { id: 't2' }, { $inc: { n: 1 } }),
        things.deleteOne({ tenantId: 'org_count' }, { id: 't3' }),
      ]),
    ),
    {
      'round_trip_things.updateOne': 1,
      'round_trip_things.deleteOne': 1,
      '*.transaction': 1,
    },
  );
  // A compare-and-set by id with further conditions, and an id list whose documents are all kept, are checked in memory too.
  const org = { tenantId: 'org_count' };
  await things.insertMany(org, [
    { id: 'k1', tenantId: '', n: 1 },
    { id: 'k2', tenantId: '', n: 2 },
  ]);
  await things.find(org, { id: { $in: ['k1', 'k2'] } });
  assert.deepEqual(
    await commandsOf(async () => {
      assert.equal((await things.findOne(org, { id: 'k1', n: 1 }))?.id, 'k1');
      assert.equal(await things.findOne(org, { id: 'k1', n: { $gt: 1 } }), null, 'a condition that fails');
      assert.equal(await things.findOne({ tenantId: 'org_other' }, { id: 'k1', n: 1 }), null, 'another tenant');
      assert.deepEqual((await things.find(org, { id: { $in: ['k2', 'k1', 'k2'] } })).map((d) => d.id).sort(), [
        'k1',
        'k2',
      ]);
      assert.deepEqual(await things.find({ tenantId: 'org_other' }, { id: { $in: ['k1'] } }), []);
    }),
    {},
  );
  const applied: string[] = [];
  assert.deepEqual(
    await commandsOf(() =>
      things.bulkWrite(org, [
        { updateOne: { filter: { id: 'k1', n: 1 }, update: { $set: { n: 10 } }, applied: () => applied.push('k1') } },
        { updateOne: { filter: { id: 'k2', n: 5 }, update: { $set: { n: 20 } }, applied: () => applied.push('k2') } },
      ]),
    ),
    {
      'round_trip_things.bulkWrite': 1,
      '*.transaction': 1,
    },
  );
  assert.deepEqual(applied, ['k1'], 'told which update applied, as it was made');
  assert.deepEqual(
    (await things.find(org, { id: { $in: ['k1', 'k2'] } })).map((d) => d.n).sort((a, b) => a - b),
    [2, 10],
    'only the compare-and-set that held was applied',
  );
  assert.deepEqual(
    await commandsOf(async () => {
      assert.deepEqual(
        (await things.find(org, { id: { $in: ['k1', 'k2'] }, n: { $gt: 5 } })).map((d) => d.id),
        ['k1'],
        'a list with a condition',
      );
    }),
    {},
  );
  assert.deepEqual(
    await commandsOf(() => things.find(org, { id: { $in: ['k1', 'k9'] } })),
    { 'round_trip_things.find': 1 },
    'a list with an id not kept is read with SQL',
  );
});

test('the MongoDB adapter counts every command it sends: one per driver call, one per id where FerretDB reads an id list one id at a time', async (t) => {
  const url = await serviceUrl(t, 'MONGODB_URL');
  if (!url) return;
  const dbName = `relaybox_rt_${Math.random().toString(36).slice(2, 10)}`;
  const client = new MongoClient(url);
  const ferret = typeof (await client.db(dbName).admin().command({ buildInfo: 1 })).ferretdbVersion === 'string';
  await client.close();
  const store = new MongoStore(url, dbName, loadConfig({}).storePingTimeoutMs, loadConfig({}).mongoWrites);
  t.after(async () => {
    await store.dropDatabase();
    await store.close();
  });
  await countsEachCommand(store, 0, ferret ? 3 : 1);
});
