import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { parseClusterNodes, type ClusterSeed } from './runtime/index.ts';
import type { RuntimeConfig } from './runtime/types.ts';
import { flag, int, positive, quietHours, timeZone, timerMs, type Env } from './config-values.ts';

/** Every default of the service, read once from the environment. */
export interface Config {
  port: number;
  host: string;
  /** A worker's port for GET /metrics, /healthz and /readyz (unset: it serves none; Prometheus needs it to see a worker's shards and queues). */
  metricsPort: number | undefined;
  /** Answers at least this large are compressed when the client accepts gzip or br (streamed answers always are). */
  compressMinBytes: number;
  /** Where clients reach this API (signed download links); default: the request's Host. */
  publicBaseUrl: string | undefined;
  /** The commit `relaybox_build_info` reports (BUILD_COMMIT); else read from the checkout. */
  buildCommit: string | undefined;
  /** The web role serves the dashboard at / and the API reference at /docs (DASHBOARD=false turns both off). */
  dashboard: boolean;
  redisUrl: string | undefined;
  /** REDIS_CLUSTER_NODES: seed nodes of a Redis Cluster, used instead of REDIS_URL. */
  redisClusterNodes: ClusterSeed[] | undefined;
  mongoUrl: string | undefined;
  /**
   * How MongoDB writes are acknowledged and retried (MONGODB_WRITE_CONCERN,
   * MONGODB_RETRY_WRITES); reads always go to the primary, so a read sees the
   * write before it. These settings are the only place for them: MONGODB_URL
   * naming `w`, `retryWrites` or `readPreference` is refused at start.
   */
  mongoWrites: { writeConcern: 'majority' | number; retryWrites: boolean };
  /**
   * MONGODB_PATHS: `detected` (the default) takes FerretDB 1.x's workaround
   * paths when the server says it is FerretDB; `mongodb` takes MongoDB's
   * paths (bulk writes as one command, id lists by `$in`) on any server.
   */
  mongoPaths: 'detected' | 'mongodb';
  dataDir: string;
  /** How often the embedded store syncs its write-ahead log to disk (writes are in the OS before they resolve; 0 = sync every commit). */
  storeSyncIntervalMs: number;
  /** The embedded store's page cache: with a few MiB of working memory, what it holds in RAM whatever the data size. */
  storeCacheMb: number;
  /**
   * The embedded store's write-ahead log past this is checkpointed into the
   * database file at once after a commit; a checkpoint that cannot complete
   * is logged. Normal operation keeps it near 16 MiB.
   */
  storeWalMaxMb: number;
  logLevel: string;
  /** Identifies this process among the frontends and workers (logs, leases, addressed replies). */
  nodeId: string;
  maxBodyBytes: number;
  /** A bulk job's request body (decisions: 10 MiB). */
  bulkMaxBodyBytes: number;
  /** Largest received attachment a relay may upload (413 and the attachment `failed` above). */
  attachmentMaxBytes: number;
  /** How often a running bulk job's progress is looked at (counts in the job list, completion). */
  jobTrackMs: number;
  /** How long a process trusts its copy of an organization's suppression list without hearing of a change: the bound for a process that missed one. */
  suppressionCacheMs: number;
  /** What one send is assumed to take on a relay, for a job's estimated completion before it has a throughput of its own. */
  jobAssumedSendMs: number;
  /** Reverse proxies in front that append the client's address to X-Forwarded-For (0: the socket's peer is the client). */
  trustedProxyHops: number;
  /** Header fields larger than this together are answered 431 (uWS itself accepts far more). */
  maxHeaderBytes: number;
  rateLimitPerMinute: number;
  rateLimitBurst: number;
  /** Signup, login and refresh per client address (they are unauthenticated; signup and login each cost a password hash). */
  authRateLimitPerMinute: number;
  authRateLimitBurst: number;
  relayHeartbeatTimeoutMs: number;
  /** How often relays are told to send a heartbeat. */
  relayHeartbeatIntervalMs: number;
  /** A relay socket that has not said hello this long is closed. */
  relayHelloTimeoutMs: number;
  /** Bad frames a relay connection may send before it is closed. */
  relayMaxBadFrames: number;
  /** Bytes queued for a relay that is not reading before it is disconnected. */
  relayMaxBackpressureBytes: number;
  /** Status reports that come together pass from the gateway to the relay actor, and on to the tenant actor, as one message each. */
  relayReportBatches: boolean;
  /** How long /readyz waits for each dependency's answer. */
  readinessTimeoutMs: number;
  /** How long a store ping (readiness) may take. */
  storePingTimeoutMs: number;
  messageRetryBaseMs: number;
  /** Send attempts before a message fails for good (decisions: 3, backoff 2 s then 8 s). */
  messageMaxAttempts: number;
  /** A relay that has not reported on a send this long counts as a failed attempt. */
  messageSendTimeoutMs: number;
  /** How often a tenant's send queue is rebuilt from the store, healing anything a crash left behind. */
  tenantSweepMs: number;
  /**
   * A sent message not delivered within this long is marked undelivered (an
   * organization may set its own window): checked at the tenant's sweep, so
   * it is noticed up to `tenantSweepMs` later.
   */
  undeliveredAfterMs: number;
  /** How often a process reads the operator's share weights again (src/admin/share-weight-store.ts). */
  shareWeightRefreshMs: number;
  /**
   * The shortest `afterSeconds` of a send's `if_undelivered` SMS fallback. 30
   * s: a delivery receipt often takes a few seconds, and an SMS sent before it
   * reaches the recipient twice. Lowered only by tests (SMS_FALLBACK_MIN_SECONDS).
   */
  smsFallbackMinSeconds: number;
  /**
   * How many queued messages the tenant actor keeps in memory per sender
   * line, priority and source (its window); the rest stay in the store,
   * counted, and are read a page at a time as the window runs low.
   */
  tenantQueueWindow: number;
  /**
   * Each sender line's pace unless its organization or number says otherwise:
   * messaging networks flag accounts that send fast or to many strangers
   * (hosted services publish about 1 a second and a daily cap of new contacts).
   */
  pacing: {
    /** Messages a second, on average, and at once after a pause. */
    perSecond: number;
    burst: number;
    /** First messages to recipients the line never wrote to, per rolling 24 h. */
    newContactsPerDay: number;
    /** Line health (docs/pacing.md): messages to a recipient who has not replied before the line waits for a reply. */
    unansweredCap: number;
    /** Follow-ups (to recipients who did not answer the line's last message) per rolling 24 h. */
    followUpsPerDay: number;
    /** The most random spacing (ms) between a line's first messages to new recipients; 0 for none. */
    jitterMs: number;
    /** Local hours in the recipient's zone when nothing is sent to them, or false. */
    quietHours: { start: string; end: string } | false;
    /** The zone of a recipient whose number does not say (docs/pacing.md#quiet-hours). */
    timeZone: string;
  };
  /** How many messages one group commit writes at most. */
  sendBatchMax: number;
  /** How long the organization's events stay readable through GET /api/v1/events. */
  eventRetentionDays: number;
  /** An event stream entry a dead consumer read and never acknowledged is taken over after this long. */
  eventClaimIdleMs: number;
  /** On Redis a tick's events are one stream entry; false: an entry each, as versions before appended them. */
  eventEntryBatches: boolean;
  /**
   * The most entries an organization's request log keeps (its oldest go
   * first); each is about 200 bytes, so 100,000 are about 20 MB.
   */
  requestLogMaxEntries: number;
  /** `GET /api/v1/handles/{handle}/availability`: how long an answer is kept, each relay's lookup budget, the wait for its agent. */
  handleLookup: { cacheMs: number; perHour: number; perDay: number; timeoutMs: number };
  identity: IdentityConfig;
  /**
   * The SHA-256 digests (hex) of the platform-admin keys (PLATFORM_ADMIN_KEY_HASHES,
   * comma-separated; `npm run admin -- platform-key` makes a key and its digest).
   * Such a key reaches the platform operators' routes (/api/v1/admin/...) and
   * nothing else; no key of an organization reaches them. Empty: nobody does.
   */
  platformAdminKeyHashes: string[];
  runtime: RuntimeConfig;
  webhook: WebhookConfig;
  /** Automated replies (send_reply) one conversation receives per rolling hour; beyond it the action is logged as skipped. */
  automationRepliesPerConversationPerHour: number;
  /**
   * Spans are recorded and exported over OTLP/HTTP only when an OTLP
   * endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
   * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), unless OTEL_SDK_DISABLED=true or
   * OTEL_TRACES_EXPORTER=none. The exporter reads the other OTEL_* settings
   * itself. Trace context is passed on either way.
   */
  traceExport: boolean;
}

