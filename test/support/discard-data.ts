import { rm } from 'node:fs/promises';
import { Redis } from 'ioredis';
import type { Config } from '../../src/config.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { deleteClusterPrefix } from './redis-cluster.ts';

/** Drops what a test or bench run stored: its MongoDB database (when it used one) and its data dir. */
export async function discardRunData(config: Config, dataDir: string): Promise<void> {
  if (config.mongoUrl) {
    const store = new MongoStore(config.mongoUrl, undefined, config.storePingTimeoutMs, config.mongoWrites);
    await store.init();
    await store.dropDatabase();
    await store.close();
  }
  if (config.redisClusterNodes) await deleteClusterPrefix(config.redisClusterNodes, config.runtime.keyPrefix);
  await rm(dataDir, { recursive: true, force: true });
}

/** Deletes a run's Redis keys: those under `prefix` (its RUNTIME_KEY_PREFIX, or any key pattern's fixed start). */
export async function discardRedisKeys(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
