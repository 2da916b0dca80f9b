import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { simulateInbound } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitFor } from '../integration/runtime-contract.ts';
import { startServiceProcess } from '../support/service-process.ts';
import { request, withDatabase } from '../support/test-app.ts';

interface Agent {
  child: ChildProcess;
  chatDb: string;
  stateDir: string;
  output: () => string;
  exited: Promise<number | null>;
}

function startAgent(server: string, dir: string, name: string, token?: string): Agent {
  const chatDb = join(dir, name, 'chat.db');
  const stateDir = join(dir, name, 'state');
  const args = [
    '--server',
    server,
    '--state-dir',
    stateDir,
    '--chat-db',
    chatDb,
    '--simulate',
    '--capacity',
    '5',
    '--poll-ms',
    '100',
    '--name',
    name,
  ];
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'packages/relay-agent/src/cli.ts', ...args, ...(token ? ['--token', token] : [])],
    {
      env: { ...process.env, LOG_LEVEL: 'info', RELAY_SIM_DELIVERY_MS: '200' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
  return { child, chatDb, stateDir, output: () => output, exited };
}

async function sendLog(chatDb: string): Promise<Array<{ messageId: string }>> {
  const text = await readFile(`${chatDb}.sent.log`, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

test(
  'end to end: frontend, worker and two simulated relays: send, deliver, receive, fail over, replay, refuse',
  { timeout: 180_000 },
  async (t) => {
    const redis = process.env.REDIS_URL;
    const mongo = process.env.MONGODB_URL;
    if (!redis || !mongo) {
      if (process.env.CI === 'true') throw new Error('REDIS_URL and MONGODB_URL must be set in CI');
      return t.skip('REDIS_URL/MONGODB_URL not set: start Redis and a MongoDB wire server to run this test');
    }
    const dir = await mkdtemp(join(tmpdir(), 'relaybox-relay-e2e-'));
    const suffix = randomUUID().slice(0, 8);
    const env = {
      REDIS_URL: redis,
      MONGODB_URL: withDatabase(mongo, `relaybox_e2e_${suffix}`),
      RUNTIME_KEY_PREFIX: `e2e${suffix}`,
      DATA_DIR: join(dir, 'data'),
      RELAY_HEARTBEAT_TIMEOUT_MS: '3000',
      RELAY_HEARTBEAT_INTERVAL_MS: '500',
      TENANT_SWEEP_MS: '1000',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_MINUTE: '100000',
      RATE_LIMIT_BURST: '10000',
      PACING_PER_SECOND: '1000000',
      PACING_BURST: '1000000',
      PACING_NEW_CONTACTS_PER_DAY: '1000000',
      PACING_UNANSWERED_CAP: '1000000',
      PACING_FOLLOW_UPS_PER_DAY: '1000000',
      PACING_JITTER_MS: '0',
      PACING_QUIET_HOURS: 'off',
    };
    const worker = await startServiceProcess('worker', env);
    const web = await startServiceProcess('web', env);
    const agents: Agent[] = [];
    t.after(async () => {
      for (const a of agents) a.child.kill('SIGKILL');
      await web.terminate();
      await worker.terminate();
      await rm(dir, { recursive: true, force: true });
    });
    const base = `http://127.0.0.1:${web.port}`;
    const server = `ws://127.0.0.1:${web.port}/api/v1/relays/connect`;
    const call = (method: string, path: string, body?: unknown, token = owner) =>
      request(base, method, path, { token, body });

    const signup = await request(base, 'POST', '/api/v1/auth/signup', {
      body: { organizationName: 'E2E', email: `e2e-${suffix}@example.com`, password: 'a long password' },
    });
    assert.equal(signup.status, 201);
    const owner: string = signup.body.accessToken;
    const orgId: string = signup.body.organization.id;
    const newToken = async () => (await call('POST', `/api/v1/tenants/${orgId}/relay-tokens`)).body.token as string;
    const statusOf = async (id: string) => (await call('GET', `/api/v1/messages/${id}/status`)).body;

    const reusedToken = await newToken();
    const a = startAgent(server, dir, 'relay-a', reusedToken);
    const b = startAgent(server, dir, 'relay-b', await newToken());
    agents.push(a, b);
    await waitFor(
      async () =>
        (await call('GET', '/api/v1/relays')).body.data.filter((r: { status: string }) => r.status === 'online')
          .length === 2,
      20_000,
      'both relays online',
    );

    // 1. An API send reaches a relay and moves through sent to delivered, with timestamps.
    const first = (await call('POST', '/api/v1/messages', { to: '+14155550100', body: 'hello from the API' })).body.id;
    await waitFor(async () => (await statusOf(first)).status === 'delivered', 15_000, 'first message delivered');
    const delivered = await statusOf(first);
    assert.ok(delivered.sentAt && delivered.deliveredAt && delivered.sentAt <= delivered.deliveredAt);

    // 2. An incoming row injected into a relay's chat.db becomes a received message and raises the unread count.
    await simulateInbound(a.chatDb, { from: '+14155550199', body: 'a reply from a phone' });
    await waitFor(
      async () => (await call('GET', '/api/v1/messages?direction=received')).body.data.length === 1,
      15_000,
      'received',
    );
    // The conversation is touched just after the message is stored: looked up once it is there.
    let conversation = await call('GET', '/api/v1/conversations/lookup?participant=%2B14155550199');
    await waitFor(
      async () =>
        (conversation = await call('GET', '/api/v1/conversations/lookup?participant=%2B14155550199')).status === 200,
      15_000,
      'conversation',
    );
    assert.equal(conversation.body.unreadCount, 1);
    assert.equal(conversation.body.lastMessage, 'a reply from a phone');

    // 3. A relay killed mid-run: frozen first so what it holds stays in flight, then killed.
    a.child.kill('SIGSTOP');
    const burst: string[] = [];
    for (let i = 0; i < 12; i++)
      burst.push(
        (await call('POST', '/api/v1/messages', { to: `+1415555${String(2000 + i)}`, body: `burst ${i}` })).body.id,
      );
    await sleep(500);
    const killedAt = Date.now();
    a.child.kill('SIGKILL');
    const relays = (await call('GET', '/api/v1/relays')).body.data as Array<{ id: string; name: string }>;
    const relayA = relays.find((r) => r.name === 'relay-a')!;
    await waitFor(
      async () => (await call('GET', `/api/v1/relays/${relayA.id}`)).body.status === 'offline',
      5_000,
      'relay A offline',
    );
    assert.ok(Date.now() - killedAt <= 3_000 + 1_000, 'offline within the heartbeat timeout');
    await waitFor(
      async () => (await Promise.all(burst.map(statusOf))).every((s) => s.status === 'delivered'),
      30_000,
      'every burst message delivered',
    );
    const sends = [...(await sendLog(a.chatDb)), ...(await sendLog(b.chatDb))];
    const counts = new Map<string, number>();
    for (const s of sends) counts.set(s.messageId, (counts.get(s.messageId) ?? 0) + 1);
    assert.deepEqual(
      [...counts].filter(([, n]) => n > 1),
      [],
      'no message sent twice by the simulators',
    );
    for (const id of [first, ...burst]) assert.equal(counts.get(id), 1, `${id} sent exactly once`);

    // 4. A reconnect after downtime replays the inbound rows it missed, exactly once.
    b.child.kill('SIGTERM');
    await b.exited;
    await simulateInbound(b.chatDb, { from: '+14155550188', body: 'while you were away 1' });
    await simulateInbound(b.chatDb, { from: '+14155550188', body: 'while you were away 2' });
    const b2 = startAgent(server, dir, 'relay-b');
    agents.push(b2);
    await waitFor(
      async () =>
        (await call('GET', '/api/v1/messages?direction=received&participant=%2B14155550188')).body.data.length === 2,
      15_000,
      'missed rows replayed',
    );
    await sleep(1_500);
    const replayed = (await call('GET', '/api/v1/messages?direction=received&participant=%2B14155550188')).body.data;
    assert.deepEqual(
      replayed.map((m: { body: string }) => m.body).sort(),
      ['while you were away 1', 'while you were away 2'],
      'exactly once',
    );

    // 5. A used registration token is refused: the agent stops with an error.
    const reuse = startAgent(server, dir, 'relay-c', reusedToken);
    agents.push(reuse);
    assert.equal(await reuse.exited, 1, 'a reused token ends the agent');
    assert.match(reuse.output(), /unauthorized|already used|refused/i);

    // 6. Another organization sees none of this.
    const other = await request(base, 'POST', '/api/v1/auth/signup', {
      body: { organizationName: 'Other', email: `other-${suffix}@example.com`, password: 'a long password' },
    });
    assert.equal((await call('GET', `/api/v1/relays/${relayA.id}`, undefined, other.body.accessToken)).status, 404);
    assert.equal(
      (await call('GET', `/api/v1/messages/${first}/status`, undefined, other.body.accessToken)).status,
      404,
    );
  },
);
