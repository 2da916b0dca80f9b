/**
 * SIGTERM under load, with real processes, on the embedded default and on
 * Redis + MongoDB wire: the process stops taking requests (one kept alive
 * from before gets 503 and its connection closed), lets every send it
 * answered 201 finish its background work (its event published, the message
 * on its tenant's queue) before its runtime and store close, and exits 0
 * within SHUTDOWN_TIMEOUT_MS. Every 201 is then stored, with nothing left in an
 * outbox for a sweep to find. A relay connected to it is told 1001 (going
 * away), and the sends it held in flight are back on the queue. On the wire
 * the stopped process is either the only one (`all`) or a frontend with a
 * worker running beside it; a worker's own stop under load is checked by the
 * rolling restart (rolling-restart.test.ts: exit 0 in time, no lease left).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { RelaySocket } from '../support/relay-socket.ts';
import { request } from '../support/test-app.ts';
import { wireRun } from '../support/wire-run.ts';

const graceMs = 10_000;
const senders = 32;
/** SIGTERM once this many sends are answered 201: the rest of the senders are mid-request then. */
const acceptedBeforeStop = 150;
/** Sends the relay on the stopping process holds in flight. */
const relayCapacity = 5;

interface Outcome {
  accepted: string[];
  /** Answers other than 201, by status. */
  refused: Map<number, number>;
  /** Requests whose connection was closed before an answer (the process had stopped listening). */
  cut: number;
}

async function sendUntilStopped(base: string, token: string, stop: () => void): Promise<Outcome> {
  const outcome: Outcome = { accepted: [], refused: new Map(), cut: 0 };
  let stopped = false;
  await Promise.all(
    Array.from({ length: senders }, async (_, s) => {
      for (let i = 0; ; i++) {
        let res;
        try {
          res = await request(base, 'POST', '/api/v1/messages', {
            token,
            body: { to: `+1415555${String(s * 100 + (i % 100)).padStart(4, '0')}`, body: `stop ${s}-${i}` },
          });
        } catch {
          outcome.cut++;
          return;
        }
        if (res.status !== 201) {
          outcome.refused.set(res.status, (outcome.refused.get(res.status) ?? 0) + 1);
          return;
        }
        outcome.accepted.push(res.body.id);
        if (!stopped && outcome.accepted.length >= acceptedBeforeStop) {
          stopped = true;
          stop();
        }
      }
    }),
  );
  return outcome;
}

