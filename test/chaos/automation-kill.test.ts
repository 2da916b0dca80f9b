import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.ts';
import { MongoStore } from '../../src/store/mongo-store.ts';
import { RelaySocket } from '../support/relay-socket.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';
import { serviceUrl } from '../support/services.ts';
import { request, withDatabase } from '../support/test-app.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

test(
  'a worker SIGKILLed in the middle of an automation run: another worker completes the execution, once',
  { timeout: 120_000 },
  async (t) => {
    const redisUrl = await serviceUrl(t, 'REDIS_URL');
    const mongoUrl = await serviceUrl(t, 'MONGODB_URL');
    if (!redisUrl || !mongoUrl) return;
    const suffix = randomUUID().slice(0, 8);
    const env = {
      REDIS_URL: redisUrl,
      MONGODB_URL: withDatabase(mongoUrl, `relaybox_chaos_${suffix}`),
      RUNTIME_KEY_PREFIX: `chaos-${suffix}`,
      RUNTIME_LEASE_TTL_MS: '1500',
      RUNTIME_LEASE_RENEW_MS: '300',
      RUNTIME_REBALANCE_MS: '200',
      EVENT_CLAIM_IDLE_MS: '1000',
      WEBHOOK_ALLOW_PRIVATE: 'true',
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
    const procs: ServiceProcess[] = [];
    const receiver = await WebhookReceiver.start();
    let socket: RelaySocket | undefined;
    t.after(async () => {
      socket?.close();
      for (const p of procs) p.child.kill('SIGKILL');
      await receiver.stop();
      const store = new MongoStore(env.MONGODB_URL, undefined, 2_000, loadConfig({}).mongoWrites);
      await store.init();
      await store.dropDatabase();
      await store.close();
    });
    // The first attempt never gets an answer: its worker is killed while it waits.
    let held = false;
    receiver.respond = (_req, res) => {
      if (!held) {
        held = true;
        return;
      }
      res.writeHead(200).end('ok');
    };

    const doomed = await startServiceProcess('worker', env, 60_000);
    procs.push(doomed);
    const web = await startServiceProcess('web', env, 60_000);
    procs.push(web);
    const base = `http://127.0.0.1:${web.port}`;
    const signup = await request(base, 'POST', '/api/v1/auth/signup', {
      body: { organizationName: 'Chaos', email: `c-${suffix}@example.com`, password: 'correct horse battery' },
    });
    assert.equal(signup.status, 201, signup.text);
    const token = signup.body.accessToken as string;
    const orgId = signup.body.organization.id as string;
    const call = (method: string, path: string, body?: unknown) =>
      request(base, method, `/api/v1${path}`, { token, body });
    const made = await call('POST', '/automations', {
      name: 'Welcome',
      trigger: 'message_received',
      actions: [
        { type: 'create_contact', config: { tags: ['new'] } },
        { type: 'call_webhook', config: { url: receiver.url } },
        { type: 'send_reply', config: { body: 'Thanks, we got it' } },
      ],
    });
    assert.equal(made.status, 201, made.text);

    const relayToken = await call('POST', `/tenants/${orgId}/relay-tokens`, {});
    socket = await RelaySocket.open(base);
    socket.hello({ registrationToken: relayToken.body.token });
    await socket.next('welcome', undefined, 15_000);
    const sender = '+14155550900';
    socket.send({
      type: 'inbound',
      rowId: 1,
      guid: `GUID-${suffix}`,
      from: sender,
      isGroup: false,
      body: 'hello',
      receivedAt: new Date().toISOString(),
    });

    await receiver.waitFor(1, 30_000);
    doomed.child.kill('SIGKILL');
    const heir = await startServiceProcess('worker', env, 60_000);
    procs.push(heir);

    const deadline = Date.now() + 60_000;
    let execs: any[] = [];
    for (;;) {
      execs = (await call('GET', `/automations/${made.body.id}/executions`)).body.data;
      if (execs.length === 1 && execs[0].actions.every((a: any) => a.status === 'succeeded')) break;
      if (Date.now() > deadline) assert.fail(`execution did not complete: ${JSON.stringify(execs)}`);
      await sleep(200);
    }
    await sleep(2_000);
    execs = (await call('GET', `/automations/${made.body.id}/executions`)).body.data;
    assert.equal(execs.length, 1);
    assert.deepEqual(
      execs[0].actions.map((a: any) => [a.type, a.status]),
      [
        ['create_contact', 'succeeded'],
        ['call_webhook', 'succeeded'],
        ['send_reply', 'succeeded'],
      ],
    );
    assert.equal((await call('GET', `/automations/${made.body.id}`)).body.executionCount, 1);
    const contacts = (await call('GET', '/contacts')).body.data;
    assert.equal(contacts.length, 1);
    assert.deepEqual(contacts[0].tags, ['new']);
    const replies = (await call('GET', `/messages?direction=sent&participant=${encodeURIComponent(sender)}`)).body.data;
    assert.equal(replies.length, 1, 'one reply');
    // The interrupted HTTP call is made again (at least once, as webhooks are), under the same webhook-id for the receiver to deduplicate.
    assert.equal(receiver.received.length, 2);
    assert.equal(receiver.received[0]!.headers['webhook-id'], receiver.received[1]!.headers['webhook-id']);
    console.log(
      `# killed mid-run; the execution completed on the other worker: ${receiver.received.length} HTTP attempts, 1 execution, 1 reply, 1 contact`,
    );
  },
);
