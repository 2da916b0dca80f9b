import { Redis } from 'ioredis';
import { test } from 'node:test';
import { createLogger } from '../../src/log.ts';
import { RedisTransport } from '../../src/runtime/redis-transport.ts';
import { serviceUrl } from '../support/services.ts';
import { runtimeContract } from './runtime-contract.ts';

export const redisUrl = process.env.REDIS_URL || (process.env.CI === 'true' ? undefined : 'redis://127.0.0.1:6379');

export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
}

if (redisUrl) {
  const url = redisUrl;
  runtimeContract('redis', async (cfg) => {
    const transport = new RedisTransport(url, cfg, `node-${Math.random().toString(36).slice(2, 8)}`, createLogger('silent'));
    const stop = transport.stop.bind(transport);
    transport.stop = async () => {
      await stop();
      await deletePrefix(url, cfg.keyPrefix);
    };
    return transport;
  });
} else {
  test('runtime contract: redis', (t) => {
    serviceUrl(t, 'REDIS_URL');
  });
}
