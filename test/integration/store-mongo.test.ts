import { loadConfig } from '../../src/config.ts';
import { test } from 'node:test';
import { MongoClient } from 'mongodb';
import assert from 'node:assert/strict';
import { MongoStore, type MongoPaths } from '../../src/store/mongo-store.ts';
import { MongoCollection } from '../../src/store/mongo-collection.ts';
import { serviceUrl } from '../support/services.ts';
import { storeContract } from './store-contract.ts';

const url = process.env.MONGODB_URL;
if (url) {
  storeContract('mongodb wire', async () => {
    const store = new MongoStore(
      url,
      `relaybox_store_${Math.random().toString(36).slice(2, 10)}`,
      loadConfig({}).storePingTimeoutMs,
      loadConfig({}).mongoWrites,
    );
    return {
      store,
      dispose: async () => {
        await store.dropDatabase();
        await store.close();
      },
    };
  });
} else {
  test('store contract: mongodb wire', async (t) => {
    await serviceUrl(t, 'MONGODB_URL');
  });
}

/**
 * MongoDB's own path of a claim of many documents (the write, then one read of
 * the claim), which the store takes on MongoDB and not on FerretDB 1.x: made
 * to take it here, on a collection small enough for FerretDB's `$in` reads.
 */
test("updateManyReturning on MongoDB's path: the write and one read of what it changed", async (t) => {
  if (!url) return void (await serviceUrl(t, 'MONGODB_URL'));
  const client = new MongoClient(url, { monitorCommands: true });
  const commands: string[] = [];
  client.on('commandStarted', (e) => commands.push(e.commandName));
  const dbName = `relaybox_claim_${Math.random().toString(36).slice(2, 10)}`;
  t.after(async () => {
    await client.db(dbName).dropDatabase();
    await client.close();
  });
  const col = new MongoCollection<{ id: string; tenantId: string; status: string; mark?: string }>(
    'claims',
    client.db(dbName),
    { scansIdLists: false, writesOneStatementEach: false, updatesReadThenWrite: false, groupsWithoutMin: false },
  );
  const A = { tenantId: 'org_a' };
  await col.insertMany(A, [
    { id: 'c1', tenantId: '', status: 'queued' },
    { id: 'c2', tenantId: '', status: 'queued' },
    { id: 'c3', tenantId: '', status: 'sent' },
  ]);
  await col.insertOne({ tenantId: 'org_b' }, { id: 'c4', tenantId: '', status: 'queued' });
  const ids = ['c1', 'c2', 'c3', 'c4'];
  const claim = (mark: string) =>
    col.updateManyReturning(
      A,
      { id: { $in: ids }, status: 'queued' },
      { $set: { status: 'processing', mark } },
      {
        id: { $in: ids },
        mark,
      },
    );
  commands.length = 0;
  const got = await claim('m1');
  const spent = [...commands];
  assert.deepEqual(got.map((d) => [d.id, d.status, d.mark, d.tenantId]).sort(), [
    ['c1', 'processing', 'm1', 'org_a'],
    ['c2', 'processing', 'm1', 'org_a'],
  ]);
  assert.deepEqual(spent, ['update', 'find'], 'one write, one read (counted by the driver)');
  commands.length = 0;
  assert.deepEqual(await claim('m2'), [], 'nothing left to claim');
  assert.deepEqual(commands, ['update'], 'and then nothing is read');
  assert.equal((await col.findOne({ tenantId: 'org_b' }, { id: 'c4' }))?.status, 'queued');
});

test("MONGODB_PATHS: the paths a store takes follow the server unless MongoDB's are asked for; $group's missing $min follows the server", async (t) => {
  if (!url) return void (await serviceUrl(t, 'MONGODB_URL'));
  const client = new MongoClient(url);
  const ferret = typeof (await client.db('admin').command({ buildInfo: 1 })).ferretdbVersion === 'string';
  await client.close();
  const config = loadConfig({});
  const paths = async (chosen: MongoPaths) => {
    const store = new MongoStore(
      url,
      `relaybox_paths_${Math.random().toString(36).slice(2, 10)}`,
      config.storePingTimeoutMs,
      config.mongoWrites,
      {
        paths: chosen,
      },
    );
    await store.init();
    await store.close();
    return store.quirks;
  };
  const workarounds = { scansIdLists: ferret, writesOneStatementEach: ferret, updatesReadThenWrite: ferret };
  assert.deepEqual(await paths('detected'), { ...workarounds, groupsWithoutMin: ferret });
  assert.deepEqual(await paths('mongodb'), {
    scansIdLists: false,
    writesOneStatementEach: false,
    updatesReadThenWrite: false,
    groupsWithoutMin: ferret,
  });
});
