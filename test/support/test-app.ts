import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { recordAnswer } from './answer-recorder.ts';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config.ts';
import { createHttpServer, type HttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/log.ts';
import { discardRunData } from './discard-data.ts';

export type Backend = 'embedded' | 'redis+mongo';
/** A backend, or a Redis Cluster + MongoDB wire: the suites that ask for it (the send → deliver flow). */
export type AnyBackend = Backend | 'redis-cluster+mongo';

/**
 * The backends a suite runs on: always the embedded default; Redis + MongoDB
 * wire when their URLs are set (required in CI); with `cluster`, also a Redis
 * Cluster + MongoDB wire when REDIS_CLUSTER_NODES is set (required in CI).
 */
export function backends(): Backend[];
export function backends(opts: { cluster: true }): AnyBackend[];
export function backends(opts: { cluster?: boolean } = {}): AnyBackend[] {
  const ci = process.env.CI === 'true';
  const found: AnyBackend[] = ['embedded'];
  if (process.env.REDIS_URL && process.env.MONGODB_URL) found.push('redis+mongo');
  else if (ci)
    throw new Error('REDIS_URL and MONGODB_URL must be set in CI: the suites run on Redis + MongoDB wire too');
  else console.log('# REDIS_URL/MONGODB_URL not set: suites run on the embedded default only');
  if (!opts.cluster) return found;
  if (process.env.REDIS_CLUSTER_NODES && process.env.MONGODB_URL) found.push('redis-cluster+mongo');
  else if (ci)
    throw new Error('REDIS_CLUSTER_NODES and MONGODB_URL must be set in CI: this suite runs on a Redis Cluster too');
  else
    console.log(
      '# REDIS_CLUSTER_NODES not set: start a cluster with scripts/redis-cluster.sh to run this suite on one',
    );
  return found;
}

export interface TestApp {
  app: App;
  http: HttpServer;
  base: string;
  config: Config;
  /** fetch against the app; `body` objects are sent as JSON. */
  request(
    method: string,
    path: string,
    opts?: { token?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<TestResponse>;
  stop(): Promise<void>;
  /** Stops the service and starts it again on the same data (data directory, key prefix, database), as after a crash-free restart. */
  restart(): Promise<TestApp>;
}

export interface TestResponse {
  status: number;
  body: any;
  headers: Headers;
  text: string;
}

/**
 * Rate limits and sender pacing out of the way unless a test asks for them:
 * each limit runs but never refuses, a line's first messages to new
 * recipients are not spaced (by default up to 2 s each), and no quiet hours
 * hold a send in its recipient's night. The benches that start the service
 * start it with these too.
 */
export const limitsOutOfTheWay = {
  RATE_LIMIT_PER_MINUTE: '6000000',
  RATE_LIMIT_BURST: '1000000',
  AUTH_RATE_LIMIT_PER_MINUTE: '6000000',
  AUTH_RATE_LIMIT_BURST: '1000000',
  PACING_PER_SECOND: '1000000',
  PACING_BURST: '1000000',
  PACING_NEW_CONTACTS_PER_DAY: '1000000',
  PACING_UNANSWERED_CAP: '1000000',
  PACING_FOLLOW_UPS_PER_DAY: '1000000',
  PACING_JITTER_MS: '0',
  PACING_QUIET_HOURS: 'off',
};

/** What a test asks of the service it starts beyond its environment. */
export interface TestAppOptions {
  /** Its log lines, at debug level, collected here. */
  logLines?: string[];
  /** On MongoDB, the store counts every command its driver sends (`MongoStore.observedCommands`). */
  observeStoreCommands?: boolean;
}

/** Starts the whole service in this process (all roles) on a fresh data dir, key prefix and database. */
export async function startTestApp(
  backend: AnyBackend,
  env: Record<string, string> = {},
  opts: TestAppOptions = {},
): Promise<TestApp> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-test-'));
  const suffix = randomUUID().slice(0, 8);
  const base: Record<string, string> = {
    ...limitsOutOfTheWay,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'silent',
    RUNTIME_KEY_PREFIX: `t${suffix}`,
    ...env,
  };
  if (backend !== 'embedded') base.MONGODB_URL = withDatabase(process.env.MONGODB_URL!, `relaybox_t${suffix}`);
  if (backend === 'redis+mongo') base.REDIS_URL = process.env.REDIS_URL!;
  if (backend === 'redis-cluster+mongo') base.REDIS_CLUSTER_NODES = process.env.REDIS_CLUSTER_NODES!;
  return launch(backend, { ...base, ...env }, dataDir, opts);
}

/**
 * The service on `env` as it is (its data kept until `stop`). `ownDir` is the
 * data dir made for it, discarded at `stop`: a DATA_DIR the caller gave is the
 * caller's, and stays.
 */
async function launch(
  backend: AnyBackend,
  env: Record<string, string>,
  ownDir: string,
  opts: TestAppOptions,
): Promise<TestApp> {
  const config = loadConfig(env);
  const lines = opts.logLines;
  const log = lines
    ? createLogger('debug', 'relaybox', { write: (line: string) => void lines.push(line) })
    : createLogger(config.logLevel);
  const app = await createApp(config, log, { consume: true, observeStoreCommands: opts.observeStoreCommands ?? false });
  const http = createHttpServer({ config, log, routes: app.routes, ...app.hooks });
  const gateway = app.attachGateway(http);
  const port = await http.listen('127.0.0.1', 0);
  const url = `http://127.0.0.1:${port}`;
  const close = async () => {
    await http.close();
    await gateway.close();
    await app.close();
  };
  return {
    app,
    http,
    base: url,
    config,
    request: (method, path, opts = {}) => request(url, method, path, opts),
    async stop() {
      await close();
      await discardRunData(config, ownDir);
    },
    async restart() {
      await close();
      return launch(backend, env, ownDir, opts);
    },
  };
}

export function withDatabase(url: string, db: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${db}`;
  return parsed.toString();
}

export async function request(
  base: string,
  method: string,
  path: string,
  opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<TestResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON
  }
  recordAnswer({ method, path, status: res.status, contentType: res.headers.get('content-type'), body: parsed, text });
  return { status: res.status, body: parsed, headers: res.headers, text };
}

export interface Org {
  orgId: string;
  teamId: string;
  ownerToken: string;
  refreshToken: string;
  email: string;
  password: string;
}

/** Signs up a fresh organization; its owner's access token comes back. */
export async function signup(t: TestApp, name = 'Acme'): Promise<Org> {
  const email = `owner-${randomUUID().slice(0, 8)}@example.com`;
  const password = 'correct horse battery';
  const res = await t.request('POST', '/api/v1/auth/signup', { body: { organizationName: name, email, password } });
  if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${res.text}`);
  return {
    orgId: res.body.organization.id,
    teamId: res.body.team.id,
    ownerToken: res.body.accessToken,
    refreshToken: res.body.refreshToken,
    email,
    password,
  };
}

/** An API key of the given role in an organization. */
export async function apiKey(t: TestApp, org: Org, role: 'owner' | 'admin' | 'member' | 'viewer'): Promise<string> {
  const res = await t.request('POST', '/api/v1/api-keys', {
    token: org.ownerToken,
    body: { name: `${role} key`, role },
  });
  if (res.status !== 201) throw new Error(`api key failed: ${res.status} ${res.text}`);
  return res.body.key;
}

/** Runs `fn` once per backend with a fresh app, stopped afterwards. */
export function eachBackend(fn: (backend: Backend) => void): void;
export function eachBackend(fn: (backend: AnyBackend) => void, opts: { cluster: true }): void;
export function eachBackend(
  fn: ((backend: Backend) => void) | ((backend: AnyBackend) => void),
  opts?: { cluster: true },
): void {
  for (const backend of opts ? backends(opts) : backends()) (fn as (backend: AnyBackend) => void)(backend);
}

export type { TestContext };

/** A fresh team of `org`, as the X-Team-Id header that picks it: lists in it hold only what the test made. */
export async function teamHeader(t: TestApp, org: Org): Promise<Record<string, string>> {
  const res = await t.request('POST', '/api/v1/teams', {
    token: org.ownerToken,
    body: { name: `team ${randomUUID()}` },
  });
  if (res.status !== 201) throw new Error(`team: ${res.status} ${res.text}`);
  return { 'x-team-id': res.body.id };
}
