import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** A seed node of a Redis Cluster: the client learns the rest of the topology from it. */
export interface ClusterSeed {
  host: string;
  port: number;
}

/** Where the Redis-backed runtime lives: one Redis server (`REDIS_URL`) or a Redis Cluster (`REDIS_CLUSTER_NODES`). */
export type RedisTarget = { url: string } | { clusterNodes: ClusterSeed[] };

/** One server or a whole cluster: the commands the runtime uses are the same on both. */
export type RedisClient = Redis | Cluster;

/** `host:port,host:port,…` as REDIS_CLUSTER_NODES gives it. */
export function parseClusterNodes(raw: string): ClusterSeed[] {
  const seeds = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(entry);
      const port = Number(match?.[2]);
      if (!match || port < 1 || port > 65535) throw new Error(`REDIS_CLUSTER_NODES: "${entry}" is not host:port`);
      return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
    });
  if (seeds.length === 0) throw new Error('REDIS_CLUSTER_NODES is set but names no host:port');
  return seeds;
}

export function isCluster(redis: RedisClient): redis is Cluster {
  return redis instanceof Cluster;
}

/**
 * A connection to the target. On a cluster, a command for a slot that moved
 * (MOVED, ASK) follows it, and a command to a master that died waits for its
 * replica to be promoted: the redirections are retried for up to about 20 s
 * (`maxRedirections` × `retryDelayOnFailover`) before the command fails.
 */
export function redisClient(
  target: RedisTarget,
  options: RedisOptions & { shardedSubscribers?: boolean } = {},
): RedisClient {
  const { shardedSubscribers, enableAutoPipelining, lazyConnect, ...redisOptions } = options;
  if ('url' in target) return new Redis(target.url, { enableAutoPipelining, lazyConnect, ...redisOptions });
  return new Cluster(target.clusterNodes, {
    redisOptions,
    enableAutoPipelining,
    lazyConnect,
    shardedSubscribers,
    scaleReads: 'master',
    maxRedirections: 100,
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 200,
    retryDelayOnTryAgain: 200,
    retryDelayOnMoved: 0,
  });
}

/**
 * A single-node client pointed at a cluster node would fail on the first
 * command whose key lives elsewhere (a MOVED inside a transaction ends as
 * EXECABORT): refuse it at start with what to set instead.
 */
export async function requireTargetKind(redis: RedisClient, target: RedisTarget): Promise<void> {
  if (!('url' in target)) return;
  const info = await (redis as Redis).info('cluster');
  if (/cluster_enabled:1/.test(info)) {
    throw new Error(
      'REDIS_URL points at a Redis Cluster node: set REDIS_CLUSTER_NODES=host:port,host:port,… (seed nodes of the cluster) instead of REDIS_URL',
    );
  }
}
