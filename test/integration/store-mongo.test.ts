import { loadConfig } from '../../src/config.ts';
import { test } from 'node:test';
import { MongoStore } from '../../src/store/mongo-store.ts';
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
