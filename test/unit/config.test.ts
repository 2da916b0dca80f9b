import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildAgentConfig } from '../../packages/relay-agent/src/agent-config.ts';
import { loadConfig } from '../../src/config.ts';

test('the defaults of the gateway, readiness, pings and actor lifecycle', () => {
  const c = loadConfig({});
  assert.equal(c.relayHelloTimeoutMs, 10_000);
  assert.equal(c.relayMaxBadFrames, 5);
  assert.equal(c.relayMaxBackpressureBytes, 1024 * 1024);
  assert.equal(c.readinessTimeoutMs, 2_000);
  assert.equal(c.storePingTimeoutMs, 2_000);
  assert.equal(c.storeWalMaxMb, 64);
  assert.equal(c.runtime.pingTimeoutMs, 1_000);
  assert.equal(c.runtime.actorIdleMs, 60_000);
  assert.equal(c.runtime.dedupeTtlMs, 600_000);
  assert.equal(c.runtime.defaultShards, 16);
});

test('a nonsensical setting stops the start with a message naming the variable', () => {
  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ RUNTIME_SHARDS: '0' }, /RUNTIME_SHARDS must be an integer of at least 1, got "0"/],
    [{ RUNTIME_ASK_TIMEOUT_MS: '-5' }, /RUNTIME_ASK_TIMEOUT_MS/],
    [{ ACTOR_IDLE_MS: 'soon' }, /ACTOR_IDLE_MS/],
    [{ RELAY_HELLO_TIMEOUT_MS: '1.5' }, /RELAY_HELLO_TIMEOUT_MS/],
    [{ PORT: '-1' }, /PORT/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ STORE_WAL_MAX_MB: '0' }, /STORE_WAL_MAX_MB/],
    [
      { RUNTIME_LEASE_TTL_MS: '1000', RUNTIME_LEASE_RENEW_MS: '1000' },
      /RUNTIME_LEASE_RENEW_MS \(1000\) must be shorter than RUNTIME_LEASE_TTL_MS/,
    ],
    [{ RELAY_HEARTBEAT_INTERVAL_MS: '30000' }, /RELAY_HEARTBEAT_INTERVAL_MS/],
  ];
  for (const [env, message] of refused) assert.throws(() => loadConfig(env), message, JSON.stringify(env));
  assert.equal(
    loadConfig({ STORE_SYNC_INTERVAL_MS: '0', PORT: '0' }).storeSyncIntervalMs,
    0,
    'where 0 means something, it is allowed',
  );
});

test('automations: at most 5 automated replies per conversation and hour by default; 0 turns automated replies off; negative is refused', () => {
  assert.equal(loadConfig({}).automationRepliesPerConversationPerHour, 5);
  assert.equal(
    loadConfig({ AUTOMATION_REPLIES_PER_CONVERSATION_PER_HOUR: '0' }).automationRepliesPerConversationPerHour,
    0,
  );
  assert.throws(
    () => loadConfig({ AUTOMATION_REPLIES_PER_CONVERSATION_PER_HOUR: '-1' }),
    /AUTOMATION_REPLIES_PER_CONVERSATION_PER_HOUR/,
  );
});

test('the shutdown budget: 10 s by default, SHUTDOWN_TIMEOUT_MS, and its former name SHUTDOWN_GRACE_MS when the new one is not set', () => {
  assert.equal(loadConfig({}).runtime.shutdownGraceMs, 10_000);
  assert.equal(loadConfig({ SHUTDOWN_TIMEOUT_MS: '4000' }).runtime.shutdownGraceMs, 4_000);
  assert.equal(loadConfig({ SHUTDOWN_GRACE_MS: '3000' }).runtime.shutdownGraceMs, 3_000);
  assert.equal(loadConfig({ SHUTDOWN_TIMEOUT_MS: '4000', SHUTDOWN_GRACE_MS: '3000' }).runtime.shutdownGraceMs, 4_000);
  assert.throws(() => loadConfig({ SHUTDOWN_TIMEOUT_MS: '0' }), /SHUTDOWN_TIMEOUT_MS/);
});

test('webhooks: a rotated secret keeps signing 24 h by default; WEBHOOK_SECRET_GRACE_MS changes it; 0 is refused', () => {
  assert.equal(loadConfig({}).webhook.secretGraceMs, 24 * 3600 * 1000);
  assert.equal(loadConfig({ WEBHOOK_SECRET_GRACE_MS: '60000' }).webhook.secretGraceMs, 60_000);
  assert.throws(() => loadConfig({ WEBHOOK_SECRET_GRACE_MS: '0' }), /WEBHOOK_SECRET_GRACE_MS/);
});

test('trace export is on only with an OTLP endpoint, and not when the SDK or the trace exporter is turned off', () => {
  assert.equal(loadConfig({}).traceExport, false);
  assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).traceExport, true);
  assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }).traceExport, true);
  assert.equal(
    loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).traceExport,
    false,
  );
  assert.equal(
    loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }).traceExport,
    false,
  );
});

