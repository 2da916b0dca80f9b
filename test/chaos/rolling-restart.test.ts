/**
 * A rolling restart of the workers under load, with real processes on Redis
 * and a MongoDB wire server: 3 workers, 2 frontends, 2 simulated relays (one
 * per organization, each on its own frontend).
 * While the messages are sent (600 by default, ROLLING_MESSAGES to change),
 * one worker is restarted by SIGTERM, one by SIGKILL, and a shard is taken
 * from its worker and comes back to it. Every
 * message must end delivered, and the simulated Messages apps' own send logs
 * must hold each message id exactly once.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { waitFor } from '../integration/runtime-contract.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { request, withDatabase } from '../support/test-app.ts';
import { wireRun } from '../support/wire-run.ts';

/**
 * 600 messages by default keep the run to a few minutes in CI; ROLLING_MESSAGES=5000
 * runs the full size. What bounds the rate is the store, not the
 * simulated relays (one SQLite connection each, a few milliseconds a send):
 * FerretDB 1.x answers every filter with a scan of the collection, so each of
 * the tenant actor's reads and compare-and-sets costs time in proportion to
 * the messages stored, and the run slows as it grows.
 */
const messages = Number(process.env.ROLLING_MESSAGES ?? 600);
/** How long each phase may take: generous per message, as the store's scans grow with the run. */
const phaseMs = 600_000 + messages * 500;
const inFlightRequests = 32;
const shards = 8;

function startAgent(server: string, dir: string, name: string, token: string): { child: ChildProcess; chatDb: string } {
  const chatDb = join(dir, name, 'chat.db');
  const args = [
    '--server',
    server,
    '--state-dir',
    join(dir, name, 'state'),
    '--chat-db',
    chatDb,
    '--simulate',
    '--capacity',
    '10',
    '--poll-ms',
    '200',
    '--name',
    name,
    '--token',
    token,
  ];
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/relay-agent/src/cli.ts', ...args], {
    env: { ...process.env, LOG_LEVEL: 'warn', RELAY_SIM_DELIVERY_MS: '50' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return { child, chatDb };
}

async function sendLog(chatDb: string): Promise<string[]> {
  const text = await readFile(`${chatDb}.sent.log`, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { messageId: string }).messageId);
}