/**
 * The deepest nesting of arrays and objects any JSON body or imported JSON
 * file may have; deeper is a 400 before it is parsed. No schema of the API
 * nests past 8 levels, and code that walks a parsed value (the text rule,
 * JSON.stringify in logs and answers) recurses: 100,000 levels overflow the
 * stack. Not a setting: no client needs more.
 */
export const maxJsonDepth = 64;

export interface WebhookConfig {
  /** Lifts the address check (loopback, private, ...) for local development and tests; never in production. */
  allowPrivate: boolean;
  /** First retry delay; each further one is 4 times longer (decisions: 5 s, factor 4, 6 h cap, 8 attempts). */
  retryBaseMs: number;
  retryCapMs: number;
  maxAttempts: number;
  /** An endpoint that has not answered this long fails the attempt. */
  timeoutMs: number;
  /** Attempts in flight to one webhook at once. */
  concurrency: number;
  /** 32 bytes (base64 or hex) encrypting webhook secrets at rest; when absent one is generated into dataDir. */
  secretKey: string | undefined;
  /** How often a webhook with pending deliveries looks for ones whose attempt was lost (a worker died). */
  sweepMs: number;
  /** After a secret rotation, deliveries carry the previous secret's signature too this long, so receivers can switch keys without a gap. */
  secretGraceMs: number;
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

function logLevel(env: Env): string {
  const level = env.LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(level))
    throw new Error(`LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent; got "${level}"`);
  return level;
}

