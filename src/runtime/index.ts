import { Redis } from 'ioredis';
import type { Logger } from '../log.ts';
import { LocalBroadcast, RedisBroadcast, type Broadcast } from './broadcast.ts';
import { LocalTransport } from './local-transport.ts';
import { LocalRateLimiter, RedisRateLimiter, type RateLimiter } from './rate-limiter.ts';
import { RedisTransport } from './redis-transport.ts';
import type { RuntimeConfig, Transport } from './types.ts';

export type { RuntimeConfig, Transport } from './types.ts';
export { RedisTransport } from './redis-transport.ts';

/** Where the runtime runs: Redis when `redisUrl` is set, otherwise this process. */
export interface RuntimeOptions {
  redisUrl: string | undefined;
  nodeId: string;
  runtime: RuntimeConfig;
}
export type { RateLimiter } from './rate-limiter.ts';
export type { Broadcast } from './broadcast.ts';

/** Redis Streams when REDIS_URL is set, otherwise everything in this process. */
export function createTransport(config: RuntimeOptions, log: Logger): Transport {
  const runtimeLog = log.child({ component: 'runtime' });
  if (config.redisUrl) return new RedisTransport(config.redisUrl, config.runtime, config.nodeId, runtimeLog);
  return new LocalTransport(config.runtime, runtimeLog);
}

/** The GCRA limiter shared by every frontend on Redis, or this process's own on the embedded default. */
export function createRateLimiter(config: Pick<RuntimeOptions, 'redisUrl' | 'runtime'>): { limiter: RateLimiter; close(): Promise<void> } {
  if (!config.redisUrl) return { limiter: new LocalRateLimiter(), close: async () => {} };
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2, enableAutoPipelining: true });
  return { limiter: new RedisRateLimiter(redis, config.runtime.keyPrefix), close: async () => void (await redis.quit().catch(() => undefined)) };
}

/** Messages to every process (Redis pub/sub), or to this process's own handlers on the embedded default. */
export function createBroadcast(config: RuntimeOptions, log: Logger): Broadcast {
  if (!config.redisUrl) return new LocalBroadcast();
  return new RedisBroadcast(config.redisUrl, config.runtime.keyPrefix, config.nodeId, config.runtime.broadcastConfirmMs, log.child({ component: 'broadcast' }));
}
