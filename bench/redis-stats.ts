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

/**
 * What the clients ran between two `commandCounts`, by command: the `INFO`
 * commands that read the counts, and on a cluster the replicas' own
 * `REPLCONF ACK` to their masters (one a second per replica whatever the
 * clients do), left out, as are the commands that did not run.
 */
export function commandsBetween(before: Map<string, number>, after: Map<string, number>): Map<string, number> {
  const ran = new Map<string, number>();
  for (const [name, n] of after) {
    const delta = n - (before.get(name) ?? 0);
    if (name !== 'info' && name !== 'replconf' && delta !== 0) ran.set(name, delta);
  }
  return ran;
}

/** The sum of a count by name. */
export const totalOf = (counts: Map<string, number>) => [...counts.values()].reduce((sum, n) => sum + n, 0);

/** `name n, name n, …`, largest first, at `digits` decimals, the ones that round to 0 left out. */
export function breakdown(counts: Map<string, number>, digits: number): string {
  return [...counts]
    .filter(([, n]) => Number(n.toFixed(digits)) !== 0)
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ${n.toFixed(digits)}`)
    .join(', ');
}
