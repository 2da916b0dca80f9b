import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';

/** Every default of the service, read once from the environment. */
export interface Config {
  port: number;
  host: string;
  /** Where clients reach this API (signed download links); default: the request's Host. */
  publicBaseUrl: string | undefined;
  redisUrl: string | undefined;
  mongoUrl: string | undefined;
  dataDir: string;
  /** How often the embedded store syncs its logs to disk (writes are in the OS before they resolve; 0 = sync every write). */
  storeSyncIntervalMs: number;
  logLevel: string;
  /** Identifies this process among the frontends and workers (logs, leases, addressed replies). */
  nodeId: string;
  maxBodyBytes: number;
  rateLimitPerMinute: number;
  rateLimitBurst: number;
  relayHeartbeatTimeoutMs: number;
  /** How often relays are told to send a heartbeat. */
  relayHeartbeatIntervalMs: number;
  messageRetryBaseMs: number;
  /** Send attempts before a message fails for good (decisions: 3, backoff 2 s then 8 s). */
  messageMaxAttempts: number;
  /** A relay that has not reported on a send this long counts as a failed attempt. */
  messageSendTimeoutMs: number;
  /** How often a tenant's send queue is rebuilt from the store, healing anything a crash left behind. */
  tenantSweepMs: number;
  /** How many messages one group commit writes at most. */
  sendBatchMax: number;
  identity: IdentityConfig;
  runtime: RuntimeConfig;
}

export interface IdentityConfig {
  /** PEM keys (Ed25519) for signing access tokens; when absent a key pair is generated into dataDir. */
  jwtPrivateKeyPem: string | undefined;
  jwtPublicKeyPem: string | undefined;
  jwtIssuer: string;
  jwtAudience: string;
  accessTokenTtlSeconds: number;
  refreshTokenTtlMs: number;
  /** How long a frontend trusts a cached API key or organization lookup: a revoke elsewhere takes effect within it. */
  credentialCacheMs: number;
  loginFailuresPerMinute: number;
}

export interface RuntimeConfig {
  /** Prefix of every Redis key the runtime owns; tests use a random one. */
  keyPrefix: string;
  /** Streams per actor type unless the actor type says otherwise. */
  defaultShards: number;
  /** A handler that throws this many times sends the message to the dead-letter stream. */
  maxDeliveries: number;
  /** Pause between two deliveries of a message whose handler threw. */
  redeliveryDelayMs: number;
  /** A worker that stops renewing loses its shards after this long. */
  leaseTtlMs: number;
  leaseRenewMs: number;
  /** How often a worker looks for free shards and its fair share of them. */
  rebalanceMs: number;
  /** How long a read on a shard stream blocks waiting for entries. */
  readBlockMs: number;
  readBatch: number;
  /** How often the shard owner moves due timers into its stream. */
  timerPollMs: number;
  /** How long SIGTERM waits for in-flight handlers before leaving anyway. */
  shutdownGraceMs: number;
  askTimeoutMs: number;
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got "${raw}"`);
  return n;
}

export function loadConfig(env: Env = process.env): Config {
  return {
    port: int(env, 'PORT', 3000),
    host: env.HOST || '0.0.0.0',
    publicBaseUrl: env.PUBLIC_BASE_URL?.replace(/\/+$/, '') || undefined,
    redisUrl: env.REDIS_URL || undefined,
    mongoUrl: env.MONGODB_URL || undefined,
    dataDir: env.DATA_DIR || './data',
    storeSyncIntervalMs: int(env, 'STORE_SYNC_INTERVAL_MS', 1_000),
    logLevel: env.LOG_LEVEL || 'info',
    nodeId: env.NODE_ID || `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
    maxBodyBytes: int(env, 'MAX_BODY_BYTES', 1024 * 1024),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 100),
    rateLimitBurst: int(env, 'RATE_LIMIT_BURST', 20),
    relayHeartbeatTimeoutMs: int(env, 'RELAY_HEARTBEAT_TIMEOUT_MS', 30_000),
    relayHeartbeatIntervalMs: int(env, 'RELAY_HEARTBEAT_INTERVAL_MS', 10_000),
    messageRetryBaseMs: int(env, 'MESSAGE_RETRY_BASE_MS', 2_000),
    messageMaxAttempts: int(env, 'MESSAGE_MAX_ATTEMPTS', 3),
    messageSendTimeoutMs: int(env, 'MESSAGE_SEND_TIMEOUT_MS', 120_000),
    tenantSweepMs: int(env, 'TENANT_SWEEP_MS', 10_000),
    sendBatchMax: int(env, 'SEND_BATCH_MAX', 512),
    identity: {
      jwtPrivateKeyPem: env.JWT_PRIVATE_KEY || undefined,
      jwtPublicKeyPem: env.JWT_PUBLIC_KEY || undefined,
      jwtIssuer: env.JWT_ISSUER || 'relaybox',
      jwtAudience: env.JWT_AUDIENCE || 'relaybox-api',
      accessTokenTtlSeconds: int(env, 'ACCESS_TOKEN_TTL_SECONDS', 15 * 60),
      refreshTokenTtlMs: int(env, 'REFRESH_TOKEN_TTL_MS', 30 * 24 * 3600 * 1000),
      credentialCacheMs: int(env, 'CREDENTIAL_CACHE_MS', 1_000),
      loginFailuresPerMinute: int(env, 'LOGIN_FAILURES_PER_MINUTE', 5),
    },
    runtime: {
      keyPrefix: env.RUNTIME_KEY_PREFIX || 'rt',
      defaultShards: int(env, 'RUNTIME_SHARDS', 16),
      maxDeliveries: int(env, 'RUNTIME_MAX_DELIVERIES', 5),
      redeliveryDelayMs: int(env, 'RUNTIME_REDELIVERY_DELAY_MS', 200),
      leaseTtlMs: int(env, 'RUNTIME_LEASE_TTL_MS', 5_000),
      leaseRenewMs: int(env, 'RUNTIME_LEASE_RENEW_MS', 1_000),
      rebalanceMs: int(env, 'RUNTIME_REBALANCE_MS', 1_000),
      readBlockMs: int(env, 'RUNTIME_READ_BLOCK_MS', 500),
      readBatch: int(env, 'RUNTIME_READ_BATCH', 256),
      timerPollMs: int(env, 'RUNTIME_TIMER_POLL_MS', 100),
      shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000),
      askTimeoutMs: int(env, 'RUNTIME_ASK_TIMEOUT_MS', 5_000),
    },
  };
}
