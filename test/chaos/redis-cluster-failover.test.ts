/**
 * A Redis Cluster master failover under a steady send load, with real
 * processes: a worker, a frontend and a simulated relay on a cluster of the
 * test's own (3 masters, 3 replicas from REDIS_FAILOVER_PORT, default 7200,
 * started and stopped with scripts/redis-cluster.sh). Once a third of the
 * messages are accepted, the master that holds the organization's tenant
 * shard is killed with SIGKILL; its replica is promoted (cluster-node-timeout
 * 2 s) and the killed node is started again, rejoining as a replica. In a
 * second run the shard's slot is moved to another master a few keys at a
 * time (ASK and TRYAGAIN while it moves) instead. Every accepted message must
 * end delivered, and the simulated Messages app's own send log must hold each
 * accepted id exactly once. A third test checks the replica wait itself.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { register } from 'prom-client';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { RedisTransport } from '../../src/runtime/redis-transport.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import { RedisKeys } from '../../src/runtime/redis-keys.ts';
import { shardOf } from '../../src/runtime/shard.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { counterProtocol, testRuntimeConfig, waitFor } from '../integration/runtime-contract.ts';
import { defineActor } from '../../src/runtime/actor.ts';
import { OwnCluster } from '../support/redis-cluster.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { request, withDatabase } from '../support/test-app.ts';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';

const messages = Number(process.env.FAILOVER_MESSAGES ?? 300);
const firstPort = Number(process.env.REDIS_FAILOVER_PORT ?? 7200);
const inFlightRequests = 8;
const shards = 16;

function redisServerInstalled(): boolean {
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function sendLog(chatDb: string): Promise<string[]> {
  const text = await readFile(`${chatDb}.sent.log`, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { messageId: string }).messageId);
}

/** A connection to one node that may be down: a refused connect is the caller's answer, not something to print. */
function quiet(node: Redis): Redis {
  node.on('error', () => {});
  return node;
}

/** The master serving `slot`, as one node of the cluster sees it ("host:port"). */
async function masterOf(port: number, slot: number): Promise<string | undefined> {
  const node = quiet(new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, lazyConnect: true }));
  try {
    await node.connect();
    const ranges = (await node.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
    const range = ranges.find(([from, to]) => slot >= from && slot <= to);
    return range ? `${range[2][0]}:${range[2][1]}` : undefined;
  } catch {
    return undefined;
  } finally {
    node.disconnect();
  }
}

async function role(port: number): Promise<string | undefined> {
  const node = quiet(new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, lazyConnect: true }));
  try {
    await node.connect();
    return String(((await node.call('ROLE')) as unknown[])[0]);
  } catch {
    return undefined;
  } finally {
    node.disconnect();
  }
}

/** Skips (outside CI) or fails (in CI) when what a test of this file needs is missing; else the MongoDB URL. */
function requirements(t: TestContext, needsMongo: boolean): string | undefined | false {
  const mongoUrl = process.env.MONGODB_URL;
  if ((needsMongo && !mongoUrl) || !redisServerInstalled()) {
    if (process.env.CI === 'true')
      throw new Error('MONGODB_URL and redis-server are needed in CI: this test runs a Redis Cluster of its own');
    t.skip(
      needsMongo && !mongoUrl
        ? 'MONGODB_URL not set'
        : 'redis-server is not installed: this test starts a Redis Cluster of its own',
    );
    return false;
  }
  return mongoUrl;
}

/** What a disruption gets: the test's cluster and the slot of the organization's tenant shard, with its master. */
interface Disruption {
  cluster: OwnCluster;
  seeds: Array<{ host: string; port: number }>;
  slot: number;
  stream: string;
  /** "host:port" of the master serving the slot when the disruption starts. */
  master: string;
  note(what: string): void;
  accepted(): number;
}

/**
 * Sends through the HTTP API at a steady pace with a simulated relay on a
 * cluster of the test's own, disrupts the cluster once a third of the messages
 * are accepted, and checks that every stored message is delivered and sent
 * by the simulated Messages app exactly once.
 */
