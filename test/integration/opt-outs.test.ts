/**
 * Opt-outs, enforced (docs/opt-outs.md): a stop keyword received through a
 * relay agent in simulator mode puts its sender on the suppression list
 * (one `contact.opted_out`), every send path refuses them (a single send
 * 422, a bulk job's entry skipped, a scheduled job's entry skipped at its
 * start, a group send leaves them out), a start keyword lifts it; the
 * suppression API with CSV import and organization scoping; an admin's
 * override; and, on Redis + MongoDB, a change made on one process enforced at
 * once by another.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { simulateInbound } from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { simulatorArgs, startAgent } from '../support/fake-relay-server.ts';
import {
  apiKey,
  eachBackend,
  signup,
  startTestApp,
  withDatabase,
  type Backend,
  type TestApp,
} from '../support/test-app.ts';
import { until } from '../support/until.ts';

/** A service with an organization whose relay agent (a process, in simulator mode) is online; all stopped after the test. */
async function withAgent(t: TestContext, backend: Backend, env: Record<string, string> = {}) {
  const app = await startTestApp(backend, env);
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-optout-'));
  const org = await signup(app);
  const token = await app.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken });
  assert.equal(token.status, 201, token.text);
  const { args, chatDb } = simulatorArgs(
    `${app.base.replace('http', 'ws')}/api/v1/relays/connect`,
    dir,
    token.body.token,
  );
  const agent = startAgent(args);
  t.after(async () => {
    agent.child.kill('SIGKILL');
    await app.stop();
    await rm(dir, { recursive: true, force: true });
  });
  await until(
    'the relay online',
    async () =>
      (await app.request('GET', '/api/v1/relays', { token: org.ownerToken })).body.data?.some(
        (r: { status: string }) => r.status === 'online',
      ),
    30_000,
  );
  // A newly registered agent forwards only rows written after its floor (chat.db's last row when the server welcomed
  // it), stored just before it logs its credential: a row written earlier is history, never forwarded.
  await until('the agent past its inbound floor', async () => agent.output().includes('credential-stored'), 30_000);
  return { app, org, chatDb };
}

