import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';
import { ApiKeyCache } from '../../src/identity/api-key-cache.ts';
import { newApiKey } from '../../src/identity/secrets.ts';

/** A store of key hashes to callers, counting its reads: what a miss costs. */
function keyStore() {
  const callers = new Map<string, string>();
  const reads: string[] = [];
  return {
    callers,
    reads,
    load: async (hash: string) => {
      reads.push(hash);
      return callers.get(hash);
    },
  };
}

test('a known key is verified from memory: one store read, however many requests', async () => {
  const store = keyStore();
  const key = newApiKey();
  store.callers.set(key.hash, 'org_1');
  const cache = new ApiKeyCache(60_000, store.load);
  const answers = await Promise.all(Array.from({ length: 50 }, () => cache.lookup(key.raw)));
  assert.ok(answers.every((caller) => caller === 'org_1'));
  for (let i = 0; i < 20; i++) assert.equal(await cache.lookup(key.raw), 'org_1');
  assert.deepEqual(store.reads, [key.hash], 'read once, by the stored hash');
  assert.equal(await cache.lookup(`${key.raw}x`), undefined, 'a near miss is another key');
});

test('a revoked key is looked up afresh at once, not when its entry expires', async () => {
  const store = keyStore();
  const key = newApiKey();
  const other = newApiKey();
  store.callers.set(key.hash, 'org_1');
  store.callers.set(other.hash, 'org_2');
  const cache = new ApiKeyCache(60_000, store.load);
  assert.equal(await cache.lookup(key.raw), 'org_1');
  assert.equal(await cache.lookup(other.raw), 'org_2');
  store.callers.delete(key.hash);
  cache.forget(key.hash);
  assert.equal(await cache.lookup(key.raw), undefined, 'the revoked key is refused');
  assert.equal(await cache.lookup(other.raw), 'org_2', 'another key stays cached');
  assert.deepEqual(store.reads, [key.hash, other.hash, key.hash]);
});

test('a process that missed a revocation refuses the key once the entry expires', async () => {
  const store = keyStore();
  const key = newApiKey();
  store.callers.set(key.hash, 'org_1');
  const cache = new ApiKeyCache(50, store.load);
  assert.equal(await cache.lookup(key.raw), 'org_1');
  store.callers.delete(key.hash);
  await sleep(80);
  assert.equal(await cache.lookup(key.raw), undefined);
});

test('the cache holds neither the raw key nor the hash the store indexes it by as its lookup key', async () => {
  const store = keyStore();
  const key = newApiKey();
  store.callers.set(key.hash, 'org_1');
  const cache = new ApiKeyCache(60_000, store.load);
  await cache.lookup(key.raw);
  const dump = inspect(cache, { showHidden: true, depth: 6 });
  assert.ok(!dump.includes(key.raw.slice(9)), 'no raw key in the cache');
  assert.equal(dump.split(key.hash).length - 1, 2, 'the stored hash only as what a revocation names');
  const second = new ApiKeyCache(60_000, store.load);
  await second.lookup(key.raw);
  const keysOf = (c: ApiKeyCache<unknown>) => [
    ...new Set(inspect(c, { showHidden: true, depth: 6 }).match(/'[A-Za-z0-9+/]{43}=' =>/g)),
  ];
  assert.equal(keysOf(cache).length, 1, 'one key cached, under one digest');
  assert.notDeepEqual(keysOf(cache), keysOf(second), 'each process digests under its own key');
});

test('a failed load is not kept: the next request tries again', async () => {
  const key = newApiKey();
  let fail = true;
  const cache = new ApiKeyCache(60_000, async () => {
    if (fail) throw new Error('store unavailable');
    return 'org_1';
  });
  await assert.rejects(cache.lookup(key.raw), /store unavailable/);
  fail = false;
  assert.equal(await cache.lookup(key.raw), 'org_1');
  assert.equal(cache.size, 1);
});