function mongoPaths(env: Env): 'detected' | 'mongodb' {
  const paths = env.MONGODB_PATHS || 'detected';
  if (paths !== 'detected' && paths !== 'mongodb')
    throw new Error(`MONGODB_PATHS must be detected or mongodb; got "${paths}"`);
  return paths;
}

/**
 * `majority` (the default: a write is acknowledged once most of the replica
 * set holds it, so a failover does not roll it back) or a number of members
 * of at least 1 (0, unacknowledged, would hide a duplicate key).
 */
function writeConcern(env: Env): 'majority' | number {
  const raw = env.MONGODB_WRITE_CONCERN;
  if (raw === undefined || raw === '' || raw === 'majority') return 'majority';
  return int(env, 'MONGODB_WRITE_CONCERN', 1, 1);
}

/** Connection string options that MONGODB_WRITE_CONCERN, MONGODB_RETRY_WRITES and the primary-only reads decide. */
const decidedMongoOptions = ['w', 'retrywrites', 'readpreference'];

/** A MONGODB_URL that says how to write or where to read would contradict the settings: refused, naming the option. */
function checkMongoUrl(url: string | undefined): void {
  const query = url?.split('?')[1];
  if (!query) return;
  for (const name of new URLSearchParams(query).keys()) {
    if (decidedMongoOptions.includes(name.toLowerCase())) {
      throw new Error(
        `MONGODB_URL must not set "${name}": use MONGODB_WRITE_CONCERN and MONGODB_RETRY_WRITES (reads always go to the primary)`,
      );
    }
  }
}

/** SHA-256 digests in hex, comma-separated; anything else stops the process at start. */
function keyHashes(env: Env, name: string): string[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return [];
  const hashes = raw.split(',').map((part) => part.trim().toLowerCase());
  for (const hash of hashes)
    if (!/^[0-9a-f]{64}$/.test(hash))
      throw new Error(`${name} must be SHA-256 digests in hex (64 characters each), comma-separated; got "${hash}"`);
  return hashes;
}

