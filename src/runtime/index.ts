import type { Logger } from '../log.ts';
import { LocalBroadcast, RedisBroadcast, type Broadcast } from './broadcast.ts';
import { LocalTransport } from './local-transport.ts';
import { LocalRateLimiter, RedisRateLimiter, type RateLimiter } from './rate-limiter.ts';
import { redisClient, type ClusterSeed, type RedisTarget } from './redis-client.ts';
import { redisConnection, type RedisConnection } from './redis-connection.ts';
import { RedisTransport } from './redis-transport.ts';
import type { RuntimeConfig, Transport } from './types.ts';

export type { RuntimeConfig, Transport } from './types.ts';
export { RedisTransport } from './redis-transport.ts';
export { parseClusterNodes, type ClusterSeed, type RedisTarget } from './redis-client.ts';
export type { RedisConnection } from './redis-connection.ts';

/** Where the runtime runs: a Redis Cluster when `redisClusterNodes` is set, one Redis when `redisUrl` is, otherwise this process. */
export interface RuntimeOptions {
  redisUrl: string | undefined;
  redisClusterNodes?: ClusterSeed[] | undefined;
  nodeId: string;
  runtime: RuntimeConfig;
}

/** The Redis the runtime uses, if any: REDIS_CLUSTER_NODES or REDIS_URL (the configuration refuses both). */
export function redisTarget(config: Pick<RuntimeOptions, 'redisUrl' | 'redisClusterNodes'>): RedisTarget | undefined {
  if (config.redisClusterNodes?.length) return { clusterNodes: config.redisClusterNodes };
  return config.redisUrl ? { url: config.redisUrl } : undefined;
}
export type { RateLimiter } from './rate-limiter.ts';
export type { Broadcast } from './broadcast.ts';

/**
 * The process's one command connection to Redis when REDIS_URL or
 * REDIS_CLUSTER_NODES is set (shared by the transport and the event stream),
 * otherwise none. Its maker closes it once both have stopped.
 */
export function createRedisConnection(
  config: Pick<RuntimeOptions, 'redisUrl' | 'redisClusterNodes' | 'runtime'>,
): RedisConnection | undefined {
  const target = redisTarget(config);
  return target ? redisConnection(target, config.runtime) : undefined;
}

/** Redis Streams over the process's Redis connection when there is one, otherwise everything in this process. */
export function createTransport(
  config: Pick<RuntimeOptions, 'nodeId' | 'runtime'>,
  log: Logger,
  redis: RedisConnection | undefined,
): Transport {
  const runtimeLog = log.child({ component: 'runtime' });
  if (redis) return new RedisTransport(redis, config.runtime, config.nodeId, runtimeLog);
  return new LocalTransport(config.runtime, runtimeLog);
}

/** The GCRA limiter shared by every frontend on Redis, or this process's own on the embedded default. */
export function createRateLimiter(config: Pick<RuntimeOptions, 'redisUrl' | 'redisClusterNodes' | 'runtime'>): {
  limiter: RateLimiter;
  close(): Promise<void>;
} {
  const target = redisTarget(config);
  if (!target) return { limiter: new LocalRateLimiter(), close: async () => {} };
  const redis = redisClient(target, { maxRetriesPerRequest: 2, enableAutoPipelining: true });
  return {
    limiter: new RedisRateLimiter(redis, config.runtime.keyPrefix),
    close: async () => void (await redis.quit().catch(() => undefined)),
  };
}

/** Messages to every process (Redis pub/sub), or to this process's own handlers on the embedded default. */
export function createBroadcast(config: RuntimeOptions, log: Logger): Broadcast {
  const target = redisTarget(config);
  if (!target) return new LocalBroadcast();
  return new RedisBroadcast(
    target,
    config.runtime.keyPrefix,
    config.nodeId,
    config.runtime.broadcastConfirmMs,
    log.child({ component: 'broadcast' }),
  );
}
