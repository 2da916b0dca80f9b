import { Redis } from 'ioredis';
import type { Config } from '../config.ts';
import type { EventStream } from '../events/event-stream.ts';
import { StoreEventStream } from '../events/store-event-stream.ts';
import type { Store } from '../store/collection.ts';
import { RedisEventStream } from './redis-event-stream.ts';
import type { Logger } from '../log.ts';
import { LocalBroadcast, RedisBroadcast, type Broadcast } from './broadcast.ts';
import { LocalTransport } from './local-transport.ts';
import { LocalRateLimiter, RedisRateLimiter, type RateLimiter } from './rate-limiter.ts';
import { RedisTransport } from './redis-transport.ts';
import type { Transport } from './types.ts';

export type { Transport } from './types.ts';
export type { RateLimiter } from './rate-limiter.ts';
export type { Broadcast } from './broadcast.ts';

/** Redis Streams when REDIS_URL is set, otherwise everything in this process. */
export function createTransport(config: Config, log: Logger): Transport {
  const runtimeLog = log.child({ component: 'runtime' });
  if (config.redisUrl) return new RedisTransport(config.redisUrl, config.runtime, config.nodeId, runtimeLog);
  return new LocalTransport(config.runtime, runtimeLog);
}

/** The GCRA limiter shared by every frontend on Redis, or this process's own on the embedded default. */
export function createRateLimiter(config: Config): { limiter: RateLimiter; close(): Promise<void> } {
  if (!config.redisUrl) return { limiter: new LocalRateLimiter(), close: async () => {} };
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2, enableAutoPipelining: true });
  return { limiter: new RedisRateLimiter(redis, config.runtime.keyPrefix), close: async () => void (await redis.quit().catch(() => undefined)) };
}

/** Messages to every process (Redis pub/sub), or to this process's own handlers on the embedded default. */
export function createBroadcast(config: Config, log: Logger): Broadcast {
  if (!config.redisUrl) return new LocalBroadcast();
  return new RedisBroadcast(config.redisUrl, config.runtime.keyPrefix, config.nodeId, config.runtime.broadcastConfirmMs, log.child({ component: 'broadcast' }));
}

/** The durable event stream: a Redis stream beside the actors, or documents in the embedded store. */
export function createEventStream(runtime: Transport, store: Store, config: Config['runtime'], claimIdleMs?: number): EventStream {
  if (runtime instanceof RedisTransport) return new RedisEventStream(runtime.connection, `${config.keyPrefix}:events`, config.dedupeTtlMs, undefined, claimIdleMs);
  return new StoreEventStream(store);
}
