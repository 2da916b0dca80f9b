import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { withDatabase } from './test-app.ts';

/** A multi-process test's own slice of the wire backend: a Redis key prefix, a MongoDB database and a data dir. */
export interface WireRun {
  redisUrl: string;
  mongoUrl: string;
  database: string;
  prefix: string;
  dir: string;
  redis: Redis;
  /** What every process of the run shares. */
  env: { REDIS_URL: string; MONGODB_URL: string; RUNTIME_KEY_PREFIX: string; DATA_DIR: string };
}

/**
 * Sets up a run on Redis + MongoDB wire, and discards it after the test once
 * `stopProcesses` has stopped the run's processes. Without the URLs the test
 * is skipped with the reason, except in CI, where that is a failure.
 */
export async function wireRun(t: TestContext, name: string, stopProcesses: () => void): Promise<WireRun | undefined> {
  const redisUrl = process.env.REDIS_URL;
  const mongoUrl = process.env.MONGODB_URL;
  if (!redisUrl || !mongoUrl) {
    if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
    t.skip('REDIS_URL/MONGODB_URL not set');
    return undefined;
  }
  const dir = await mkdtemp(join(tmpdir(), `relaybox-${name}-`));
  const suffix = randomUUID().slice(0, 8);
  const prefix = `${name}${suffix}`;
  const database = `relaybox_${name}_${suffix}`;
  const redis = new Redis(redisUrl);
  t.after(async () => {
    stopProcesses();
    const keys = await redis.keys(`${prefix}:*`);
    for (let i = 0; i < keys.length; i += 1_000) await redis.del(...keys.slice(i, i + 1_000));
    redis.disconnect();
    const store = new MongoStore(mongoUrl, database, loadConfig({}).storePingTimeoutMs, loadConfig({}).mongoWrites);
    await store
      .init()
      .then(() => store.dropDatabase())
      .finally(() => store.close())
      .catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  return {
    redisUrl,
    mongoUrl,
    database,
    prefix,
    dir,
    redis,
    env: {
      REDIS_URL: redisUrl,
      MONGODB_URL: withDatabase(mongoUrl, database),
      RUNTIME_KEY_PREFIX: prefix,
      DATA_DIR: join(dir, 'data'),
    },
  };
}
