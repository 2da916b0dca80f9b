import { rm } from 'node:fs/promises';
import type { Config } from '../../src/config.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';

/** Drops what a test or bench run stored: its MongoDB database (when it used one) and its data dir. */
export async function discardRunData(config: Config, dataDir: string): Promise<void> {
  if (config.mongoUrl) {
    const store = new MongoStore(config.mongoUrl, undefined, config.storePingTimeoutMs);
    await store.init();
    await store.dropDatabase();
    await store.close();
  }
  await rm(dataDir, { recursive: true, force: true });
}