test('MongoDB writes: majority and retried by default; a number of members or no retries when set; the connection string may not say otherwise', () => {
  assert.deepEqual(loadConfig({}).mongoWrites, { writeConcern: 'majority', retryWrites: true });
  assert.deepEqual(loadConfig({ MONGODB_WRITE_CONCERN: '2', MONGODB_RETRY_WRITES: 'false' }).mongoWrites, {
    writeConcern: 2,
    retryWrites: false,
  });
  assert.equal(loadConfig({ MONGODB_WRITE_CONCERN: 'majority' }).mongoWrites.writeConcern, 'majority');
  for (const value of ['0', 'all', '-1', '1.5'])
    assert.throws(() => loadConfig({ MONGODB_WRITE_CONCERN: value }), /MONGODB_WRITE_CONCERN/, value);
  assert.throws(() => loadConfig({ MONGODB_RETRY_WRITES: 'yes' }), /MONGODB_RETRY_WRITES/);
  for (const query of ['w=1', 'retryWrites=false', 'readPreference=secondary', 'replicaSet=rs0&W=majority']) {
    assert.throws(
      () => loadConfig({ MONGODB_URL: `mongodb://a.example:27017,b.example:27017/relaybox?${query}` }),
      /MONGODB_URL must not set/,
      query,
    );
  }
  assert.equal(
    loadConfig({ MONGODB_URL: 'mongodb://a.example:27017,b.example:27017/relaybox?replicaSet=rs0' }).mongoUrl,
    'mongodb://a.example:27017,b.example:27017/relaybox?replicaSet=rs0',
  );
});

test("MongoDB's paths: detected from the server by default, MongoDB's on any server with MONGODB_PATHS=mongodb, anything else refused", () => {
  assert.equal(loadConfig({}).mongoPaths, 'detected');
  assert.equal(loadConfig({ MONGODB_PATHS: 'detected' }).mongoPaths, 'detected');
  assert.equal(loadConfig({ MONGODB_PATHS: 'mongodb' }).mongoPaths, 'mongodb');
  for (const value of ['ferretdb', 'MongoDB', 'true'])
    assert.throws(() => loadConfig({ MONGODB_PATHS: value }), /MONGODB_PATHS must be detected or mongodb/, value);
});

test('REDIS_CLUSTER_NODES: seed nodes as host:port, never together with REDIS_URL; the replica wait is 1 s by default', () => {
  assert.equal(loadConfig({}).redisClusterNodes, undefined);
  assert.equal(loadConfig({}).runtime.replicaWaitMs, 1_000);
  assert.deepEqual(
    loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b.internal:7001,[::1]:7002' }).redisClusterNodes,
    [
      { host: '10.0.0.1', port: 7000 },
      { host: 'redis-b.internal', port: 7001 },
      { host: '::1', port: 7002 },
    ],
  );
  assert.throws(
    () => loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1' }),
    /REDIS_CLUSTER_NODES: "10.0.0.1" is not host:port/,
  );
  assert.throws(() => loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:70000' }), /REDIS_CLUSTER_NODES/);
  assert.throws(() => loadConfig({ REDIS_CLUSTER_NODES: ' , ' }), /names no host:port/);
  assert.throws(
    () => loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000', REDIS_URL: 'redis://10.0.0.1:6379' }),
    /REDIS_URL .* or REDIS_CLUSTER_NODES .*not both/,
  );
  assert.throws(() => loadConfig({ RUNTIME_REPLICA_WAIT_MS: '0' }), /RUNTIME_REPLICA_WAIT_MS/);
});

test('a setting that becomes a timer is refused past 2^31-1 ms (a timer would fire at once), naming the variable and the limit', () => {
  const timers = [
    'RELAY_HELLO_TIMEOUT_MS',
    'RELAY_HEARTBEAT_TIMEOUT_MS',
    'READINESS_TIMEOUT_MS',
    'STORE_PING_TIMEOUT_MS',
    'STORE_SYNC_INTERVAL_MS',
    'SHUTDOWN_TIMEOUT_MS',
    'SHUTDOWN_GRACE_MS',
    'WEBHOOK_TIMEOUT_MS',
    'RUNTIME_LEASE_TTL_MS',
    'RUNTIME_ASK_TIMEOUT_MS',
    'RUNTIME_REDELIVERY_DELAY_MS',
    'ACTOR_IDLE_MS',
  ];
  for (const name of timers)
    assert.throws(
      () => loadConfig({ [name]: String(2 ** 31) }),
      new RegExp(`^Error: ${name} must be at most 2147483647 ms`),
      name,
    );
  const longest = loadConfig({ READINESS_TIMEOUT_MS: '2147483647', SHUTDOWN_TIMEOUT_MS: '2147483647' });
  assert.deepEqual([longest.readinessTimeoutMs, longest.runtime.shutdownGraceMs], [2 ** 31 - 1, 2 ** 31 - 1]);
  for (const name of ['RELAY_SIM_DELIVERY_MS', 'RELAY_SIM_READ_MS', 'RELAY_SUMMARY_MS', 'RELAY_RESTART_INTERVAL_MS'])
    assert.throws(
      () => buildAgentConfig({ serverUrl: 'ws://127.0.0.1:1' }, { [name]: String(2 ** 31) }),
      new RegExp(`^ConfigError: ${name} must be at most 2147483647 ms`),
      name,
    );
  assert.equal(
    buildAgentConfig({ serverUrl: 'ws://127.0.0.1:1' }, { RELAY_SIM_READ_MS: '2147483647' }).simulatorReadMs,
    2 ** 31 - 1,
  );
});

test('event stream entries: a tick one entry by default; EVENT_ENTRY_BATCHES=false an entry each, for a rolling upgrade', () => {
  assert.equal(loadConfig({}).eventEntryBatches, true);
  assert.equal(loadConfig({ EVENT_ENTRY_BATCHES: 'false' }).eventEntryBatches, false);
  assert.throws(() => loadConfig({ EVENT_ENTRY_BATCHES: 'sometimes' }), /EVENT_ENTRY_BATCHES/);
});