/** `web`: the process stopped is a frontend, with a worker of its own running beside it throughout. */
async function cleanStop(
  t: TestContext,
  env: Record<string, string>,
  outboxLeft: (orgId: string) => Promise<number>,
  role: 'all' | 'web' = 'all',
): Promise<void> {
  const procs: ServiceProcess[] = [];
  t.after(() => {
    for (const p of procs) p.child.kill('SIGKILL');
  });
  // The limiter is out of the way: this test is about what a stop does to requests, not about their rate.
  env = {
    ...env,
    RATE_LIMIT_PER_MINUTE: '6000000',
    RATE_LIMIT_BURST: '1000000',
    PACING_PER_SECOND: '1000000',
    PACING_BURST: '1000000',
    PACING_NEW_CONTACTS_PER_DAY: '1000000',
    PACING_UNANSWERED_CAP: '1000000',
    PACING_FOLLOW_UPS_PER_DAY: '1000000',
    PACING_JITTER_MS: '0',
    PACING_QUIET_HOURS: 'off',
  };
  if (role === 'web') procs.push(await startServiceProcess('worker', env));
  const first = await startServiceProcess(role, { ...env, SHUTDOWN_TIMEOUT_MS: String(graceMs) });
  procs.push(first);
  const base = `http://127.0.0.1:${first.port}`;
  const signup = await request(base, 'POST', '/api/v1/auth/signup', {
    body: { organizationName: 'Stopped', email: 'owner@example.com', password: 'correct horse battery' },
  });
  assert.equal(signup.status, 201, signup.text);
  const token = signup.body.accessToken as string;
  const orgId = signup.body.organization.id as string;

  // A relay on the stopping process takes a few sends and never reports on them: they are in flight when SIGTERM comes.
  const relayToken = await request(base, 'POST', `/api/v1/tenants/${orgId}/relay-tokens`, { token });
  assert.equal(relayToken.status, 201, relayToken.text);
  const relay = await RelaySocket.open(base);
  t.after(() => relay.close());
  relay.hello({ registrationToken: relayToken.body.token });
  await relay.next('welcome', undefined, 15_000);
  relay.send({ type: 'ready', capacity: relayCapacity });

  let exit: Promise<{ code: number | null; ms: number }> | undefined;
  const outcome = await sendUntilStopped(base, token, () => (exit = first.terminate()));
  const { code, ms } = await exit!;
  console.log(
    `# ${outcome.accepted.length} sends accepted, refused ${JSON.stringify(Object.fromEntries(outcome.refused))}, ${outcome.cut} cut; exited ${code} after ${ms} ms`,
  );
  assert.equal(code, 0, 'a clean exit');
  assert.ok(ms < graceMs, `exited within SHUTDOWN_TIMEOUT_MS (${ms} ms)`);
  assert.throws(() => process.kill(first.child.pid!, 0), /ESRCH/, 'the process is gone');
  assert.deepEqual(
    [...outcome.refused.keys()].filter((s) => s !== 503),
    [],
    'a request refused while stopping is a 503, never an error',
  );
  const warnings = first.lines.filter((line) => /"level":(40|50|60)/.test(line));
  assert.deepEqual(warnings, [], 'nothing was cut short: no event left to a sweep, no message left off its queue');
  assert.equal(await outboxLeft(orgId), 0, 'no event waits in an outbox');
  assert.deepEqual(
    await relay.closed,
    { code: 1001, reason: 'server shutting down' },
    'the relay is told the server is going away',
  );
  const handed = [...new Set(relay.frames.flatMap((f) => (f.type === 'send' ? [f.messageId] : [])))];
  assert.equal(handed.length, relayCapacity, 'the relay held sends when the stop came');

  const second = await startServiceProcess(role, env);
  procs.push(second);
  const again = `http://127.0.0.1:${second.port}`;
  const missing: string[] = [];
  for (const id of outcome.accepted) {
    const res = await request(again, 'GET', `/api/v1/messages/${id}/status`, { token });
    if (res.status !== 200) missing.push(`${id}: ${res.status}`);
  }
  assert.deepEqual(missing, [], 'every send answered 201 is stored');
  for (const id of handed) {
    const res = await request(again, 'GET', `/api/v1/messages/${id}/status`, { token });
    assert.equal(res.body.status, 'queued', `${id}, in flight on the relay at the stop, was handed back to the queue`);
  }
  assert.equal((await second.terminate()).code, 0);
  for (const p of procs.slice(0, -2))
    assert.equal((await p.terminate()).code, 0, 'the worker beside it stops cleanly too');
}

test('SIGTERM under load on the embedded default: every 201 stored and queued, a clean exit in time', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-stop-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  // The embedded store writes a new message and its event in one transaction: there is no outbox to look at.
  await cleanStop(t, { REDIS_URL: '', MONGODB_URL: '', LOG_LEVEL: 'info', DATA_DIR: dataDir }, async () => 0);
});

for (const role of ['all', 'web'] as const) {
  test(`SIGTERM under load on Redis + MongoDB wire, ${role === 'all' ? 'one process' : 'a frontend with a worker beside it'}: every 201 stored with its event published, a clean exit in time`, async (t) => {
    const run = await wireRun(t, `stop-${role}`, () => undefined);
    if (!run) return;
    await cleanStop(
      t,
      { ...run.env, LOG_LEVEL: 'info' },
      async (orgId) => {
        const store = new MongoStore(
          run.mongoUrl,
          run.database,
          loadConfig({}).storePingTimeoutMs,
          loadConfig({}).mongoWrites,
        );
        try {
          await store.init();
          return await store.collection('messages').count({ tenantId: orgId }, { outboxAt: { $exists: true } });
        } finally {
          await store.close();
        }
      },
      role,
    );
  });
}