async function underLoad(t: TestContext, disrupt: (d: Disruption) => Promise<void>): Promise<void> {
  const mongoUrl = requirements(t, true);
  if (!mongoUrl) return;
  const cluster = new OwnCluster(firstPort);
  const processes: ServiceProcess[] = [];
  let agent: ChildProcess | undefined;
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-failover-'));
  const suffix = randomUUID().slice(0, 8);
  const prefix = `fo${suffix}`;
  const database = `relaybox_fo_${suffix}`;
  t.after(async () => {
    agent?.kill('SIGKILL');
    for (const p of processes) p.child.kill('SIGKILL');
    await cluster.stop();
    const store = new MongoStore(mongoUrl, database, loadConfig({}).storePingTimeoutMs, loadConfig({}).mongoWrites);
    await store
      .init()
      .then(() => store.dropDatabase())
      .finally(() => store.close())
      .catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  const seeds = await cluster.start();
  const env = {
    // The cluster of this test only (CI also sets REDIS_URL, which the processes must not get).
    REDIS_CLUSTER_NODES: seeds.map((s) => `${s.host}:${s.port}`).join(','),
    REDIS_URL: '',
    MONGODB_URL: withDatabase(mongoUrl, database),
    RUNTIME_KEY_PREFIX: prefix,
    DATA_DIR: join(dir, 'data'),
    RUNTIME_SHARDS: String(shards),
    RUNTIME_LEASE_TTL_MS: '2000',
    RUNTIME_LEASE_RENEW_MS: '400',
    RUNTIME_REBALANCE_MS: '300',
    TENANT_SWEEP_MS: '1000',
    RELAY_HEARTBEAT_TIMEOUT_MS: '15000',
    RELAY_HEARTBEAT_INTERVAL_MS: '2000',
    MESSAGE_SEND_TIMEOUT_MS: '30000',
    MESSAGE_RETRY_BASE_MS: '500',
    RATE_LIMIT_PER_MINUTE: '10000000',
    RATE_LIMIT_BURST: '1000000',
    PACING_PER_SECOND: '1000000',
    PACING_BURST: '1000000',
    PACING_NEW_CONTACTS_PER_DAY: '1000000',
    PACING_UNANSWERED_CAP: '1000000',
    PACING_FOLLOW_UPS_PER_DAY: '1000000',
    PACING_JITTER_MS: '0',
    PACING_QUIET_HOURS: 'off',
    LOG_LEVEL: 'warn',
  };
  processes.push(await startServiceProcess('worker', { ...env, NODE_ID: `${prefix}-worker` }, 60_000));
  const web = await startServiceProcess('web', { ...env, NODE_ID: `${prefix}-web` }, 60_000);
  processes.push(web);
  const base = `http://127.0.0.1:${web.port}`;

  const signup = await request(base, 'POST', '/api/v1/auth/signup', {
    body: { organizationName: 'Failover', email: `${prefix}@example.com`, password: 'a long password' },
  });
  assert.equal(signup.status, 201, signup.text);
  const token: string = signup.body.accessToken;
  const orgId: string = signup.body.organization.id;
  const relayToken = (await request(base, 'POST', `/api/v1/tenants/${orgId}/relay-tokens`, { token })).body
    .token as string;
  const chatDb = join(dir, 'relay', 'chat.db');
  agent = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'packages/relay-agent/src/cli.ts',
      '--server',
      `ws://127.0.0.1:${web.port}/api/v1/relays/connect`,
      '--state-dir',
      join(dir, 'relay', 'state'),
      '--chat-db',
      chatDb,
      '--simulate',
      '--capacity',
      '10',
      '--poll-ms',
      '200',
      '--name',
      'relay',
      '--token',
      relayToken,
    ],
    {
      env: { ...process.env, LOG_LEVEL: 'warn', RELAY_SIM_DELIVERY_MS: '50' },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  await waitFor(
    async () =>
      (await request(base, 'GET', '/api/v1/relays', { token })).body.data.some(
        (r: { status: string }) => r.status === 'online',
      ),
    60_000,
    'relay online',
  );

  // The master that holds the organization's tenant shard.
  const stream = new RedisKeys(prefix, true).shard('tenant', shardOf(orgId, shards)).stream;
  const client = new Cluster(seeds);
  const slot = Number(await client.call('CLUSTER', 'KEYSLOT', stream));
  client.disconnect();
  const master = await masterOf(seeds[0]!.port, slot);
  assert.ok(master, `a master serves slot ${slot}`);

  const events: string[] = [];
  const started = Date.now();
  const note = (what: string) => events.push(`${((Date.now() - started) / 1000).toFixed(1)}s ${what}`);
  t.after(() => {
    console.log(`failover timeline:\n  ${events.join('\n  ')}`);
    // What the processes logged (warnings and errors), to read a failure by.
    for (const p of processes)
      console.log(`${p.child.spawnargs.at(-1)} log (last 40 lines):\n  ${p.lines.slice(-40).join('\n  ')}`);
  });
  const ids: string[] = [];
  let refused = 0;
  let inFlight = 0;

  // A request that fails is not retried (it might have been stored): another message is sent in its place.
  const sending = (async () => {
    let next = 0;
    await Promise.all(
      Array.from({ length: inFlightRequests }, async () => {
        while (ids.length + inFlight < messages) {
          const i = next++;
          inFlight++;
          const res = await request(base, 'POST', '/api/v1/messages', {
            token,
            body: { to: `+1415${String(5_550_000 + (i % 100))}`, body: `failover ${i}` },
          })
            .catch(() => ({ status: 0, body: undefined }))
            .finally(() => inFlight--);
          if (res.status === 201) ids.push(res.body.id);
          else refused++;
          // A steady load, not a burst (about 25 a second): the failover happens while sends keep coming.
          await sleep(inFlightRequests * 40);
        }
      }),
    );
  })();

  const chaos = (async () => {
    await waitFor(() => ids.length >= messages / 3, 300_000, 'a third accepted');
    await disrupt({ cluster, seeds, slot, stream, master, note, accepted: () => ids.length });
  })();

  await Promise.all([sending, chaos]);
  note(`all ${messages} accepted, ${refused} refused`);

  const store = new MongoStore(
    withDatabase(mongoUrl, database),
    database,
    loadConfig({}).storePingTimeoutMs,
    loadConfig({}).mongoWrites,
  );
  await store.init();
  t.after(() => store.close());
  const docs = store.collection<MessageDoc>('messages');
  // What was stored: every accepted message, and any whose request failed after it was stored.
  const stored = async () => docs.find({ tenantId: orgId }, { direction: 'sent' }, { limit: messages * 2 });
  const byStatus = (all: MessageDoc[]) => {
    const counts: Record<string, number> = {};
    for (const d of all) counts[d.status] = (counts[d.status] ?? 0) + 1;
    return counts;
  };
  await waitFor(
    async () => {
      const all = await stored();
      const counts = byStatus(all);
      note(`statuses ${JSON.stringify(counts)}`);
      await sleep(3_000);
      return (counts.delivered ?? 0) + (counts.failed ?? 0) >= all.length;
    },
    300_000,
    'every stored message in a terminal state',
  );
  await sleep(2_000); // a duplicate send after this point would still show in the log below

  const all = await stored();
  const storedIds = new Set(all.map((d) => d.id));
  const sends = await sendLog(chatDb);
  const counts = new Map<string, number>();
  for (const id of sends) counts.set(id, (counts.get(id) ?? 0) + 1);
  const duplicates = [...counts].filter(([, n]) => n > 1);
  const missing = [...storedIds].filter((id) => !counts.has(id));
  const unknown = [...counts.keys()].filter((id) => !storedIds.has(id));
  const report = {
    messages,
    accepted: ids.length,
    uniqueIds: new Set(ids).size,
    refused,
    stored: storedIds.size,
    statuses: byStatus(all),
    simulatorSends: sends.length,
    duplicates: duplicates.length,
    missing: missing.length,
    unknown: unknown.length,
  };
  console.log(`failover report: ${JSON.stringify(report)}`);
  assert.equal(report.uniqueIds, messages);
  assert.deepEqual(
    ids.filter((id) => !storedIds.has(id)),
    [],
    'every accepted message stored',
  );
  assert.equal(report.statuses.delivered, storedIds.size, 'every stored message delivered');
  assert.deepEqual(duplicates, [], 'no message sent twice by the simulated relay');
  assert.deepEqual(missing, [], 'every stored message in the send log');
  assert.deepEqual(unknown, [], 'nothing sent that was not stored');
}

test(
  `redis cluster failover under load: ${messages} messages, the tenant shard's master killed, every accepted one delivered exactly once`,
  { timeout: 600_000 },
  (t) =>
    underLoad(t, async ({ cluster, seeds, slot, stream, master, note, accepted }) => {
      const victimPort = Number(master.split(':')[1]);
      const survivor = seeds.find((s) => s.port !== victimPort)!.port;
      note(`SIGKILL master ${master} (slot ${slot}: ${stream}), ${accepted()} accepted`);
      process.kill(cluster.pid(victimPort), 'SIGKILL');
      await waitFor(
        async () => {
          const now = await masterOf(survivor, slot);
          return now !== undefined && now !== master;
        },
        60_000,
        'the replica promoted',
      );
      note(`slot ${slot} served by ${await masterOf(survivor, slot)}, ${accepted()} accepted`);
      await cluster.restart(victimPort);
      await waitFor(async () => (await role(victimPort)) === 'slave', 60_000, 'the killed node back as a replica');
      note(`${master} rejoined as a replica, ${accepted()} accepted`);
    }),
);

test(
  `redis cluster resharding under load: ${messages} messages, the tenant shard's slot moved to another master key by key, every accepted one delivered exactly once`,
  { timeout: 600_000 },
  (t) =>
    underLoad(t, async ({ seeds, slot, stream, master, note, accepted }) => {
      const fromPort = Number(master.split(':')[1]);
      const masters = [...new Set(await Promise.all([0, 5_461, 10_923].map((s) => masterOf(seeds[0]!.port, s))))].map(
        (m) => Number(m!.split(':')[1]),
      );
      const toPort = masters.find((p) => p !== fromPort)!;
      const from = quiet(new Redis(fromPort, '127.0.0.1'));
      const to = quiet(new Redis(toPort, '127.0.0.1'));
      try {
        const fromId = String(await from.call('CLUSTER', 'MYID'));
        const toId = String(await to.call('CLUSTER', 'MYID'));
        note(`moving slot ${slot} (${stream}) from ${fromPort} to ${toPort}, ${accepted()} accepted`);
        await to.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
        await from.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
        // A few keys at a time, slowly: for a while the shard's keys are split over two masters (ASK, TRYAGAIN).
        let moved = 0;
        for (;;) {
          const keys = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 5)) as string[];
          if (keys.length === 0) break;
          await from.call('MIGRATE', '127.0.0.1', toPort, '', 0, 5_000, 'KEYS', ...keys);
          moved += keys.length;
          await sleep(100);
        }
        for (const port of masters) {
          const node = quiet(new Redis(port, '127.0.0.1'));
          await node.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId).finally(() => node.disconnect());
        }
        note(`slot ${slot} now on ${toPort} (${moved} keys moved), ${accepted()} accepted`);
      } finally {
        from.disconnect();
        to.disconnect();
      }
    }),
);

