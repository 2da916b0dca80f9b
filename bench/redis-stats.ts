import { isCluster, type RedisClient } from '../src/runtime/redis-client.ts';

/** Commands the Redis server, or every master of a cluster, has run so far, by command (`INFO commandstats`; a Lua script's own commands count too). */
export async function commandCounts(redis: RedisClient): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const node of isCluster(redis) ? redis.nodes('master') : [redis]) {
    for (const [, name, calls] of (await node.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
      counts.set(name!, (counts.get(name!) ?? 0) + Number(calls));
  }
  return counts;
}
