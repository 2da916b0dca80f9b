/**
 * The Redis side of bench/capacity.ts: a redis-server of the run's own on a
 * private port, or a Redis Cluster the caller started (REDIS_CLUSTER_NODES),
 * with what the bench reads of it: the commands its masters ran
 * (`commandCounts`, as every Redis bench counts them) and the CPU of every
 * one of its redis-servers, replicas too (a cluster's replication is part of
 * what a send costs it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { isCluster, parseClusterNodes, redisClient } from '../src/runtime/redis-client.ts';
import { commandCounts } from './redis-stats.ts';
import { cpuSeconds } from './send-path-processes.ts';

export interface RedisTarget {
  /** How the table names it. */
  name: string;
  /** The service's settings that point it at this Redis. */
  env: Record<string, string>;
  /** Commands its masters ran so far, by command. */
  commands(): Promise<Map<string, number>>;
  /** CPU seconds of all its redis-servers so far. */
  cpuSeconds(): number;
  stop(): Promise<void>;
  /** Ends it at once (the bench ran out of time). */
  kill(): void;
}

/** Whether a Redis answers at `url`, asked once, without retrying. */
const answers = (url: string) => {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null }).on(
    'error',
    () => {},
  );
  return probe.connect().then(
    () => (probe.disconnect(), true),
    () => (probe.disconnect(), false),
  );
};

/** A redis-server of this run alone, on `port`, without persistence. */
export async function privateRedis(port: number): Promise<RedisTarget> {
  const url = `redis://127.0.0.1:${port}`;
  if (await answers(url))
    throw new Error(`something already answers on ${url}: set CAPACITY_REDIS_PORT to a free port`);
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  for (let i = 0; !(await answers(url)); i++) {
    if (i > 50) throw new Error(`redis-server did not answer on ${url}`);
    await sleep(100);
  }
  const redis = new Redis(url);
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    name: 'one Redis',
    env: { REDIS_URL: url, REDIS_CLUSTER_NODES: '' },
    commands: () => commandCounts(redis),
    cpuSeconds: () => cpuSeconds(child.pid!) ?? NaN,
    stop: async () => {
      redis.disconnect();
      if (!running()) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
    kill: () => void (running() && child.kill('SIGKILL')),
  };
}

/**
 * A Redis Cluster the caller started, from its seed list (`host:port,…`),
 * through the service's own cluster client: its masters' commands, and the
 * CPU of all its servers, each one's pid from `INFO server` (so on this
 * machine only). The bench leaves it running.
 */
export async function existingCluster(seeds: string): Promise<RedisTarget> {
  const cluster = redisClient({ clusterNodes: parseClusterNodes(seeds) });
  if (!isCluster(cluster)) throw new Error('REDIS_CLUSTER_NODES did not make a cluster client');
  await cluster.ping();
  const pids = await Promise.all(
    cluster.nodes('all').map(async (node) => Number(/^process_id:(\d+)/m.exec(await node.info('server'))?.[1])),
  );
  return {
    name: `${cluster.nodes('master').length}-master cluster`,
    env: { REDIS_URL: '', REDIS_CLUSTER_NODES: seeds },
    commands: () => commandCounts(cluster),
    cpuSeconds: () => pids.reduce((s, pid) => s + (cpuSeconds(pid) ?? NaN), 0),
    stop: async () => cluster.disconnect(),
    kill: () => cluster.disconnect(),
  };
}