/** A node's view of the cluster: `CLUSTER NODES` as rows. */
async function clusterNodes(port: number): Promise<Array<{ id: string; port: number; flags: string; master: string }>> {
  const node = quiet(new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 }));
  try {
    const text = String(await node.call('CLUSTER', 'NODES'));
    return text
      .trim()
      .split('\n')
      .map((line) => {
        const [id, address, flags, master] = line.split(' ');
        return { id: id!, port: Number(address!.split(':')[1]!.split('@')[0]), flags: flags!, master: master! };
      });
  } finally {
    node.disconnect();
  }
}

test(
  'a send waits for the replica: it fails while the replica lags, and stands (counted) when the master has no replica left',
  { timeout: 120_000 },
  async (t) => {
    if (requirements(t, false) === false) return;
    const cluster = new OwnCluster(firstPort);
    const seeds = await cluster.start();
    const cfg = testRuntimeConfig({ replicaWaitMs: 300 });
    const transport = new RedisTransport({ clusterNodes: seeds }, cfg, 'w-sender', createLogger('silent'));
    t.after(async () => {
      await transport.stop();
      await cluster.stop();
    });
    await transport.start(
      [
        defineActor(counterProtocol, {
          handlers: {
            tick: () => {},
            add: () => {},
            echo: () => {},
            stall: () => {},
            explode: () => {},
            note: () => {},
          },
        }),
      ],
      { consume: false },
    );
    const send = () => transport.send('counter', 'k', { kind: 'tick' });

    // The replica of the master holding the shard of key "k".
    const stream = transport.keys.shard('counter', shardOf('k', cfg.defaultShards)).stream;
    const client = new Cluster(seeds);
    const slot = Number(await client.call('CLUSTER', 'KEYSLOT', stream));
    client.disconnect();
    const masterPort = Number((await masterOf(seeds[0]!.port, slot))!.split(':')[1]);
    const nodes = await clusterNodes(masterPort);
    const master = nodes.find((n) => n.port === masterPort)!;
    const replica = nodes.find((n) => n.master === master.id);
    assert.ok(replica, `a replica of ${masterPort} in ${JSON.stringify(nodes)}`);
    const unreplicated = async () =>
      (await register.getSingleMetric('relaybox_runtime_unreplicated_writes_total')?.get())?.values[0]?.value ?? 0;

    await send();
    const before = await unreplicated();

    // A replica that is there but does not answer (stopped): the master cannot tell it lacks the write, so the send fails.
    process.kill(cluster.pid(replica.port), 'SIGSTOP');
    try {
      await assert.rejects(
        send(),
        (err: Error & { code?: string }) =>
          err.code === 'service_unavailable' && /no replica confirmed/.test(err.message),
      );
    } finally {
      process.kill(cluster.pid(replica.port), 'SIGCONT');
    }
    await send();
    assert.equal(await unreplicated(), before, 'every send so far confirmed by the replica, or failed');

    // No replica at all: nothing could be promoted without the write, so it stands, and is counted.
    process.kill(cluster.pid(replica.port), 'SIGKILL');
    const masterConn = quiet(new Redis(masterPort, '127.0.0.1'));
    try {
      await waitFor(
        async () => /connected_slaves:0/.test(await masterConn.info('replication')),
        10_000,
        'the master without its replica',
      );
    } finally {
      masterConn.disconnect();
    }
    await send();
    assert.equal(await unreplicated(), before + 1);
  },
);
