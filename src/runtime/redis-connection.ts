import { redisClient, type RedisTarget } from './redis-client.ts';
import { RedisKeys } from './redis-keys.ts';
import { withScripts, type ScriptedRedis } from './scripts.ts';
import type { RuntimeConfig } from './types.ts';

/**
 * A process's command connection to Redis (a cluster client on a cluster),
 * with the key names and the replica wait that go with its target. The
 * composition root makes one and hands it to the actor transport and the
 * event stream; whoever made it closes it, after both have stopped. The
 * transport connects it when it starts. Blocking reads and subscriptions
 * take connections of their own.
 */
export interface RedisConnection {
  target: RedisTarget;
  client: ScriptedRedis;
  keys: RedisKeys;
  /** How long a write waits for a replica to confirm it: on a cluster only (0 = it does not wait). */
  replicaWaitMs: number;
}

export function redisConnection(
  target: RedisTarget | string,
  config: Pick<RuntimeConfig, 'keyPrefix' | 'replicaWaitMs'>,
): RedisConnection {
  const where = typeof target === 'string' ? { url: target } : target;
  const keys = new RedisKeys(config.keyPrefix, !('url' in where));
  return {
    target: where,
    client: withScripts(redisClient(where, { maxRetriesPerRequest: 3, lazyConnect: true, enableAutoPipelining: true })),
    keys,
    replicaWaitMs: keys.cluster ? config.replicaWaitMs : 0,
  };
}
