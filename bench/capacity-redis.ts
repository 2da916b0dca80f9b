/**
 * The Redis side of bench/capacity.ts: a redis-server of the run's own on a
 * private port, or a Redis Cluster the caller started (REDIS_CLUSTER_NODES),
 * with what the bench reads of it: the commands its masters ran (`INFO
 * commandstats`, INFO itself left out) and the CPU of every one of its
 * redis-servers, replicas too (a cluster's replication is part of what a
 * send costs it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
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

/** A connection that gives up at once instead of retrying. */
const connection = (url: string) =>
  new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null }).on('error', () => {});

const answers = (url: string) => {
  const probe = connection(url);
  return probe.connect().then(
    () => (probe.disconnect(), true),
    () => (probe.disconnect(), false),
  );
};

async function commandsOf(redis: Redis, into = new Map<string, number>()): Promise<Map<string, number>> {
  const info = await redis.info('commandstats');
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (m[1] !== 'info') into.set(m[1]!, (into.get(m[1]!) ?? 0) + Number(m[2]));
  return into;
}

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
    commands: () => commandsOf(redis),
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
 * A Redis Cluster the caller started, from its seed list (`host:port,…`):
 * its masters and replicas as `CLUSTER NODES` lists them, each server's pid
 * from `INFO server` (so on this machine only). The bench leaves it running.
 */
export async function existingCluster(seeds: string): Promise<RedisTarget> {
  const seed = new Redis(`redis://${seeds.split(',')[0]!.trim()}`);
  const nodes = String(await seed.call('CLUSTER', 'NODES'))
    .trim()
    .split('\n')
    .map((line) => line.split(' '))
    .filter((f) => !f[2]!.includes('fail') && !f[2]!.includes('noaddr'))
    .map((f) => ({ address: f[1]!.split('@')[0]!, master: f[2]!.includes('master') }));
  seed.disconnect();
  const servers = nodes.map((n) => ({ ...n, redis: new Redis(`redis://${n.address}`) }));
  const pids = await Promise.all(
    servers.map(async (s) => Number(/^process_id:(\d+)/m.exec(await s.redis.info('server'))?.[1])),
  );
  const masters = servers.filter((s) => s.master);
  return {
    name: `${masters.length}-master cluster`,
    env: { REDIS_URL: '', REDIS_CLUSTER_NODES: seeds },
    commands: async () => {
      const all = new Map<string, number>();
      for (const m of masters) await commandsOf(m.redis, all);
      return all;
    },
    cpuSeconds: () => pids.reduce((s, pid) => s + (cpuSeconds(pid) ?? NaN), 0),
    stop: async () => servers.forEach((s) => s.redis.disconnect()),
    kill: () => servers.forEach((s) => s.redis.disconnect()),
  };
}
