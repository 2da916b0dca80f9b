import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster } from 'ioredis';
import { parseClusterNodes, type ClusterSeed } from '../../src/runtime/redis-client.ts';
import { fileServiceUrl } from './services.ts';

const run = promisify(execFile);
const script = new URL('../../scripts/redis-cluster.sh', import.meta.url).pathname;

/** The seed nodes of the test cluster (REDIS_CLUSTER_NODES; CI starts one with scripts/redis-cluster.sh), or undefined with the reason printed. */
export async function fileClusterSeeds(): Promise<ClusterSeed[] | undefined> {
  const raw = await fileServiceUrl('REDIS_CLUSTER_NODES');
  return raw ? parseClusterNodes(raw) : undefined;
}

/** Deletes every key of a test's prefix on every master (tagged keys start with `{<prefix>`). */
export async function deleteClusterPrefix(seeds: ClusterSeed[], prefix: string): Promise<void> {
  const cluster = new Cluster(seeds);
  try {
    // nodes() is filled once the client knows the topology.
    await cluster.ping();
    for (const node of cluster.nodes('master')) {
      for (const key of await node.keys(`*${prefix}*`)) await cluster.del(key);
    }
  } finally {
    cluster.disconnect();
  }
}

/** A cluster of its own for a test that kills nodes: 3 masters and 3 replicas from `firstPort`, stopped by PID. */
export class OwnCluster {
  readonly dir = mkdtempSync(join(tmpdir(), 'relaybox-cluster-'));
  seeds: ClusterSeed[] = [];

  constructor(readonly firstPort: number) {}

  async start(): Promise<ClusterSeed[]> {
    const { stdout } = await run('bash', [script, 'start', String(this.firstPort), this.dir], { timeout: 90_000 });
    this.seeds = parseClusterNodes(stdout.trim().split('\n').pop() ?? '');
    return this.seeds;
  }

  pid(port: number): number {
    return Number(readFileSync(join(this.dir, `${port}.pid`), 'utf8'));
  }

  /** Brings a node back on its port with its old cluster config: it rejoins, as a replica of whoever took its slots. */
  async restart(port: number): Promise<void> {
    await run('bash', [script, 'node', String(this.firstPort), this.dir, String(port)], { timeout: 30_000 });
  }

  async stop(): Promise<void> {
    await run('bash', [script, 'stop', String(this.firstPort), this.dir], { timeout: 30_000 });
  }
}