test(
  `rolling restart of the workers under load: ${messages} messages, every one delivered, each sent exactly once`,
  { timeout: 2 * phaseMs },
  async (t) => {
    const workers = new Map<string, ServiceProcess>();
    const webs: ServiceProcess[] = [];
    const agents: Array<{ child: ChildProcess; chatDb: string }> = [];
    const run = await wireRun(t, 'roll', () => {
      for (const a of agents) a.child.kill('SIGKILL');
      for (const w of workers.values()) w.child.kill('SIGKILL');
      for (const w of webs) w.child.kill('SIGKILL');
    });
    if (!run) return;
    const { dir, prefix, redis, database, mongoUrl } = run;
    const env = {
      ...run.env,
      RUNTIME_SHARDS: String(shards),
      RUNTIME_LEASE_TTL_MS: '2000',
      RUNTIME_LEASE_RENEW_MS: '400',
      RUNTIME_REBALANCE_MS: '300',
      SHUTDOWN_TIMEOUT_MS: '8000',
      RELAY_HEARTBEAT_TIMEOUT_MS: '10000',
      RELAY_HEARTBEAT_INTERVAL_MS: '2000',
      // A send whose frame a killed worker never published is tried again within the test, not after the default
      // 2 minutes; long enough that a slow simulated relay (10 sends queued) is never timed out.
      MESSAGE_SEND_TIMEOUT_MS: '60000',
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

    const startWorker = async (name: string) =>
      workers.set(name, await startServiceProcess('worker', { ...env, NODE_ID: `${prefix}-${name}` }, 60_000));
    await Promise.all(['w1', 'w2', 'w3'].map(startWorker));
    webs.push(await startServiceProcess('web', { ...env, NODE_ID: `${prefix}-web1` }, 60_000));
    webs.push(await startServiceProcess('web', { ...env, NODE_ID: `${prefix}-web2` }, 60_000));
    const bases = webs.map((w) => `http://127.0.0.1:${w.port}`);

    // Two organizations, one relay each (each relay on its own frontend): two tenant actors share the workers.
    const orgs: Array<{ token: string; orgId: string }> = [];
    for (const k of [0, 1]) {
      const signup = await request(bases[k]!, 'POST', '/api/v1/auth/signup', {
        body: { organizationName: `Rolling ${k}`, email: `${prefix}-${k}@example.com`, password: 'a long password' },
      });
      assert.equal(signup.status, 201, signup.text);
      const org = { token: signup.body.accessToken as string, orgId: signup.body.organization.id as string };
      orgs.push(org);
      const relayToken = (
        await request(bases[k]!, 'POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.token })
      ).body.token as string;
      agents.push(startAgent(`ws://127.0.0.1:${webs[k]!.port}/api/v1/relays/connect`, dir, `relay-${k}`, relayToken));
    }
    for (const [k, org] of orgs.entries()) {
      await waitFor(
        async () =>
          (await request(bases[k]!, 'GET', '/api/v1/relays', { token: org.token })).body.data.some(
            (r: { status: string }) => r.status === 'online',
          ),
        60_000,
        `relay ${k} online`,
      );
    }

    const leaseOwners = async () =>
      Promise.all(Array.from({ length: shards }, (_, i) => redis.get(`${prefix}:lease:tenant:${i}`)));
    const events: string[] = [];
    const started = Date.now();
    const note = (what: string) => events.push(`${((Date.now() - started) / 1000).toFixed(1)}s ${what}`);
    let accepted = 0;
    const ids: string[] = [];
    let refused = 0;
    let inFlight = 0;

    // A request that fails is not retried (it might have been stored): another message is sent in its place.
    const sending = (async () => {
      let next = 0;
      await Promise.all(
        Array.from({ length: inFlightRequests }, async (_, lane) => {
          const base = bases[lane % 2]!;
          const { token } = orgs[lane % 2]!;
          while (accepted + inFlight < messages) {
            const i = next++;
            inFlight++;
            const res = await request(base, 'POST', '/api/v1/messages', {
              token,
              body: { to: `+1415${String(5_550_000 + (i % 100))}`, body: `rolling ${i}` },
            }).finally(() => inFlight--);
            if (res.status === 201) {
              ids.push(res.body.id);
              accepted++;
            } else {
              refused++;
            }
          }
        }),
      );
    })();

    const chaos = (async () => {
      await waitFor(() => accepted >= messages * 0.2, phaseMs, '20% accepted');
      note('SIGTERM w1');
      const term = await workers.get('w1')!.terminate();
      note(`w1 exited ${term.code} after ${term.ms} ms; starting w1b`);
      // A worker stopped by SIGTERM under load exits cleanly within SHUTDOWN_TIMEOUT_MS, its shards released, not left to expire.
      assert.equal(term.code, 0, 'w1 exits 0');
      assert.ok(term.ms < Number(env.SHUTDOWN_TIMEOUT_MS), `w1 exited within SHUTDOWN_TIMEOUT_MS (${term.ms} ms)`);
      assert.throws(() => process.kill(workers.get('w1')!.child.pid!, 0), /ESRCH/, 'w1 is gone');
      const leaseKeys = await redis.keys(`${prefix}:lease:*`);
      const stillHeld =
        leaseKeys.length === 0 ? [] : (await redis.mget(...leaseKeys)).filter((owner) => owner === `${prefix}-w1`);
      assert.deepEqual(stillHeld, [], 'no lease is left held by w1');
      workers.delete('w1');
      await startWorker('w1b');
      await waitFor(() => accepted >= messages * 0.4, phaseMs, '40% accepted');
      note('SIGKILL w2');
      workers.get('w2')!.child.kill('SIGKILL');
      workers.delete('w2');
      await startWorker('w2b');
      note('w2b started');
      await waitFor(() => accepted >= messages * 0.6, phaseMs, '60% accepted');
      // A shard is taken from the worker holding the fewest (so it is the one short of its share and takes the
      // shard back), and taken again from any other worker that picks it up, until it is back where it was.
      const leaseOwners = async () => {
        const all = await Promise.all(
          ['tenant', 'relay'].flatMap((type) =>
            Array.from({ length: shards }, async (_, i) => ({
              key: `${prefix}:lease:${type}:${i}`,
              owner: await redis.get(`${prefix}:lease:${type}:${i}`),
            })),
          ),
        );
        const byOwner = new Map<string, string[]>();
        for (const { key, owner } of all) if (owner) byOwner.set(owner, [...(byOwner.get(owner) ?? []), key]);
        return byOwner;
      };
      // Only once the workers have settled their shares: a worker still short of its share (the one just
      // started) would otherwise take every shard let go, and the shard could never come back home.
      let held = await leaseOwners();
      let settledSince = Date.now();
      let shape = '';
      await waitFor(
        async () => {
          held = await leaseOwners();
          const now = [...held.values()]
            .map((keys) => keys.length)
            .sort()
            .join(',');
          if (now !== shape || held.size < workers.size) [shape, settledSince] = [now, Date.now()];
          await sleep(250);
          return Date.now() - settledSince >= 5_000;
        },
        120_000,
        'shard ownership settled',
      );
      note(`shards settled: ${shape} over ${held.size} workers`);
      const [home, leases] = [...held].sort((x, y) => x[1].length - y[1].length)[0]!;
      const lease = leases.find((k) => k.includes(':tenant:')) ?? leases[0]!;
      const shard = lease.slice(prefix.length + ':lease:'.length);
      // A random hold each time: a fixed one phase-locks with one worker's rebalance tick, which then always wins the free shard.
      const hold = () => 1_000 + Math.floor(Math.random() * 2_000);
      await redis.set(lease, 'elsewhere', 'PX', hold());
      note(`shard ${shard} taken from ${home.slice(prefix.length + 1)} (holding ${leases.length})`);
      await waitFor(
        async () => {
          const owner = await redis.get(lease);
          if (owner === home) return true;
          if (owner && owner !== 'elsewhere') {
            note(`shard ${shard} went to ${owner.slice(prefix.length + 1)}; taken again`);
            await redis.set(lease, 'elsewhere', 'PX', hold());
          }
          await sleep(200);
          return false;
        },
        120_000,
        `shard ${shard} back home`,
      );
      note(`shard ${shard} back with ${home.slice(prefix.length + 1)}`);
    })();

    const progress = setInterval(() => {
      void Promise.all(agents.map((a) => sendLog(a.chatDb))).then((logs) =>
        note(`${accepted} accepted, ${logs.flat().length} sent by the simulators`),
      );
    }, 10_000);
    t.after(() => {
      clearInterval(progress);
      console.log(`rolling restart timeline:\n  ${events.join('\n  ')}`);
    });
    await Promise.all([sending, chaos]);
    const sentMs = Date.now() - started;
    note(`all ${messages} accepted`);
    const store = new MongoStore(
      withDatabase(mongoUrl, database),
      database,
      loadConfig({}).storePingTimeoutMs,
      loadConfig({}).mongoWrites,
    );
    await store.init();
    t.after(() => store.close());
    const docs = store.collection<MessageDoc>('messages');
    const byStatus = async () => {
      const all = (
        await Promise.all(
          orgs.map((o) => docs.find({ tenantId: o.orgId }, { direction: 'sent' }, { limit: messages * 2 })),
        )
      ).flat();
      const counts: Record<string, number> = {};
      for (const d of all) counts[d.status] = (counts[d.status] ?? 0) + 1;
      return counts;
    };
    await waitFor(
      async () => {
        const counts = await byStatus();
        note(`statuses ${JSON.stringify(counts)}`);
        // Not more often: reading every message back is itself a scan per organization on FerretDB.
        await sleep(10_000);
        return (counts.delivered ?? 0) >= messages;
      },
      phaseMs,
      'every message delivered',
    );
    const deliveredMs = Date.now() - started;
    await sleep(2_000); // a duplicate send after this point would still show in the logs below

    const sends = [...(await sendLog(agents[0]!.chatDb)), ...(await sendLog(agents[1]!.chatDb))];
    const counts = new Map<string, number>();
    for (const id of sends) counts.set(id, (counts.get(id) ?? 0) + 1);
    const duplicates = [...counts].filter(([, n]) => n > 1);
    const missing = ids.filter((id) => !counts.has(id));
    const deadLetters = (await redis.xlen(`${prefix}:tenant:dlq`)) + (await redis.xlen(`${prefix}:relay:dlq`));
    const report = {
      messages,
      accepted,
      uniqueIds: new Set(ids).size,
      refused,
      statuses: await byStatus(),
      simulatorSends: sends.length,
      sentOnce: [...counts.values()].filter((n) => n === 1).length,
      duplicates: duplicates.length,
      missing: missing.length,
      deadLetters,
      acceptMs: sentMs,
      allDeliveredMs: deliveredMs,
      deliveredPerSecond: Math.round(messages / (deliveredMs / 1000)),
    };
    console.log(`rolling restart report: ${JSON.stringify(report)}`);
    assert.equal(report.uniqueIds, messages);
    assert.equal(report.statuses.delivered, messages, 'every message delivered');
    assert.deepEqual(duplicates, [], 'no message sent twice by the simulators');
    assert.deepEqual(missing, [], 'every message in a simulator send log');
    assert.equal(sends.length, messages);
    assert.equal(deadLetters, 0);
  },
);
