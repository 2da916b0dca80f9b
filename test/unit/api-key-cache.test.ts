import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';
import { ApiKeyCache } from '../../src/identity/api-key-cache.ts';
import { newApiKey } from '../../src/identity/secrets.ts';

/** A store of key hashes to key ids, counting its reads: what a miss costs. A read waits for `gate` when one is set. */
function keyStore() {
  const keyIds = new Map<string, string>();
  const reads: string[] = [];
  const store = {
    keyIds,
    reads,
    gate: undefined as Promise<void> | undefined,
    load: async (hash: string) => {
      reads.push(hash);
      const found = keyIds.get(hash);
      await store.gate;
      return found;
    },
  };
  return store;
}

const cacheOf = (store: ReturnType<typeof keyStore>, ttlMs = 60_000) =>
  new ApiKeyCache<string | undefined>(ttlMs, store.load, (keyId) => keyId);

test('a known key is verified from memory: one store read, however many requests', async () => {
  const store = keyStore();
  const key = newApiKey();
  store.keyIds.set(key.hash, 'key_1');
  const cache = cacheOf(store);
  const answers = await Promise.all(Array.from({ length: 50 }, () => cache.lookup(key.raw)));
  assert.ok(answers.every((keyId) => keyId === 'key_1'));
  for (let i = 0; i < 20; i++) assert.equal(cache.lookup(key.raw), 'key_1', 'at once, without a promise');
  assert.deepEqual(store.reads, [key.hash], 'read once, by the stored hash');
  assert.equal(await cache.lookup(`${key.raw}x`), undefined, 'a near miss is another key');
});

test('a revoked key is looked up afresh at once, not when its entry expires', async () => {
  const store = keyStore();
  const key = newApiKey();
  const other = newApiKey();
  store.keyIds.set(key.hash, 'key_1');
  store.keyIds.set(other.hash, 'key_2');
  const cache = cacheOf(store);
  assert.equal(await cache.lookup(key.raw), 'key_1');
  assert.equal(await cache.lookup(other.raw), 'key_2');
  store.keyIds.delete(key.hash);
  cache.forget('key_1');
  assert.equal(await cache.lookup(key.raw), undefined, 'the revoked key is refused');
  assert.equal(cache.lookup(other.raw), 'key_2', 'another key stays cached');
  assert.deepEqual(store.reads, [key.hash, other.hash, key.hash]);
});

test('a revocation heard while the key is being read drops that read: it may predate the revocation', async () => {
  const store = keyStore();
  const key = newApiKey();
  store.keyIds.set(key.hash, 'key_1');
  const cache = cacheOf(store);
  let open!: () => void;
  store.gate = new Promise((resolve) => (open = resolve));
  const early = cache.lookup(key.raw);
  await sleep(5);
  store.keyIds.delete(key.hash);
  cache.forget('key_1');
  open();
  assert.equal(await early, 'key_1', 'the request that was already waiting gets what was read');
  store.gate = undefined;
  assert.equal(await cache.lookup(key.raw), undefined, 'the next one reads again');
});

test('a process that missed a revocation refuses the key once the entry expires', async () => {
  const store = keyStore();
  const key = newApiKey();
  store.keyIds.set(key.hash, 'key_1');
  const cache = cacheOf(store, 50);
  assert.equal(await cache.lookup(key.raw), 'key_1');
  store.keyIds.delete(key.hash);
  await sleep(80);
  assert.equal(await cache.lookup(key.raw), undefined);
});

test('the cache holds neither the raw key nor the hash the store indexes it by', async () => {
  const store = keyStore();
  const key = newApiKey();
  store.keyIds.set(key.hash, 'key_1');
  const cache = cacheOf(store);
  await cache.lookup(key.raw);
  const dump = inspect(cache, { showHidden: true, depth: 6 });
  assert.ok(dump.includes('key_1'), 'the dump shows the entry');
  assert.ok(!dump.includes(key.raw.slice(9)), 'no raw key');
  assert.ok(!dump.includes(key.hash), 'no stored hash');
  const second = cacheOf(store);
  await second.lookup(key.raw);
  const digestsOf = (c: ApiKeyCache<string | undefined>) => [
    ...new Set(inspect(c, { showHidden: true, depth: 6 }).match(/'[A-Za-z0-9+/]{43}=' =>/g)),
  ];
  assert.equal(digestsOf(cache).length, 1, 'one key cached, under one digest');
  assert.notDeepEqual(digestsOf(cache), digestsOf(second), 'each process digests under its own key');
});

test('a failed load is not kept: the next request tries again', async () => {
  const key = newApiKey();
  let fail = true;
  const cache = new ApiKeyCache<string>(
    60_000,
    async () => {
      if (fail) throw new Error('store unavailable');
      return 'key_1';
    },
    (keyId) => keyId,
  );
  await assert.rejects(async () => cache.lookup(key.raw), /store unavailable/);
  fail = false;
  assert.equal(await cache.lookup(key.raw), 'key_1');
  assert.equal(cache.size, 1);
});
