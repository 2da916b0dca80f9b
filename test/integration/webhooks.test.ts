import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';
import { verifySignature, WebhookReceivers, type ReceivedDelivery } from '../support/webhook-receiver.ts';

function verify(d: ReceivedDelivery, secret: string): unknown {
  const payload = verifySignature(d, secret);
  assert.equal(d.headers['content-type'], 'application/json');
  return payload;
}

eachBackend((backend) => {
  describe(`webhooks (${backend})`, () => {
    let t: TestApp;
    const logLines: string[] = [];
    const receivers = new WebhookReceivers();

    before(async () => {
      t = await startTestApp(backend, {
        WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_BASE_MS: '40', WEBHOOK_RETRY_CAP_MS: '400', WEBHOOK_SWEEP_MS: '500',
      }, { logLines });
    });
    after(async () => {
      await t.stop();
      await receivers.stopAll();
    });

    const receiver = receivers.start;
    const call = (org: Org, method: string, path: string, body?: unknown, token = org.ownerToken) => t.request(method, `/api/v1${path}`, { token, body });
    const hook = async (org: Org, body: Record<string, unknown>) => {
      const res = await call(org, 'POST', '/webhooks', body);
      assert.equal(res.status, 201, res.text);
      return res.body;
    };
    const send = async (org: Org, text = 'hello') => {
      const res = await call(org, 'POST', '/messages', { to: '+14155550100', body: text });
      assert.equal(res.status, 201, res.text);
      return res.body;
    };
    const deliveries = async (org: Org, id: string, query = '') => (await call(org, 'GET', `/webhooks/${id}/deliveries${query}`)).body;

    test('routes: create, read, update, toggle and delete; the secret is never returned; admins write, viewers read', async () => {
      const org = await signup(t, 'Hooks');
      const made = await hook(org, { url: 'https://93.184.216.34/hook', events: ['message.queued'], secret: 's3cret-value' });
      assert.deepEqual(Object.keys(made).sort(), ['createdAt', 'enabled', 'events', 'hasSecret', 'id', 'updatedAt', 'url']);
      assert.match(made.id, /^whk_/);
      assert.equal(made.enabled, true);
      assert.equal(made.hasSecret, true);
      const listed = await call(org, 'GET', '/webhooks');
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.body.data, [made]);
      assert.equal(listed.body.pagination.total, 1);
      assert.deepEqual((await call(org, 'GET', `/webhooks/${made.id}`)).body, made);
      const updated = await call(org, 'PUT', `/webhooks/${made.id}`, { events: ['message.sent', 'relay.online'], secret: null });
      assert.equal(updated.status, 200, updated.text);
      assert.deepEqual(updated.body.events, ['message.sent', 'relay.online']);
      assert.equal(updated.body.hasSecret, false);
      const off = await call(org, 'PATCH', `/webhooks/${made.id}/toggle`);
      assert.equal(off.status, 200);
      assert.equal(off.body.enabled, false);
      assert.equal((await call(org, 'PATCH', `/webhooks/${made.id}/toggle`)).body.enabled, true);

      const viewer = await apiKey(t, org, 'viewer');
      const member = await apiKey(t, org, 'member');
      const admin = await apiKey(t, org, 'admin');
      assert.equal((await call(org, 'GET', '/webhooks', undefined, viewer)).status, 200);
      assert.equal((await call(org, 'GET', `/webhooks/${made.id}/deliveries`, undefined, viewer)).status, 200);
      for (const token of [viewer, member]) {
        assert.equal((await call(org, 'POST', '/webhooks', { url: 'https://93.184.216.34/', events: ['message.sent'] }, token)).status, 403);
        assert.equal((await call(org, 'PUT', `/webhooks/${made.id}`, { events: ['message.sent'] }, token)).status, 403);
        assert.equal((await call(org, 'PATCH', `/webhooks/${made.id}/toggle`, undefined, token)).status, 403);
        assert.equal((await call(org, 'DELETE', `/webhooks/${made.id}`, undefined, token)).status, 403);
        assert.equal((await call(org, 'POST', `/webhooks/${made.id}/test`, undefined, token)).status, 403);
      }
      assert.equal((await call(org, 'PUT', `/webhooks/${made.id}`, { url: 'https://93.184.216.35/x' }, admin)).status, 200);
      assert.equal((await call(org, 'DELETE', `/webhooks/${made.id}`)).status, 204);
      assert.equal((await call(org, 'GET', `/webhooks/${made.id}`)).status, 404);
      assert.equal((await call(org, 'GET', `/webhooks/${made.id}/deliveries`)).status, 404);
      assert.equal((await call(org, 'DELETE', `/webhooks/${made.id}`)).status, 404);
    });

    test('bodies are validated: url, events, unknown fields, empty updates', async () => {
      const org = await signup(t, 'Strict');
      for (const [body, path] of [
        [{ events: ['message.sent'] }, '/url'],
        [{ url: 'ftp://93.184.216.34/x', events: ['message.sent'] }, '/url'],
        [{ url: 'not a url', events: ['message.sent'] }, '/url'],
        [{ url: 'https://93.184.216.34/', events: [] }, '/events'],
        [{ url: 'https://93.184.216.34/', events: ['message.exploded'] }, '/events/0'],
        [{ url: 'https://93.184.216.34/', events: ['message.sent', 'message.sent'] }, '/events'],
        [{ url: 'https://93.184.216.34/', events: ['message.sent'], secret: '' }, '/secret'],
        [{ url: 'https://93.184.216.34/', events: ['message.sent'], enabled: true }, '/enabled'],
      ] as const) {
        const res = await call(org, 'POST', '/webhooks', body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'validation_error');
        assert.equal(res.body.details[0].path, path, JSON.stringify(body));
      }
      const made = await hook(org, { url: 'https://93.184.216.34/', events: ['message.sent'] });
      assert.equal((await call(org, 'PUT', `/webhooks/${made.id}`, {})).status, 400);
      assert.equal((await call(org, 'GET', `/webhooks/${made.id}/deliveries?status=lost`)).status, 400);
    });

    test('the secret is encrypted at rest: absent from the stored document, the data files, every answer and every log line', async () => {
      const org = await signup(t, 'Secretive');
      const secret = `plain-secret-${Math.random().toString(36).slice(2)}`;
      const r = await receiver();
      const made = await hook(org, { url: r.url, events: ['message.queued'], secret });
      await send(org);
      await r.waitFor(1);
      const stored = await t.app.store.collection('webhooks').findOne({ tenantId: org.orgId }, { id: made.id });
      assert.ok(stored, 'the webhook is stored');
      assert.ok(typeof stored.secretSealed === 'string' && stored.secretSealed.startsWith('v1:'), 'a sealed secret is stored');
      assert.ok(!JSON.stringify(stored).includes(secret), 'the stored document does not contain the secret');
      assert.equal(t.app.webhooks.box.open(stored.secretSealed as string), secret, 'the key opens it again');
      if (backend === 'embedded') {
        for (const file of await readdir(t.config.dataDir)) {
          const text = await readFile(join(t.config.dataDir, file), 'latin1').catch(() => '');
          assert.ok(!text.includes(secret), `${file} does not contain the secret`);
        }
      }
      for (const path of ['/webhooks', `/webhooks/${made.id}`, `/webhooks/${made.id}/deliveries`]) assert.ok(!(await call(org, 'GET', path)).text.includes(secret), path);
      assert.ok(logLines.length > 0, 'log lines were captured');
      assert.ok(!logLines.some((l) => l.includes(secret)), 'no log line contains the secret');
    });

    test('message.queued is delivered signed, with the spec payload, verified by the reference library; the log records it', async () => {
      const org = await signup(t, 'Deliver');
      const r = await receiver();
      const other = await receiver();
      const secret = 'whsec-like but raw';
      const made = await hook(org, { url: r.url, events: ['message.queued'], secret });
      await hook(org, { url: other.url, events: ['message.sent'] });
      const msg = await send(org, 'webhook body');
      const [d] = await r.waitFor(1);
      const payload = verify(d!, secret) as any;
      assert.deepEqual(Object.keys(payload).sort(), ['data', 'event', 'timestamp']);
      assert.equal(payload.event, 'message.queued');
      assert.ok(!Number.isNaN(Date.parse(payload.timestamp)));
      assert.deepEqual(payload.data, { id: msg.id, to: '+14155550100', from: null, body: 'webhook body', status: 'queued', conversationId: msg.conversationId });
      assert.match(d!.headers['webhook-id']!, /^evt_/);
      const log = await until('the delivery is recorded', async () => {
        const page = await deliveries(org, made.id);
        return page.data[0]?.status === 'succeeded' && page;
      });
      assert.deepEqual(Object.keys(log.data[0]).sort(), ['attempts', 'createdAt', 'event', 'eventId', 'id', 'lastError', 'nextAttemptAt', 'responseStatus', 'status']);
      assert.equal(log.data[0].eventId, d!.headers['webhook-id']);
      assert.equal(log.data[0].attempts, 1);
      assert.equal(log.data[0].responseStatus, 200);
      assert.equal(log.data[0].nextAttemptAt, null);
      await sleep(300);
      assert.equal(other.received.length, 0, 'a webhook not subscribed to message.queued gets nothing');
      assert.equal(r.received.length, 1, 'delivered once');
      const events = (await call(org, 'GET', '/events')).body;
      assert.ok(events.data.some((e: any) => e.id === d!.headers['webhook-id']), 'the same event id is in the events API');
    });

    test('message.delivered and message.read go to the webhooks subscribed to them, once each, with deliveredAt and readAt', async (context) => {
      const org = await signup(t, 'Receipts');
      const r = await receiver();
      const other = await receiver();
      await hook(org, { url: r.url, events: ['message.delivered', 'message.read'], secret: 'receipts' });
      await hook(org, { url: other.url, events: ['message.sent'] });
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
      context.after(() => relay.close());
      await relay.connect();
      const msg = await send(org, 'tell me when it is read');
      await until('dispatched', async () => relay.sends.some((s) => s.messageId === msg.id));
      for (const status of ['delivered', 'delivered', 'read', 'read'] as const) await relay.report(msg.id, status);
      const got = await r.waitFor(2);
      const payloads = got.map((d) => verify(d, 'receipts') as any).sort((a, b) => a.event.localeCompare(b.event));
      assert.deepEqual(payloads.map((p) => p.event), ['message.delivered', 'message.read']);
      const status = (await call(org, 'GET', `/messages/${msg.id}/status`)).body;
      const data = { id: msg.id, to: '+14155550100', from: null, body: 'tell me when it is read', status: 'delivered', conversationId: msg.conversationId };
      assert.deepEqual(payloads[0].data, { ...data, deliveredAt: status.deliveredAt });
      assert.deepEqual(payloads[1].data, { ...data, readAt: status.readAt });
      const [sent] = await other.waitFor(1);
      assert.equal(sent!.json.event, 'message.sent', 'a delivered before any sent is sent first');
      await sleep(300);
      assert.equal(r.received.length, 2, 'the repeated reports are not delivered again');
      assert.equal(other.received.length, 1);
    });

    test('a failing endpoint is retried with growing delays under the same webhook-id, then the delivery succeeds; after 8 attempts it fails', async () => {
      const org = await signup(t, 'Retry');
      const r = await receiver();
      r.respond = (_d, res) => void res.writeHead(r.received.length <= 3 ? 500 : 204).end();
      const made = await hook(org, { url: r.url, events: ['message.queued'], secret: 'k' });
      await send(org);
      const got = await r.waitFor(4);
      assert.equal(new Set(got.map((d) => d.headers['webhook-id'])).size, 1, 'one webhook-id for every attempt');
      for (const d of got) verify(d, 'k');
      const gaps = got.slice(1).map((d, i) => d.at - got[i]!.at);
      // At least 40, 160, 400 (capped) ms less 20 % jitter; timers may fire later on a loaded machine, never earlier.
      assert.ok(gaps[0]! >= 32 && gaps[1]! >= 128 && gaps[2]! >= 320, `gaps ${gaps}`);
      const done = await until('success recorded', async () => {
        const d = (await deliveries(org, made.id)).data[0];
        return d?.status === 'succeeded' && d;
      });
      assert.equal(done.attempts, 4);
      assert.equal(done.responseStatus, 204);

      const broken = await receiver();
      broken.respond = (_d, res) => void res.writeHead(500).end();
      const failing = await hook(org, { url: broken.url, events: ['message.queued'] });
      await send(org);
      const failed = await until('the delivery fails for good', async () => {
        const d = (await deliveries(org, failing.id, '?status=failed')).data[0];
        return d && d;
      }, 20_000);
      assert.equal(failed.attempts, 8);
      assert.equal(failed.responseStatus, 500);
      assert.equal(failed.lastError, 'HTTP 500');
      assert.equal(failed.nextAttemptAt, null);
      await sleep(600);
      assert.equal(broken.received.length, 8, 'no ninth attempt');
      assert.equal((await deliveries(org, failing.id, '?status=pending')).data.length, 0);
    });

    test('Retry-After on 429 is honoured up to the cap; a redirect is not followed', async () => {
      const org = await signup(t, 'Polite');
      const r = await receiver();
      r.respond = (_d, res) => void (r.received.length === 1 ? res.writeHead(429, { 'retry-after': '1' }).end() : res.writeHead(200).end());
      await hook(org, { url: r.url, events: ['message.queued'] });
      await send(org);
      const got = await r.waitFor(2);
      // Retry-After: 1 is honoured up to the cap (400 ms here), against a first backoff of 40 ms ±20 %.
      assert.ok(got[1]!.at - got[0]!.at >= 350, `waited ${got[1]!.at - got[0]!.at} ms`);

      const target = await receiver();
      const redirecting = await receiver();
      redirecting.respond = (_d, res) => void res.writeHead(302, { location: target.url }).end();
      const made = await hook(org, { url: redirecting.url, events: ['message.queued'] });
      await send(org);
      await redirecting.waitFor(2);
      const d = (await deliveries(org, made.id)).data[0];
      assert.equal(d.responseStatus, 302);
      assert.equal(target.received.length, 0, 'the redirect target is never called');
    });

    test('410 Gone disables the webhook; events while disabled are never delivered; enabling again delivers new ones', async () => {
      const org = await signup(t, 'Gone');
      const r = await receiver();
      r.respond = (_d, res) => void res.writeHead(r.received.length === 1 ? 410 : 200).end();
      const made = await hook(org, { url: r.url, events: ['message.queued'] });
      await send(org, 'first');
      await r.waitFor(1);
      await until('disabled', async () => (await call(org, 'GET', `/webhooks/${made.id}`)).body.enabled === false);
      const d = (await deliveries(org, made.id)).data[0];
      assert.equal(d.status, 'failed');
      assert.equal(d.attempts, 1);
      assert.equal(d.responseStatus, 410);
      await send(org, 'while disabled');
      await sleep(500);
      assert.equal(r.received.length, 1, 'nothing is sent to a disabled webhook');
      assert.equal((await call(org, 'PATCH', `/webhooks/${made.id}/toggle`)).body.enabled, true);
      await send(org, 'after enabling');
      const got = await r.waitFor(2);
      await sleep(300);
      assert.equal(got.length, 2);
      assert.equal(got[1]!.json.data.body, 'after enabling');
    });

    test('after DELETE no new attempt starts', async () => {
      const org = await signup(t, 'Deleted');
      const r = await receiver();
      r.respond = (_d, res) => void res.writeHead(503).end();
      const made = await hook(org, { url: r.url, events: ['message.queued'] });
      await send(org);
      await r.waitFor(2);
      assert.equal((await call(org, 'DELETE', `/webhooks/${made.id}`)).status, 204);
      const seen = r.received.length;
      await sleep(1_500);
      assert.ok(r.received.length <= seen + 0, `attempts after delete: ${r.received.length - seen}`);
    });

    test('a slow endpoint holds only its own webhook, which runs 8 deliveries at once', async () => {
      const org = await signup(t, 'Slow');
      const slow = await receiver();
      const fast = await receiver();
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      slow.respond = async (_d, res) => {
        await released;
        res.writeHead(200).end();
      };
      await hook(org, { url: slow.url, events: ['message.queued'] });
      await hook(org, { url: fast.url, events: ['message.queued'] });
      for (let i = 0; i < 12; i++) await send(org, `m${i}`);
      await fast.waitFor(12, 5_000);
      await slow.waitFor(8);
      await sleep(300);
      assert.equal(slow.maxInFlight, 8, 'WEBHOOK_CONCURRENCY (8) attempts in flight at once');
      assert.equal(slow.received.length, 8, 'the ninth waits for a slot');
      release();
      await slow.waitFor(12);
    });

    test('test deliveries and manual retries are signed with the current secret, keep the webhook-id and are logged', async () => {
      const org = await signup(t, 'Tester');
      const r = await receiver();
      r.respond = (_d, res) => void res.writeHead(r.received.length === 1 ? 200 : 500).end();
      const made = await hook(org, { url: r.url, events: ['message.sent'], secret: 'first secret' });
      const tested = await call(org, 'POST', `/webhooks/${made.id}/test`);
      assert.equal(tested.status, 200, tested.text);
      assert.equal(tested.body.event, 'webhook.test');
      assert.equal(tested.body.status, 'succeeded');
      const [d] = await r.waitFor(1);
      assert.equal((verify(d!, 'first secret') as any).event, 'webhook.test');
      const failedTest = await call(org, 'POST', `/webhooks/${made.id}/test`);
      assert.equal(failedTest.body.status, 'failed');
      assert.equal(failedTest.body.responseStatus, 500);
      const logged = await deliveries(org, made.id, '?event=webhook.test');
      assert.equal(logged.data.length, 2);

      await call(org, 'PUT', `/webhooks/${made.id}`, { secret: 'second secret' });
      r.respond = (_d, res) => void res.writeHead(200).end();
      await sleep(1_100); // a new second, so the retry's timestamp differs
      const retried = await call(org, 'POST', `/webhooks/${made.id}/deliveries/${failedTest.body.id}/retry`);
      assert.equal(retried.status, 200, retried.text);
      assert.equal(retried.body.status, 'succeeded');
      assert.equal(retried.body.attempts, 2);
      const [, second, third] = await r.waitFor(3);
      verify(third!, 'second secret');
      assert.equal(third!.headers['webhook-id'], second!.headers['webhook-id']);
      assert.notEqual(third!.headers['webhook-timestamp'], second!.headers['webhook-timestamp']);
      assert.equal((await call(org, 'POST', `/webhooks/${made.id}/deliveries/whd_nope/retry`)).status, 404);
    });

    test("organizations are apart: B gets 404 on A's webhooks and deliveries and never receives A's events", async () => {
      const a = await signup(t, 'A');
      const b = await signup(t, 'B');
      const ra = await receiver();
      const rb = await receiver();
      const hookA = await hook(a, { url: ra.url, events: ['message.queued'] });
      await hook(b, { url: rb.url, events: ['message.queued'] });
      await send(a);
      await ra.waitFor(1);
      const dA = await until('A logged', async () => (await deliveries(a, hookA.id)).data[0]);
      for (const [method, path] of [
        ['GET', `/webhooks/${hookA.id}`], ['PUT', `/webhooks/${hookA.id}`], ['DELETE', `/webhooks/${hookA.id}`],
        ['PATCH', `/webhooks/${hookA.id}/toggle`], ['GET', `/webhooks/${hookA.id}/deliveries`], ['POST', `/webhooks/${hookA.id}/test`],
        ['POST', `/webhooks/${hookA.id}/deliveries/${dA.id}/retry`],
      ] as const) {
        const res = await call(b, method, path, method === 'PUT' ? { events: ['message.sent'] } : undefined);
        assert.equal(res.status, 404, `${method} ${path}`);
      }
      assert.deepEqual((await call(b, 'GET', '/webhooks')).body.data.map((h: any) => h.url), [rb.url]);
      assert.ok(!(await call(b, 'GET', '/events')).body.data.some((e: any) => e.id === dA.eventId), "B's events API does not show A's");
      await sleep(300);
      assert.equal(rb.received.length, 0, "B's webhook never receives A's event");
      assert.equal(ra.received.length, 1, 'the test delivery to A was not made by B');
    });

    test('metrics count attempts by outcome, with no per-webhook label', async () => {
      const text = (await t.request('GET', '/metrics')).text;
      assert.match(text, /relaybox_webhook_deliveries_total\{outcome="succeeded"\} [1-9]/);
      assert.match(text, /relaybox_webhook_deliveries_total\{outcome="retrying"\} [1-9]/);
      assert.match(text, /relaybox_webhook_delivery_duration_seconds_count [1-9]/);
      assert.match(text, /relaybox_webhook_pending_deliveries \d/);
      // The delivery SLO's clock stops at each delivery's first attempt only: retries are not observed again.
      const value = (pattern: RegExp) => [...text.matchAll(pattern)].reduce((sum, m) => sum + Number(m[1]), 0);
      const first = value(/^relaybox_webhook_first_attempt_delay_seconds_count (\d+)$/gm);
      const attempts = value(/^relaybox_webhook_deliveries_total\{outcome="\w+"\} (\d+)$/gm);
      assert.ok(first >= 1 && first < attempts, `${first} first attempts among ${attempts}`);
      assert.ok(!/relaybox_webhook_[a-z_]+\{[^}]*(url|webhook)/.test(text), 'no per-webhook or per-URL label');
    });
  });

  describe(`webhook address guard at create and update (${backend})`, () => {
    let t: TestApp;
    let org: Org;
    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Guarded');
    });
    after(() => t.stop());

    test('loopback, private, link-local, CGNAT, multicast, reserved, unspecified, special-purpose and metadata addresses and names are refused in every notation', async () => {
      const refused = [
        'http://127.0.0.1/', 'http://2130706433/', 'http://0x7f000001/', 'http://0177.0.0.1/', 'http://127.1/', 'http://[::1]/',
        'http://[::ffff:127.0.0.1]/', 'http://[::ffff:7f00:1]/', 'http://[0:0:0:0:0:ffff:127.0.0.1]/', 'http://[::127.0.0.1]/',
        'http://10.0.0.1/', 'http://172.16.5.4/', 'http://192.168.1.1/', 'http://[::ffff:192.168.1.1]/', 'http://[fc00::1]/', 'http://[fd12:3456::1]/',
        'http://169.254.169.254/latest/meta-data', 'http://[fe80::1]/', 'http://[fd00:ec2::254]/', 'http://100.100.100.200/',
        'http://100.64.0.1/', 'http://224.0.0.1/', 'http://[ff02::1]/', 'http://240.0.0.1/', 'http://255.255.255.255/', 'http://192.0.2.1/',
        'http://198.18.0.1/', 'http://0.0.0.0/', 'http://0/', 'http://[::]/', 'http://[64:ff9b::7f00:1]/', 'http://[2002:7f00:1::]/',
        'http://localhost/', 'https://localhost:8443/x', 'file:///etc/passwd', 'gopher://93.184.216.34/',
        'http://168.63.129.16/machine?comp=goalstate', 'http://[100:0:0:1::1]/', 'http://[2001:db8::1]/', 'http://[3fff::1]/', 'http://192.0.0.9/',
        'http://metadata.google.internal/computeMetadata/v1/', 'http://metadata.goog/', 'http://instance-data/latest/', 'http://printer.local/',
      ];
      for (const url of refused) {
        const res = await t.request('POST', '/api/v1/webhooks', { token: org.ownerToken, body: { url, events: ['message.sent'] } });
        assert.equal(res.status, 400, `${url}: ${res.text}`);
        assert.equal(res.body.error, 'validation_error');
        assert.equal(res.body.details[0].path, '/url');
      }
      const ok = await t.request('POST', '/api/v1/webhooks', { token: org.ownerToken, body: { url: 'https://93.184.216.34/hook', events: ['message.sent'] } });
      assert.equal(ok.status, 201, ok.text);
      const moved = await t.request('PUT', `/api/v1/webhooks/${ok.body.id}`, { token: org.ownerToken, body: { url: 'http://[::ffff:10.1.2.3]/' } });
      assert.equal(moved.status, 400);
      assert.equal(moved.body.details[0].path, '/url');
    });
  });
});
