import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { MongoClient } from 'mongodb';
import { loadConfig } from '../../src/config.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { serviceUrl } from '../support/services.ts';
import { startTestApp } from '../support/test-app.ts';

/**
 * What the MongoDB wire double can show of a replica set and a sharded
 * cluster: the client is set up as docs/scaling.md says (majority writes,
 * retried, primary reads), such a write is accepted, and every index the
 * service creates leads with the tenant. A standalone server cannot show a
 * write waiting for a majority, a retry after a failover, or a query routed
 * to one shard: those need a real replica set and cluster.
 */

const database = () => `relaybox_scale_${randomUUID().slice(0, 8)}`;

test('MongoDB: by default writes wait for a majority and are retried, reads go to the primary, and such a write is accepted', async (t) => {
  const url = await serviceUrl(t, 'MONGODB_URL');
  if (!url) return;
  const config = loadConfig({ MONGODB_URL: url });
  const store = new MongoStore(url, database(), config.storePingTimeoutMs, config.mongoWrites);
  t.after(async () => {
    await store.dropDatabase();
    await store.close();
  });
  assert.deepEqual(store.consistency(), { writeConcern: 'majority', retryWrites: true, readPreference: 'primary' });
  const notes = store.collection<{ id: string; tenantId: string; text: string }>('notes', [
    { keys: { tenantId: 1, text: 1 } },
  ]);
  await store.init();
  const scope = { tenantId: 'org_a' };
  await notes.insertOne(scope, { id: 'n1', tenantId: 'org_a', text: 'hello' });
  assert.equal((await notes.updateOne(scope, { id: 'n1' }, { $set: { text: 'again' } }))?.text, 'again');
  assert.equal(
    (await notes.findOne(scope, { id: 'n1' }))?.text,
    'again',
    'read from the primary right after the write',
  );
});

test('MongoDB: MONGODB_WRITE_CONCERN and MONGODB_RETRY_WRITES reach the client', async (t) => {
  const url = await serviceUrl(t, 'MONGODB_URL');
  if (!url) return;
  const config = loadConfig({ MONGODB_URL: url, MONGODB_WRITE_CONCERN: '1', MONGODB_RETRY_WRITES: 'false' });
  const store = new MongoStore(url, database(), config.storePingTimeoutMs, config.mongoWrites);
  t.after(() => store.close());
  assert.deepEqual(store.consistency(), { writeConcern: 1, retryWrites: false, readPreference: 'primary' });
});

/** docs/scaling.md's shard key table: each collection, with the fields of its shard key when it says to shard it. */
async function documentedShardKeys(): Promise<Map<string, Array<[string, string]> | undefined>> {
  const doc = await readFile(new URL('../../docs/scaling.md', import.meta.url), 'utf8');
  const table = doc.split('## Shard keys')[1]?.split('\n## ')[0] ?? '';
  const keys = new Map<string, Array<[string, string]> | undefined>();
  for (const row of table.matchAll(/^\| `([a-z_]+)` \| \w+ \| ([^|]+) \|/gm)) {
    const shardKey = /^shard: `\{ (.+) \}`/.exec(row[2]!)?.[1];
    keys.set(
      row[1]!,
      shardKey?.split(', ').map((field) => field.split(': ') as [string, string]),
    );
  }
  return keys;
}

test('every index the service declares leads with the tenant, the server holds them so, and each collection has a documented shard key', async (t) => {
  const redisUrl = await serviceUrl(t, 'REDIS_URL');
  const mongoUrl = await serviceUrl(t, 'MONGODB_URL');
  if (!redisUrl || !mongoUrl) return;
  const app = await startTestApp('redis+mongo');
  t.after(() => app.stop());
  assert.ok(app.app.store instanceof MongoStore);
  const declared = app.app.store.declaredIndexes();
  assert.ok(declared.size >= 20, `the service's collections are declared (${declared.size})`);
  const offenders: string[] = [];
  for (const [name, indexes] of declared) {
    for (const index of indexes)
      if (Object.keys(index.keys)[0] !== 'tenantId') offenders.push(`${name} ${JSON.stringify(index.keys)}`);
  }
  assert.deepEqual(offenders, [], 'indexes that do not lead with tenantId');

  const client = await MongoClient.connect(app.config.mongoUrl!);
  t.after(() => client.close());
  const onServer: string[] = [];
  for (const [name, indexes] of declared) {
    if (indexes.length === 0) continue;
    const held = (await client.db().collection(name).listIndexes().toArray()).filter((index) => index.name !== '_id_');
    const distinct = new Set(
      indexes.map((index) => JSON.stringify(Object.entries(index.keys).map(([k, v]) => [k === 'id' ? '_id' : k, v]))),
    );
    assert.deepEqual(
      new Set(held.map((index) => JSON.stringify(Object.entries(index.key)))),
      distinct,
      `${name}: every declared index was created`,
    );
    for (const index of held)
      if (Object.keys(index.key)[0] !== 'tenantId') onServer.push(`${name} ${JSON.stringify(index.key)}`);
  }
  assert.deepEqual(onServer, [], 'indexes on the server that do not lead with tenantId');

  const documented = await documentedShardKeys();
  assert.deepEqual(
    [...declared.keys()].filter((name) => !documented.has(name)).sort(),
    [],
    'collections without a shard key in docs/scaling.md',
  );
  // What MongoDB requires of a shard key: here, that it leads with the tenant and that every unique index starts with it.
  const sharded = [...documented].filter(([name, key]) => key && declared.has(name));
  assert.ok(sharded.length >= 5, 'docs/scaling.md names the shard keys of the collections that grow');
  for (const [name, key] of sharded) {
    assert.equal(key![0]![0], 'tenantId', `${name}: its shard key leads with tenantId`);
    for (const unique of declared.get(name)!.filter((index) => index.unique)) {
      const fields = Object.keys(unique.keys).map((k) => (k === 'id' ? '_id' : k));
      assert.ok(
        key!.every(([field, kind], i) => kind !== "'hashed'" && fields[i] === field),
        `${name}: the unique index ${JSON.stringify(unique.keys)} starts with the shard key ${JSON.stringify(key)}`,
      );
    }
  }
});