/** An import request: the CSV as the `file` field of a multipart/form-data body, through the recorded `request()`. */
function upload(t: TestApp, token: string, text: string, filename = 'list.csv', type = 'text/csv') {
  const boundary = `----relaybox${randomUUID()}`;
  const body =
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: ${type}\r\n\r\n` +
    `${text}\r\n--${boundary}--\r\n`;
  return t.request('POST', '/api/v1/suppressions/import', {
    token,
    body,
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  });
}

eachBackend((backend) => {
  describe(`opt-outs (${backend})`, { timeout: 300_000 }, () => {
    test('STOP through the relay agent suppresses its sender: a single send is 422, a bulk job skips them, START lifts it', async (t) => {
      const { app, org, chatDb } = await withAgent(t, backend, { JOB_TRACK_MS: '200' });
      const token = org.ownerToken;
      const call = (method: string, path: string, body?: unknown) => app.request(method, path, { token, body });
      const quitter = '+14155550123';
      const other = '+14155550124';
      const events = async (type: string) => (await call('GET', `/api/v1/events?type=${type}`)).body.data as any[];

      // An ordinary reply is a message, not a keyword; "stop it" is not STOP.
      await simulateInbound(chatDb, { from: quitter, body: 'stop it please' });
      await simulateInbound(chatDb, { from: quitter, body: '  Stop \n' });
      const listed = await until(
        'the STOP sender on the list',
        async () => (await call('GET', '/api/v1/suppressions')).body.data?.find((s: any) => s.handle === quitter),
        30_000,
      );
      assert.equal(listed.source, 'keyword');
      assert.equal((await call('GET', '/api/v1/suppressions')).body.pagination.total, 1);
      const optedOut = await until(
        'contact.opted_out',
        async () => (await events('contact.opted_out')).length > 0 && events('contact.opted_out'),
      );
      assert.equal(optedOut.length, 1);
      assert.equal(optedOut[0].data.handle, quitter);
      assert.equal(optedOut[0].data.source, 'keyword');

      // A second stop keyword (another of the standard set) changes nothing and makes no second event.
      await simulateInbound(chatDb, { from: quitter, body: 'UNSUBSCRIBE' });
      await until(
        'the second keyword stored',
        async () =>
          (await call('GET', `/api/v1/messages?direction=received&participant=%2B14155550123`)).body.data?.length === 3,
        30_000,
      );
      assert.equal((await events('contact.opted_out')).length, 1);

      const refused = await call('POST', '/api/v1/messages', { to: '+1 415 555 0123', body: 'a sale!' });
      assert.equal(refused.status, 422, refused.text);
      assert.equal(refused.body.error, 'recipient_opted_out');
      assert.match(refused.body.message, /\+14155550123/);
      assert.equal(
        (await call('GET', '/api/v1/messages?direction=sent')).body.data.length,
        0,
        'nothing stored or queued for a refused send',
      );

      const job = await call('POST', '/api/v1/messages/bulk', {
        messages: [
          { to: other, body: 'bulk one' },
          { to: quitter, body: 'bulk two' },
        ],
      });
      assert.equal(job.status, 201, job.text);
      const done = await until(
        'the job completed',
        async () => {
          const detail = (await call('GET', `/api/v1/messages/bulk/${job.body.jobId}`)).body;
          return detail.status === 'completed' && detail;
        },
        30_000,
      );
      assert.equal(done.counts.skipped, 1);
      assert.equal(done.counts.delivered + done.counts.sent, 1);
      assert.equal(done.counts.failed, 0);
      assert.equal(done.progress, 1);
      const results = (await call('GET', `/api/v1/messages/bulk/${job.body.jobId}/results`)).body.data;
      assert.deepEqual(
        results.map((r: any) => [r.to, r.status === 'delivered' || r.status === 'sent' ? 'went' : r.status, r.error]),
        [
          [other, 'went', null],
          [quitter, 'skipped', 'recipient_opted_out'],
        ],
      );
      assert.match(results[1].reason, /suppression list/);
      const skippedOnly = (await call('GET', `/api/v1/messages/bulk/${job.body.jobId}/results?status=skipped`)).body;
      assert.deepEqual(
        skippedOnly.data.map((r: any) => r.to),
        [quitter],
      );
      // The skipped entry never reached the relay: only the other recipient's message was sent.
      const sentTo = (await call('GET', '/api/v1/messages?direction=sent')).body.data.filter((m: any) => m.sentAt);
      assert.deepEqual(
        sentTo.map((m: any) => m.to),
        [other],
      );

      await simulateInbound(chatDb, { from: quitter, body: 'start' });
      await until(
        'the list empty again',
        async () => (await call('GET', '/api/v1/suppressions')).body.pagination?.total === 0,
        30_000,
      );
      const optedIn = await until(
        'contact.opted_in',
        async () => (await events('contact.opted_in')).length > 0 && events('contact.opted_in'),
      );
      assert.equal(optedIn.length, 1);
      assert.equal(optedIn[0].data.handle, quitter);
      const again = await call('POST', '/api/v1/messages', { to: quitter, body: 'welcome back' });
      assert.equal(again.status, 201, again.text);
      await until(
        'the message after START delivered',
        async () => (await call('GET', `/api/v1/messages/${again.body.id}`)).body.status === 'delivered',
        30_000,
      );
    });

    test("the organization's own stop keyword counts, and HELP is answered with its help text", async (t) => {
      const { app, org, chatDb } = await withAgent(t, backend);
      const call = (method: string, path: string, body?: unknown, token = org.ownerToken) =>
        app.request(method, path, { token, body });
      const member = await apiKey(app, org, 'member');
      assert.equal((await call('PUT', '/api/v1/organization/opt-outs', { helpText: 'x' }, member)).status, 403);
      assert.equal((await call('PUT', '/api/v1/organization/opt-outs', { stopKeywords: [''] })).status, 400);
      assert.equal((await call('PUT', '/api/v1/organization/opt-outs', { stopKeywords: ['a'], extra: 1 })).status, 400);
      const saved = await call('PUT', '/api/v1/organization/opt-outs', {
        stopKeywords: ['BASTA', ' Arrêt '],
        helpText: 'Acme: reply STOP to opt out.',
      });
      assert.equal(saved.status, 200, saved.text);
      assert.deepEqual(saved.body.stopKeywords, ['basta', 'arrêt']);
      const onlyHelp = await call('PUT', '/api/v1/organization/opt-outs', { helpText: 'Acme help: call us.' });
      assert.deepEqual(onlyHelp.body.stopKeywords, ['basta', 'arrêt'], 'a field not given is kept');
      assert.equal(
        (await call('GET', '/api/v1/organization/opt-outs', undefined, member)).body.helpText,
        'Acme help: call us.',
      );

      await simulateInbound(chatDb, { from: '+14155550131', body: 'help' });
      const reply = await until(
        'the help text sent back',
        async () =>
          (await call('GET', '/api/v1/messages?direction=sent&participant=%2B14155550131')).body.data?.find(
            (m: any) => m.status === 'delivered',
          ),
        30_000,
      );
      assert.equal(reply.body, 'Acme help: call us.');

      await simulateInbound(chatDb, { from: 'Someone@Example.com', body: 'Basta' });
      await until(
        'the own keyword honoured',
        async () =>
          (await call('GET', '/api/v1/suppressions?handle=someone%40example.com')).body.data?.[0]?.source === 'keyword',
        30_000,
      );
      const refused = await call('POST', '/api/v1/messages', { to: 'someone@EXAMPLE.com', body: 'hi' });
      assert.equal(refused.body.error, 'recipient_opted_out');
    });

    test('the suppressions API: add, list, remove and CSV import in the caller organization only; bad input is a 4xx', async (t) => {
      const app = await startTestApp(backend);
      t.after(() => app.stop());
      const org = await signup(app);
      const rival = await signup(app, 'Rival');
      const call = (method: string, path: string, body?: unknown, token = org.ownerToken) =>
        app.request(method, path, { token, body });
      const [member, viewer] = [await apiKey(app, org, 'member'), await apiKey(app, org, 'viewer')];

      const added = await call(
        'POST',
        '/api/v1/suppressions',
        { handle: '+1 (415) 555-0140', reason: 'asked by phone' },
        member,
      );
      assert.equal(added.status, 201, added.text);
      assert.equal(added.body.handle, '+14155550140');
      assert.equal(added.body.reason, 'asked by phone');
      assert.equal(added.body.source, 'api');
      const repeat = await call('POST', '/api/v1/suppressions', { handle: '+14155550140' });
      assert.equal(repeat.status, 200);
      assert.equal(repeat.body.id, added.body.id);
      assert.equal(repeat.body.reason, 'asked by phone', 'left as it was');
      const events = (await call('GET', '/api/v1/events?type=contact.opted_out')).body.data;
      assert.equal(events.length, 1);
      assert.equal(events[0].data.source, 'api');

      for (const [body, path] of [
        [{ handle: 'not a handle' }, '/handle'],
        [{ handle: '+1' }, '/handle'],
        [{}, '/handle'],
        [{ handle: '+14155550141', extra: true }, '/extra'],
        [{ handle: '+14155550141', reason: 'x'.repeat(501) }, '/reason'],
      ] as const) {
        const res = await call('POST', '/api/v1/suppressions', body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'validation_error');
        assert.ok(
          res.body.details.some((d: { path: string }) => d.path === path),
          `${JSON.stringify(body)}: ${res.text}`,
        );
      }
      assert.equal((await call('POST', '/api/v1/suppressions', { handle: '+14155550141' }, viewer)).status, 403);
      assert.equal((await call('GET', '/api/v1/suppressions?limit=1000')).status, 400);

      // Another organization sees none of it, may not remove it, and has its own list.
      assert.equal((await call('GET', '/api/v1/suppressions', undefined, rival.ownerToken)).body.pagination.total, 0);
      assert.equal(
        (await call('DELETE', '/api/v1/suppressions/%2B14155550140', undefined, rival.ownerToken)).status,
        404,
      );
      assert.equal(
        (await call('GET', '/api/v1/events?type=contact.opted_out', undefined, rival.ownerToken)).body.data.length,
        0,
      );
      const rivalSend = await call('POST', '/api/v1/messages', { to: '+14155550140', body: 'hi' }, rival.ownerToken);
      assert.equal(rivalSend.status, 201, "another organization's list does not apply");

      const imported = await upload(
        app,
        member,
        'Handle,Reason,Ignored\n+14155550150,from the old CRM,x\n+14155550140,again,\nnot-a-handle,,\nADA@example.com,,\n+14155550150,dup,\n',
      );
      assert.equal(imported.status, 200, imported.text);
      assert.deepEqual(imported.body, {
        added: 2,
        alreadyListed: 1,
        errors: [{ row: 3, message: imported.body.errors[0].message }],
      });
      assert.match(imported.body.errors[0]!.message, /phone number/);
      const list = (await call('GET', '/api/v1/suppressions?limit=10')).body;
      assert.equal(list.pagination.total, 3);
      assert.deepEqual(list.data.map((s: any) => s.handle).sort(), ['+14155550140', '+14155550150', 'ada@example.com']);
      assert.equal(list.data.find((s: any) => s.handle === '+14155550150').source, 'import');
      assert.equal((await call('GET', '/api/v1/suppressions?handle=%2B14155550150')).body.data.length, 1);
      assert.equal((await upload(app, member, 'phone\n+14155550160\n')).status, 400, 'no handle column');
      assert.equal((await upload(app, member, '[]', 'list.json', 'application/json')).status, 415);

      assert.equal((await call('DELETE', '/api/v1/suppressions/%2B14155550140', undefined, member)).status, 403);
      assert.equal((await call('DELETE', '/api/v1/suppressions/%2B14155550140')).status, 204);
      assert.equal((await call('DELETE', '/api/v1/suppressions/%2B14155550140')).status, 404);
      assert.equal((await call('DELETE', '/api/v1/suppressions/nonsense')).status, 400);
      assert.equal((await call('GET', '/api/v1/events?type=contact.opted_in')).body.data[0].data.source, 'api');
      assert.equal((await call('POST', '/api/v1/messages', { to: '+14155550140', body: 'ok again' })).status, 201);
    });

    test('overrideOptOut: an admin sends one message to a suppressed recipient, recorded on it; a member may not', async (t) => {
      const app = await startTestApp(backend);
      t.after(() => app.stop());
      const org = await signup(app);
      const call = (method: string, path: string, body: unknown, token = org.ownerToken) =>
        app.request(method, path, { token, body });
      const [admin, member] = [await apiKey(app, org, 'admin'), await apiKey(app, org, 'member')];
      await call('POST', '/api/v1/suppressions', { handle: '+14155550170' });
      const send = { to: '+14155550170', body: 'Your password was changed', overrideOptOut: true };
      const byMember = await call('POST', '/api/v1/messages', send, member);
      assert.equal(byMember.status, 403);
      assert.equal(byMember.body.error, 'forbidden');
      const byAdmin = await call('POST', '/api/v1/messages', send, admin);
      assert.equal(byAdmin.status, 201, byAdmin.text);
      assert.equal(byAdmin.body.overrideOptOut, true);
      const stored = await app.request('GET', `/api/v1/messages/${byAdmin.body.id}`, { token: member });
      assert.equal(stored.body.overrideOptOut, true);
      const plain = await call('POST', '/api/v1/messages', { to: '+14155550171', body: 'hi' }, member);
      assert.equal(plain.body.overrideOptOut, undefined, 'recorded only where it was asked for');
      assert.equal(
        (await call('POST', '/api/v1/messages/bulk', { messages: [{ ...send }] }, admin)).status,
        400,
        'a bulk job has no override',
      );
    });

    test('a scheduled job skips a recipient who opted out before it starts; a group send leaves them out', async (t) => {
      const app = await startTestApp(backend, { JOB_TRACK_MS: '200' });
      t.after(() => app.stop());
      const org = await signup(app);
      const call = (method: string, path: string, body?: unknown) =>
        app.request(method, path, { token: org.ownerToken, body });
      const job = await call('POST', '/api/v1/messages/bulk', {
        scheduledAt: new Date(Date.now() + 2_000).toISOString(),
        messages: [
          { to: '+14155550180', body: 'one' },
          { to: '+14155550181', body: 'two' },
        ],
      });
      assert.equal(job.status, 201, job.text);
      assert.equal((await call('POST', '/api/v1/suppressions', { handle: '+14155550181' })).status, 201);
      await until(
        'the scheduled job started',
        async () => (await call('GET', `/api/v1/messages/bulk/${job.body.jobId}`)).body.status !== 'scheduled',
        30_000,
      );
      const results = await until(
        'the opted-out entry skipped',
        async () => {
          const data = (await call('GET', `/api/v1/messages/bulk/${job.body.jobId}/results`)).body.data;
          return data?.[1]?.status === 'skipped' && data;
        },
        30_000,
      );
      assert.equal(results[0].status, 'queued', 'the other waits for a relay');
      assert.equal(results[1].error, 'recipient_opted_out');

      const contacts = await Promise.all(
        ['+14155550181', '+14155550182'].map((phone) =>
          call('POST', '/api/v1/contacts', { firstName: 'A', phoneNumbers: [phone] }),
        ),
      );
      const group = await call('POST', '/api/v1/contact-groups', { name: 'friends' });
      for (const c of contacts) {
        const added = await call('POST', `/api/v1/contact-groups/${group.body.id}/members`, { contactId: c.body.id });
        assert.equal(added.status, 201, added.text);
      }
      const groupSend = await call('POST', '/api/v1/messages', { to: `group:${group.body.id}`, body: 'hello all' });
      assert.equal(groupSend.status, 201, groupSend.text);
      assert.equal(groupSend.body.messageIds.length, 1);
      assert.equal(groupSend.body.recipients, 1);
      await call('POST', '/api/v1/suppressions', { handle: '+14155550182' });
      const none = await call('POST', '/api/v1/messages', { to: `group:${group.body.id}`, body: 'hello all' });
      assert.equal(none.status, 422);
      assert.equal(none.body.error, 'recipient_opted_out');
    });

    test("an automation's reply to a suppressed sender is refused and logged, save its reply to the STOP itself", async (t) => {
      const { app, org, chatDb } = await withAgent(t, backend);
      const call = (method: string, path: string, body?: unknown) =>
        app.request(method, path, { token: org.ownerToken, body });
      const automation = await call('POST', '/api/v1/automations', {
        name: 'greeter',
        trigger: 'message_received',
        actions: [{ type: 'send_reply', config: { body: 'Thanks!' } }],
      });
      assert.equal(automation.status, 201, automation.text);
      /** The outcome of the automation's reply to the received message whose body is `body`, once it is known. */
      const replyTo = (body: string) =>
        until(
          `the automation run on "${body}"`,
          async () => {
            const runs = (await call('GET', `/api/v1/automations/${automation.body.id}/executions`)).body.data ?? [];
            for (const run of runs) {
              const received = (await call('GET', `/api/v1/messages/${run.messageId}`)).body;
              if (received.body === body && run.actions[0].status !== 'pending') return run.actions[0];
            }
            return undefined;
          },
          30_000,
        );

      await call('POST', '/api/v1/suppressions', { handle: '+14155550190' });
      await simulateInbound(chatDb, { from: '+14155550190', body: 'hello there' });
      const refused = await replyTo('hello there');
      assert.equal(refused.status, 'failed', JSON.stringify(refused));
      assert.match(refused.error, /suppression list/);

      // The reply to the STOP itself is its confirmation, and goes; the next reply to that sender does not.
      await simulateInbound(chatDb, { from: '+14155550191', body: 'STOP' });
      const confirmation = await replyTo('STOP');
      assert.equal(confirmation.status, 'succeeded', JSON.stringify(confirmation));
      await simulateInbound(chatDb, { from: '+14155550191', body: 'why?' });
      const later = await replyTo('why?');
      assert.equal(later.status, 'failed', JSON.stringify(later));
      const sent = (await call('GET', '/api/v1/messages?direction=sent')).body.data;
      assert.deepEqual(
        sent.map((m: any) => m.to),
        ['+14155550191'],
      );
    });
  });
});

test(
  'on Redis + MongoDB, a suppression added on one process is enforced by another at once',
  { timeout: 60_000 },
  async (t) => {
    if (!process.env.REDIS_URL || !process.env.MONGODB_URL) return t.skip('REDIS_URL and MONGODB_URL not set');
    const suffix = randomUUID().slice(0, 8);
    const shared = {
      RUNTIME_KEY_PREFIX: `t${suffix}`,
      MONGODB_URL: withDatabase(process.env.MONGODB_URL, `relaybox_t${suffix}`),
      // Far longer than the test: only the broadcast can make the second process see the change.
      SUPPRESSION_CACHE_MS: '600000',
    };
    const one = await startTestApp('redis+mongo', shared);
    const two = await startTestApp('redis+mongo', shared);
    t.after(async () => {
      await two.stop();
      await one.stop();
    });
    const org = await signup(one);
    const key = await apiKey(one, org, 'admin');
    const send = (app: TestApp) =>
      app.request('POST', '/api/v1/messages', { token: key, body: { to: '+14155550199', body: 'hi' } });
    // The second process holds the organization's (empty) list in memory before the change.
    assert.equal((await send(two)).status, 201);
    assert.equal((await send(one)).status, 201);
    const added = await one.request('POST', '/api/v1/suppressions', { token: key, body: { handle: '+14155550199' } });
    assert.equal(added.status, 201);
    const refused = await send(two);
    assert.equal(refused.status, 422, 'refused on the other process as soon as the add answered');
    assert.equal(refused.body.error, 'recipient_opted_out');
    assert.equal((await two.request('DELETE', '/api/v1/suppressions/%2B14155550199', { token: key })).status, 204);
    assert.equal((await send(one)).status, 201, 'lifted on the first process as soon as the remove answered');
  },
);