/** Settings that are each valid alone but not together. */
function checkTogether(config: Config): Config {
  checkMongoUrl(config.mongoUrl);
  if (config.redisUrl && config.redisClusterNodes)
    throw new Error('set REDIS_URL (one Redis server) or REDIS_CLUSTER_NODES (a Redis Cluster), not both');
  const rt = config.runtime;
  if (rt.leaseRenewMs >= rt.leaseTtlMs)
    throw new Error(
      `RUNTIME_LEASE_RENEW_MS (${rt.leaseRenewMs}) must be shorter than RUNTIME_LEASE_TTL_MS (${rt.leaseTtlMs}), or leases lapse between renewals`,
    );
  if (config.relayHeartbeatIntervalMs >= config.relayHeartbeatTimeoutMs) {
    throw new Error(
      `RELAY_HEARTBEAT_INTERVAL_MS (${config.relayHeartbeatIntervalMs}) must be shorter than RELAY_HEARTBEAT_TIMEOUT_MS (${config.relayHeartbeatTimeoutMs})`,
    );
  }
  return config;
}

export function loadConfig(env: Env = process.env): Config {
  return checkTogether({
    port: int(env, 'PORT', 3000),
    metricsPort: env.METRICS_PORT ? int(env, 'METRICS_PORT', 0) : undefined,
    host: env.HOST || '0.0.0.0',
    compressMinBytes: int(env, 'COMPRESS_MIN_BYTES', 1024),
    publicBaseUrl: env.PUBLIC_BASE_URL?.replace(/\/+$/, '') || undefined,
    buildCommit: env.BUILD_COMMIT?.trim().slice(0, 40) || undefined,
    dashboard: env.DASHBOARD !== 'false',
    redisUrl: env.REDIS_URL || undefined,
    redisClusterNodes: env.REDIS_CLUSTER_NODES ? parseClusterNodes(env.REDIS_CLUSTER_NODES) : undefined,
    mongoUrl: env.MONGODB_URL || undefined,
    mongoWrites: { writeConcern: writeConcern(env), retryWrites: flag(env, 'MONGODB_RETRY_WRITES', true) },
    mongoPaths: mongoPaths(env),
    dataDir: env.DATA_DIR || './data',
    storeSyncIntervalMs: timerMs(env, 'STORE_SYNC_INTERVAL_MS', 1_000, 0),
    storeCacheMb: positive(env, 'STORE_CACHE_MB', 32),
    storeWalMaxMb: positive(env, 'STORE_WAL_MAX_MB', 64),
    logLevel: logLevel(env),
    nodeId: env.NODE_ID || `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`,
    maxBodyBytes: positive(env, 'MAX_BODY_BYTES', 1024 * 1024),
    maxHeaderBytes: positive(env, 'MAX_HEADER_BYTES', 16 * 1024),
    trustedProxyHops: int(env, 'TRUSTED_PROXY_HOPS', 0),
    bulkMaxBodyBytes: positive(env, 'BULK_MAX_BODY_BYTES', 10 * 1024 * 1024),
    attachmentMaxBytes: positive(env, 'ATTACHMENT_MAX_BYTES', 100 * 1024 * 1024),
    jobTrackMs: positive(env, 'JOB_TRACK_MS', 1_000),
    jobAssumedSendMs: positive(env, 'JOB_ASSUMED_SEND_MS', 2_000),
    // Every change is broadcast to every process at once; the expiry only repairs one a process missed (a lost connection).
    suppressionCacheMs: positive(env, 'SUPPRESSION_CACHE_MS', 60_000),
    rateLimitPerMinute: positive(env, 'RATE_LIMIT_PER_MINUTE', 100),
    rateLimitBurst: positive(env, 'RATE_LIMIT_BURST', 20),
    authRateLimitPerMinute: positive(env, 'AUTH_RATE_LIMIT_PER_MINUTE', 20),
    authRateLimitBurst: positive(env, 'AUTH_RATE_LIMIT_BURST', 10),
    relayHeartbeatTimeoutMs: timerMs(env, 'RELAY_HEARTBEAT_TIMEOUT_MS', 30_000),
    relayHeartbeatIntervalMs: timerMs(env, 'RELAY_HEARTBEAT_INTERVAL_MS', 10_000),
    relayHelloTimeoutMs: timerMs(env, 'RELAY_HELLO_TIMEOUT_MS', 10_000),
    relayMaxBadFrames: positive(env, 'RELAY_MAX_BAD_FRAMES', 5),
    relayMaxBackpressureBytes: positive(env, 'RELAY_MAX_BACKPRESSURE_BYTES', 1024 * 1024),
    relayReportBatches: flag(env, 'RELAY_REPORT_BATCHES', true),
    readinessTimeoutMs: timerMs(env, 'READINESS_TIMEOUT_MS', 2_000),
    storePingTimeoutMs: timerMs(env, 'STORE_PING_TIMEOUT_MS', 2_000),
    messageRetryBaseMs: positive(env, 'MESSAGE_RETRY_BASE_MS', 2_000),
    messageMaxAttempts: positive(env, 'MESSAGE_MAX_ATTEMPTS', 3),
    messageSendTimeoutMs: positive(env, 'MESSAGE_SEND_TIMEOUT_MS', 120_000),
    tenantSweepMs: positive(env, 'TENANT_SWEEP_MS', 10_000),
    undeliveredAfterMs: positive(env, 'UNDELIVERED_AFTER_MS', 600_000),
    shareWeightRefreshMs: positive(env, 'SHARE_WEIGHT_REFRESH_MS', 30_000),
    smsFallbackMinSeconds: positive(env, 'SMS_FALLBACK_MIN_SECONDS', 30),
    tenantQueueWindow: positive(env, 'TENANT_QUEUE_WINDOW', 500),
    pacing: {
      perSecond: positive(env, 'PACING_PER_SECOND', 1),
      burst: positive(env, 'PACING_BURST', 3),
      newContactsPerDay: int(env, 'PACING_NEW_CONTACTS_PER_DAY', 50),
      unansweredCap: positive(env, 'PACING_UNANSWERED_CAP', 5),
      followUpsPerDay: int(env, 'PACING_FOLLOW_UPS_PER_DAY', 200),
      jitterMs: int(env, 'PACING_JITTER_MS', 2_000),
      quietHours: quietHours(env, 'PACING_QUIET_HOURS', '21:00-08:00'),
      timeZone: timeZone(env, 'PACING_TIME_ZONE', 'UTC'),
    },
    sendBatchMax: positive(env, 'SEND_BATCH_MAX', 512),
    eventRetentionDays: positive(env, 'EVENT_RETENTION_DAYS', 30),
    eventClaimIdleMs: positive(env, 'EVENT_CLAIM_IDLE_MS', 30_000),
    eventEntryBatches: flag(env, 'EVENT_ENTRY_BATCHES', true),
    requestLogMaxEntries: positive(env, 'REQUEST_LOG_MAX_ENTRIES', 100_000),
    handleLookup: {
      cacheMs: timerMs(env, 'HANDLE_LOOKUP_CACHE_MS', 7 * 24 * 3600 * 1000),
      perHour: positive(env, 'HANDLE_LOOKUPS_PER_HOUR', 30),
      perDay: positive(env, 'HANDLE_LOOKUPS_PER_DAY', 100),
      timeoutMs: timerMs(env, 'HANDLE_LOOKUP_TIMEOUT_MS', 5_000),
    },
    webhook: {
      allowPrivate: env.WEBHOOK_ALLOW_PRIVATE === 'true',
      retryBaseMs: positive(env, 'WEBHOOK_RETRY_BASE_MS', 5_000),
      retryCapMs: positive(env, 'WEBHOOK_RETRY_CAP_MS', 6 * 3600 * 1000),
      maxAttempts: positive(env, 'WEBHOOK_MAX_ATTEMPTS', 8),
      timeoutMs: timerMs(env, 'WEBHOOK_TIMEOUT_MS', 10_000),
      concurrency: positive(env, 'WEBHOOK_CONCURRENCY', 8),
      secretKey: env.WEBHOOK_SECRET_KEY || undefined,
      sweepMs: positive(env, 'WEBHOOK_SWEEP_MS', 30_000),
      secretGraceMs: positive(env, 'WEBHOOK_SECRET_GRACE_MS', 24 * 3600 * 1000),
    },
    automationRepliesPerConversationPerHour: int(env, 'AUTOMATION_REPLIES_PER_CONVERSATION_PER_HOUR', 5),
    traceExport:
      Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT) &&
      env.OTEL_SDK_DISABLED !== 'true' &&
      env.OTEL_TRACES_EXPORTER !== 'none',
    identity: {
      jwtPrivateKeyPem: env.JWT_PRIVATE_KEY || undefined,
      jwtPublicKeyPem: env.JWT_PUBLIC_KEY || undefined,
      jwtIssuer: env.JWT_ISSUER || 'relaybox',
      jwtAudience: env.JWT_AUDIENCE || 'relaybox-api',
      accessTokenTtlSeconds: positive(env, 'ACCESS_TOKEN_TTL_SECONDS', 15 * 60),
      refreshTokenTtlMs: positive(env, 'REFRESH_TOKEN_TTL_MS', 30 * 24 * 3600 * 1000),
      credentialCacheMs: int(env, 'CREDENTIAL_CACHE_MS', 1_000),
      loginFailuresPerMinute: positive(env, 'LOGIN_FAILURES_PER_MINUTE', 5),
    },
    platformAdminKeyHashes: keyHashes(env, 'PLATFORM_ADMIN_KEY_HASHES'),
    runtime: {
      keyPrefix: env.RUNTIME_KEY_PREFIX || 'rt',
      defaultShards: positive(env, 'RUNTIME_SHARDS', 16),
      maxDeliveries: positive(env, 'RUNTIME_MAX_DELIVERIES', 5),
      redeliveryDelayMs: timerMs(env, 'RUNTIME_REDELIVERY_DELAY_MS', 200, 0),
      leaseTtlMs: timerMs(env, 'RUNTIME_LEASE_TTL_MS', 5_000),
      // A heartbeat a third of the way through the membership: two may be lost before it lapses.
      leaseRenewMs: timerMs(
        env,
        'RUNTIME_LEASE_RENEW_MS',
        Math.max(1, Math.floor(timerMs(env, 'RUNTIME_LEASE_TTL_MS', 5_000) / 3)),
      ),
      leaseCheckMs: timerMs(env, 'RUNTIME_LEASE_CHECK_MS', 60_000),
      rebalanceMs: timerMs(env, 'RUNTIME_REBALANCE_MS', 1_000),
      readBlockMs: timerMs(env, 'RUNTIME_READ_BLOCK_MS', 500),
      readBatch: positive(env, 'RUNTIME_READ_BATCH', 256),
      timerPollMs: timerMs(env, 'RUNTIME_TIMER_POLL_MS', 120_000),
      // SHUTDOWN_GRACE_MS is the name this setting had before; it is still read when the new one is not set.
      shutdownGraceMs: timerMs(
        env,
        env.SHUTDOWN_TIMEOUT_MS === undefined && env.SHUTDOWN_GRACE_MS !== undefined
          ? 'SHUTDOWN_GRACE_MS'
          : 'SHUTDOWN_TIMEOUT_MS',
        10_000,
      ),
      askTimeoutMs: timerMs(env, 'RUNTIME_ASK_TIMEOUT_MS', 5_000),
      broadcastConfirmMs: timerMs(env, 'RUNTIME_BROADCAST_CONFIRM_MS', 1_000),
      pingTimeoutMs: timerMs(env, 'RUNTIME_PING_TIMEOUT_MS', 1_000),
      actorIdleMs: timerMs(env, 'ACTOR_IDLE_MS', 60_000),
      // Far beyond a redelivery (lease TTL plus retries), small enough to keep the ids in memory.
      dedupeTtlMs: positive(env, 'RUNTIME_DEDUPE_TTL_MS', 10 * 60_000),
      replicaWaitMs: timerMs(env, 'RUNTIME_REPLICA_WAIT_MS', 1_000),
    },
  });
}
