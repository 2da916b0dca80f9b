import { connect } from 'node:net';
import type { TestContext } from 'node:test';

/** MONGODB_PATHS_URL: a MongoDB wire server that takes MongoDB's paths (`MONGODB_PATHS=mongodb`), for counting them. */
type ServiceName = 'REDIS_URL' | 'MONGODB_URL' | 'MONGODB_PATHS_URL' | 'REDIS_CLUSTER_NODES';

const defaultPorts: Record<string, number> = { 'redis:': 6379, 'rediss:': 6379, 'mongodb:': 27017 };
const probes = new Map<string, Promise<boolean>>();

/** Whether something accepts a connection at the URL's (first) host and port within a second; asked once per address per process. */
export function answers(url: string): Promise<boolean> {
  const parsed = new URL(url.replace(/^(mongodb:\/\/[^/,]+),[^/]*/, '$1'));
  const host = parsed.hostname || '127.0.0.1';
  const port = Number(parsed.port) || defaultPorts[parsed.protocol] || 0;
  const key = `${host}:${port}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = new Promise<boolean>((resolve) => {
      const socket = connect({ host, port });
      const done = (ok: boolean) => {
        socket.destroy();
        resolve(ok);
      };
      socket.setTimeout(1_000, () => done(false));
      socket.once('connect', () => done(true));
      socket.once('error', () => done(false));
    });
    probes.set(key, probe);
  }
  return probe;
}

/**
 * The URL of a backing service: the variable's value, never a guessed local
 * address (a developer's own Redis or MongoDB on the default port is theirs,
 * and a test would write into it). Outside CI an unset variable, or a service
 * that does not answer, is reported with the reason (the caller skips); in CI
 * the variable must be set, and a missing one throws.
 */
export async function availableService(name: ServiceName): Promise<{ url: string } | { skipped: string }> {
  const ci = process.env.CI === 'true';
  const url = process.env[name];
  if (ci) {
    if (!url) throw new Error(`${name} is not set: CI must run this test against a real service`);
    return { url };
  }
  if (!url) return { skipped: `${name} not set: start the service and set ${name} (see README) to run this test` };
  // A cluster's seed list (host:port,…) is probed at its first node.
  if (!(await answers(name === 'REDIS_CLUSTER_NODES' ? `redis://${url.split(',')[0]!.trim()}` : url)))
    return { skipped: `${name} is set but ${url} does not answer: start the service (see README) to run this test` };
  return { url };
}

/** `availableService` for one test: a service that is not there skips it with the reason. */
export async function serviceUrl(t: TestContext, name: ServiceName): Promise<string | undefined> {
  const found = await availableService(name);
  if ('url' in found) return found.url;
  t.skip(found.skipped);
  return undefined;
}

/** `availableService` for a whole file (top-level await): the reason is printed once when the service is not there. */
export async function fileServiceUrl(name: ServiceName): Promise<string | undefined> {
  const found = await availableService(name);
  if ('url' in found) return found.url;
  console.log(`# ${found.skipped}`);
  return undefined;
}

/**
 * The environment a test's child process (a service, a worker, the admin
 * command) starts from: this one's, without REDIS_CLUSTER_NODES. CI sets it
 * beside REDIS_URL for the tests that ask for the cluster, and a process
 * given both refuses to start; a test that wants its children on the
 * cluster passes it (and an empty REDIS_URL) itself.
 */
export function childEnv(): NodeJS.ProcessEnv {
  const { REDIS_CLUSTER_NODES: _cluster, ...env } = process.env;
  return env;
}
