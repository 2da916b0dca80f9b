import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';
import { verifySignature, WebhookReceivers, type ReceivedDelivery } from '../support/webhook-receiver.ts';

function verify(d: ReceivedDelivery, secret: string, format: 'whsec' | 'raw' = 'raw'): unknown {
  const payload = verifySignature(d, secret, format);
  assert.equal(d.headers['content-type'], 'application/json');
  return payload;
}

eachBackend((backend) => {
  describe(`webhooks (${backend})`, () => {
    let t: TestApp;
    const logLines: string[] = [];
    // Long enough for a delivery and a test delivery on a loaded machine, short enough to wait out.
    const graceMs = 5_000;
    const receivers = new WebhookReceivers();

    before(async () => {
      t = await startTestApp(
        backend,
        {
          WEBHOOK_ALLOW_PRIVATE: 'true',
          WEBHOOK_RETRY_BASE_MS: '40',
          WEBHOOK_RETRY_CAP_MS: '400',
          WEBHOOK_SWEEP_MS: '500',
          WEBHOOK_SECRET_GRACE_MS: String(graceMs),
        },
        { logLines },
      );
    });
    after(async () => {
      await t.stop();
      await receivers.stopAll();
    });

    const receiver = receivers.start;
    const call = (org: Org, method: string, path: string, body?: unknown, token = org.ownerToken) =>
      t.request(method, `/api/v1${path}`, { token, body });
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
    const deliveries = async (org: Org, id: string, query = '') =>
      (await call(org, 'GET', `/webhooks/${id}/deliveries${query}`)).body;

    test('routes: create, read, update, toggle and delete; the secret is never returned; admins write, viewers read', async () => {
      const org = await signup(t, 'Hooks');
      const made = await hook(org, {
        url: 'https://93.184.216.34/hook',
        events: ['message.queued'],
        secret: 's3cret-value',
      });
      assert.deepEqual(Object.keys(made).sort(), [
        'createdAt',
        'enabled',
        'events',
        'hasSecret',
        'id',
        'updatedAt',
        'url',
      ]);
      assert.match(made.id, /^whk_/);
      assert.equal(made.enabled, true);
      assert.equal(made.hasSecret, true);
      const listed = await call(org, 'GET', '/webhooks');
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.body.data, [made]);
      assert.equal(listed.body.pagination.total, 1);
      assert.deepEqual((await call(org, 'GET', `/webhooks/${made.id}`)).body, made);
      const updated = await call(org, 'PUT', `/webhooks/${made.id}`, {
        events: ['message.sent', 'relay.online'],
        secret: null,
      });
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
        assert.equal(
          (await call(org, 'POST', '/webhooks', { url: 'https://93.184.216.34/', events: ['message.sent'] }, token))
            .status,
          403,
        );
        assert.equal((await call(org, 'PUT', `/webhooks/${made.id}`, { events: ['message.sent'] }, token)).status, 403);
        assert.equal((await call(org, 'PATCH', `/webhooks/${made.id}/toggle`, undefined, token)).status, 403);
        assert.equal((await call(org, 'DELETE', `/webhooks/${made.id}`, undefined, token)).status, 403);
        assert.equal((await call(org, 'POST', `/webhooks/${made.id}/test`, undefined, token)).status, 403);
        assert.equal((await call(org, 'POST', `/webhooks/${made.id}/rotate-secret`, undefined, token)).status, 403);
      }
      assert.equal(
        (await call(org, 'GET', `/webhooks/${made.id}`)).body.hasSecret,
        false,
        'no rotation was made by a viewer or member',
      );
      assert.equal(
        (await call(org, 'PUT', `/webhooks/${made.id}`, { url: 'https://93.184.216.35/x' }, admin)).status,
        200,
      );
      const rotated = await call(org, 'POST', `/webhooks/${made.id}/rotate-secret`, undefined, admin);
      assert.equal(rotated.status, 200, rotated.text);
      assert.match(rotated.body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.equal(
        rotated.body.previousSecretExpiresAt,
        null,
        'a webhook without a secret has nothing to keep signing',
      );
      assert.equal(rotated.body.hasSecret, true);
      assert.equal(rotated.body.id, made.id);
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
      assert.ok(
        typeof stored.secretSealed === 'string' && stored.secretSealed.startsWith('v1:'),
        'a sealed secret is stored',
      );
      assert.ok(!JSON.stringify(stored).includes(secret), 'the stored document does not contain the secret');
      assert.equal(t.app.webhooks.box.open(stored.secretSealed as string), secret, 'the key opens it again');
      if (backend === 'embedded') {
        for (const file of await readdir(t.config.dataDir)) {
          const text = await readFile(join(t.config.dataDir, file), 'latin1').catch(() => '');
          assert.ok(!text.includes(secret), `${file} does not contain the secret`);
        }
      }
      for (const path of ['/webhooks', `/webhooks/${made.id}`, `/webhooks/${made.id}/deliveries`])
        assert.ok(!(await call(org, 'GET', path)).text.includes(secret), path);
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
      assert.deepEqual(Object.keys(payload).sort(), ['data', 'event', 'livemode', 'timestamp']);
      assert.equal(payload.livemode, true, 'live data');
      assert.equal(payload.event, 'message.queued');
      assert.ok(!Number.isNaN(Date.parse(payload.timestamp)));
      assert.deepEqual(payload.data, {
        id: msg.id,
        to: '+14155550100',
        from: null,
        body: 'webhook body',
        status: 'queued',
        conversationId: msg.conversationId,
      });
      assert.match(d!.headers['webhook-id']!, /^evt_/);
      const log = await until('the delivery is recorded', async () => {
        const page = await deliveries(org, made.id);
        return page.data[0]?.status === 'succeeded' && page;
      });
      assert.deepEqual(Object.keys(log.data[0]).sort(), [
        'attempts',
        'createdAt',
        'event',
        'eventId',
        'id',
        'lastError',
        'nextAttemptAt',
        'responseStatus',
        'status',
      ]);
      assert.equal(log.data[0].eventId, d!.headers['webhook-id']);
      assert.equal(log.data[0].attempts, 1);
      assert.equal(log.data[0].responseStatus, 200);
      assert.equal(log.data[0].nextAttemptAt, null);
      await sleep(300);
      assert.equal(other.received.length, 0, 'a webhook not subscribed to message.queued gets nothing');
      assert.equal(r.received.length, 1, 'delivered once');
      const events = (await call(org, 'GET', '/events')).body;
      assert.ok(
        events.data.some((e: any) => e.id === d!.headers['webhook-id']),
        'the same event id is in the events API',
      );
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
      assert.deepEqual(
        payloads.map((p) => p.event),
        ['message.delivered', 'message.read'],
      );
      const status = (await call(org, 'GET', `/messages/${msg.id}/status`)).body;
      const data = {
        id: msg.id,
        to: '+14155550100',
        from: null,
        body: 'tell me when it is read',
        status: 'delivered',
        conversationId: msg.conversationId,
      };
      assert.deepEqual(payloads[0].data, { ...data, deliveredAt: status.deliveredAt });
      assert.deepEqual(payloads[1].data, { ...data, readAt: status.readAt });
      const [sent] = await other.waitFor(1);
      assert.equal(sent!.json.event, 'message.sent', 'a delivered before any sent is sent first');
      await sleep(300);
      assert.equal(r.received.length, 2, 'the repeated reports are not delivered again');
      assert.equal(other.received.length, 1);
    });

    test('message.checkpoint goes only to a webhook that names it: the hand-over and each agent hop, in order, once each', async (context) => {
      const org = await signup(t, 'Hops');
      const r = await receiver();
      const other = await receiver();
      await hook(org, { url: r.url, events: ['message.checkpoint'], secret: 'hops' });
      await hook(org, { url: other.url, events: ['message.sent', 'message.delivered'] });
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
      context.after(() => relay.close());
      await relay.connect();
      const msg = await send(org, 'where is it now');
      await until('dispatched', async () => relay.sends.some((s) => s.messageId === msg.id));
      const at = (ms: number) => new Date(Date.now() + ms).toISOString();
      const seen = { hop: 'relay_received' as const, at: at(0) };
      const app = { hop: 'handed_to_app' as const, at: at(1) };
      const db = { hop: 'seen_in_database' as const, at: at(2) };
      await relay.report(msg.id, 'sent', undefined, relay.lastAttempt(msg.id), [seen, app]);
      await relay.report(msg.id, 'sent', undefined, relay.lastAttempt(msg.id), [seen, app]);
      await relay.report(msg.id, 'delivered', undefined, relay.lastAttempt(msg.id), [seen, app, db]);
      const got = (await r.waitFor(4)).map((d) => verify(d, 'hops') as any);
      assert.ok(got.every((p) => p.event === 'message.checkpoint'));
      const byHop = new Map(got.map((p) => [p.data.hop, p.data]));
      assert.deepEqual([...byHop.keys()].sort(), [
        'handed_to_app',
        'handed_to_relay',
        'relay_received',
        'seen_in_database',
      ]);
      const status = (await call(org, 'GET', `/messages/${msg.id}/status`)).body;
      for (const c of status.checkpoints.filter((c: { hop: string }) => byHop.has(c.hop))) {
        assert.equal(byHop.get(c.hop).at, c.at, `${c.hop} as the status record has it`);
      }
      assert.deepEqual(
        { ...byHop.get('relay_received'), hop: undefined, at: undefined },
        {
          id: msg.id,
          to: '+14155550100',
          from: null,
          body: 'where is it now',
          status: 'processing',
          conversationId: msg.conversationId,
          attempt: 1,
          hop: undefined,
          at: undefined,
        },
      );
      await other.waitFor(2);
      await sleep(300);
      assert.equal(r.received.length, 4, 'a repeated report makes no second checkpoint');
      assert.deepEqual(
        other.received.map((d) => d.json.event).sort(),
        ['message.delivered', 'message.sent'],
        'a webhook that does not name message.checkpoint gets none',
      );
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
      const failed = await until(
        'the delivery fails for good',
        async () => {
          const d = (await deliveries(org, failing.id, '?status=failed')).data[0];
          return d && d;
        },
        20_000,
      );
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
      r.respond = (_d, res) =>
        void (r.received.length === 1 ? res.writeHead(429, { 'retry-after': '1' }).end() : res.writeHead(200).end());
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

    test('a whsec_ secret given at create or update signs with its decoded bytes: the reference library verifies with its default options; an invalid one is 400', async () => {
      const org = await signup(t, 'Standard');
      const r = await receiver();
      const secret = `whsec_${randomBytes(24).toString('base64')}`;
      const made = await hook(org, { url: r.url, events: ['message.queued'], secret });
      await send(org);
      const [d] = await r.waitFor(1);
      assert.equal((verify(d!, secret, 'whsec') as any).event, 'message.queued');
      assert.throws(
        () => new Webhook(secret, { format: 'raw' }).verify(d!.body, d!.headers),
        'the key is the decoded bytes, not the text',
      );
      // A secret set with PUT replaces the current one at once, and ends a rotation's grace period.
      assert.notEqual(
        (await call(org, 'POST', `/webhooks/${made.id}/rotate-secret`)).body.previousSecretExpiresAt,
        null,
      );
      const replaced = `whsec_${randomBytes(32).toString('base64')}`;
      assert.equal((await call(org, 'PUT', `/webhooks/${made.id}`, { secret: replaced })).status, 200);
      assert.equal((await call(org, 'POST', `/webhooks/${made.id}/test`)).body.status, 'succeeded');
      const second = (await r.waitFor(2))[1]!;
      verify(second, replaced, 'whsec');
      assert.equal(second.headers['webhook-signature']!.split(' ').length, 1);
      assert.throws(
        () => new Webhook(secret).verify(second.body, second.headers),
        'the secret before the rotation no longer signs',
      );
      for (const bad of [
        'whsec_',
        'whsec_not base64!',
        `whsec_${randomBytes(16).toString('base64')}`,
        `whsec_${randomBytes(32).toString('base64url')}`,
      ]) {
        const created = await call(org, 'POST', '/webhooks', { url: r.url, events: ['message.queued'], secret: bad });
        const updated = await call(org, 'PUT', `/webhooks/${made.id}`, { secret: bad });
        for (const res of [created, updated]) {
          assert.equal(res.status, 400, `${bad}: ${res.text}`);
          assert.equal(res.body.error, 'validation_error');
          assert.equal(res.body.details[0].path, '/secret');
          if (bad.length > 'whsec_'.length)
            assert.ok(!res.text.includes(bad.slice('whsec_'.length)), 'the answer does not repeat the value');
        }
      }
      assert.equal((await call(org, 'GET', '/webhooks')).body.data.length, 1, 'nothing was created');
    });

    test('a secret stored before whsec_ keys keeps signing with its UTF-8 bytes, even one that starts with whsec_', async () => {
      const org = await signup(t, 'Legacy');
      const r = await receiver();
      const secret = `whsec_${randomBytes(24).toString('base64')}`;
      const made = await hook(org, { url: r.url, events: ['message.queued'], secret });
      // A webhook stored before whsec_ keys has no secretFormat.
      const webhooks = t.app.store.collection('webhooks');
      assert.equal((await webhooks.findOne({ tenantId: org.orgId }, { id: made.id }))?.secretFormat, 'whsec');
      await webhooks.updateOne({ tenantId: org.orgId }, { id: made.id }, { $unset: { secretFormat: '' } });
      assert.equal((await call(org, 'POST', `/webhooks/${made.id}/test`)).body.status, 'succeeded');
      const [d] = await r.waitFor(1);
      verify(d!, secret, 'raw');
      assert.throws(() => new Webhook(secret).verify(d!.body, d!.headers));
    });

    test('rotate-secret: a new whsec_ key answered once; for the grace period deliveries, test deliveries and retries verify with the old and the new key, then with the new one only', async () => {
      const org = await signup(t, 'Rotation');
      const r = await receiver();
      const old = `raw-before-rotation-${Math.random().toString(36).slice(2)}`;
      const made = await hook(org, { url: r.url, events: ['message.queued'], secret: old });
      const asked = Date.now();
      const rotated = await call(org, 'POST', `/webhooks/${made.id}/rotate-secret`);
      assert.equal(rotated.status, 200, rotated.text);
      const { secret, previousSecretExpiresAt, ...view } = rotated.body;
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.deepEqual(view, { ...made, updatedAt: view.updatedAt });
      const until = Date.parse(previousSecretExpiresAt);
      assert.ok(until >= asked + graceMs && until <= Date.now() + graceMs, previousSecretExpiresAt);

      // Within the grace period: an event's delivery, a test delivery (failed) and its manual retry carry both signatures.
      r.respond = (_d, res) => void res.writeHead(r.received.length === 2 ? 500 : 200).end();
      await send(org);
      await r.waitFor(1);
      const tested = await call(org, 'POST', `/webhooks/${made.id}/test`);
      assert.equal(tested.body.status, 'failed', tested.text);
      assert.equal(
        (await call(org, 'POST', `/webhooks/${made.id}/deliveries/${tested.body.id}/retry`)).body.status,
        'succeeded',
      );
      const during = (await r.waitFor(3)).slice(0, 3);
      for (const d of during) {
        assert.ok(Number(d.headers['webhook-timestamp']) * 1000 < until, 'made within the grace period');
        assert.equal(d.headers['webhook-signature']!.split(' ').length, 2);
        verify(d, secret, 'whsec');
        assert.deepEqual(
          new Webhook(old, { format: 'raw' }).verify(d.body, d.headers),
          d.json,
          'the old key verifies too',
        );
      }

      // After it: the new key only, and the old secret is no longer stored.
      await sleep(until - Date.now() + 100);
      await send(org);
      await r.waitFor(4);
      await call(org, 'POST', `/webhooks/${made.id}/test`);
      const later = (await r.waitFor(5)).slice(3, 5);
      for (const d of later) {
        assert.equal(d.headers['webhook-signature']!.split(' ').length, 1);
        verify(d, secret, 'whsec');
        assert.throws(
          () => new Webhook(old, { format: 'raw' }).verify(d.body, d.headers),
          'the old key no longer verifies',
        );
      }
      const stored = await t.app.store.collection('webhooks').findOne({ tenantId: org.orgId }, { id: made.id });
      assert.equal(stored?.previousSecret, null, 'the previous secret is dropped');
      assert.ok(!JSON.stringify(stored).includes(secret.slice('whsec_'.length)), 'the new secret is stored sealed');

      // Never answered again, never logged.
      const again = await call(org, 'POST', `/webhooks/${made.id}/rotate-secret`);
      assert.notEqual(again.body.secret, secret);
      for (const res of [
        again,
        await call(org, 'GET', '/webhooks'),
        await call(org, 'GET', `/webhooks/${made.id}`),
        await call(org, 'GET', `/webhooks/${made.id}/deliveries`),
      ]) {
        assert.equal(res.status, 200, res.text);
        assert.ok(!res.text.includes(secret.slice('whsec_'.length)), res.text);
      }
      assert.ok(logLines.length > 0, 'log lines were captured');
      assert.ok(
        !logLines.some((l) => l.includes(secret.slice('whsec_'.length)) || l.includes(old)),
        'no log line holds a secret',
      );
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
        ['GET', `/webhooks/${hookA.id}`],
        ['PUT', `/webhooks/${hookA.id}`],
        ['DELETE', `/webhooks/${hookA.id}`],
        ['PATCH', `/webhooks/${hookA.id}/toggle`],
        ['GET', `/webhooks/${hookA.id}/deliveries`],
        ['POST', `/webhooks/${hookA.id}/test`],
        ['POST', `/webhooks/${hookA.id}/deliveries/${dA.id}/retry`],
        ['POST', `/webhooks/${hookA.id}/rotate-secret`],
      ] as const) {
        const res = await call(b, method, path, method === 'PUT' ? { events: ['message.sent'] } : undefined);
        assert.equal(res.status, 404, `${method} ${path}`);
        assert.ok(!('secret' in res.body), `${method} ${path} answers no secret`);
      }
      assert.equal(
        (await call(a, 'GET', `/webhooks/${hookA.id}`)).body.hasSecret,
        false,
        "B's rotation left A's webhook as it was",
      );
      assert.deepEqual(
        (await call(b, 'GET', '/webhooks')).body.data.map((h: any) => h.url),
        [rb.url],
      );
      assert.ok(
        !(await call(b, 'GET', '/events')).body.data.some((e: any) => e.id === dA.eventId),
        "B's events API does not show A's",
      );
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
        'http://127.0.0.1/',
        'http://2130706433/',
        'http://0x7f000001/',
        'http://0177.0.0.1/',
        'http://127.1/',
        'http://[::1]/',
        'http://[::ffff:127.0.0.1]/',
        'http://[::ffff:7f00:1]/',
        'http://[0:0:0:0:0:ffff:127.0.0.1]/',
        'http://[::127.0.0.1]/',
        'http://10.0.0.1/',
        'http://172.16.5.4/',
        'http://192.168.1.1/',
        'http://[::ffff:192.168.1.1]/',
        'http://[fc00::1]/',
        'http://[fd12:3456::1]/',
        'http://169.254.169.254/latest/meta-data',
        'http://[fe80::1]/',
        'http://[fd00:ec2::254]/',
        'http://100.100.100.200/',
        'http://100.64.0.1/',
        'http://224.0.0.1/',
        'http://[ff02::1]/',
        'http://240.0.0.1/',
        'http://255.255.255.255/',
        'http://192.0.2.1/',
        'http://198.18.0.1/',
        'http://0.0.0.0/',
        'http://0/',
        'http://[::]/',
        'http://[64:ff9b::7f00:1]/',
        'http://[2002:7f00:1::]/',
        'http://localhost/',
        'https://localhost:8443/x',
        'file:///etc/passwd',
        'gopher://93.184.216.34/',
        'http://168.63.129.16/machine?comp=goalstate',
        'http://[100:0:0:1::1]/',
        'http://[2001:db8::1]/',
        'http://[3fff::1]/',
        'http://192.0.0.9/',
        'http://metadata.google.internal/computeMetadata/v1/',
        'http://metadata.goog/',
        'http://instance-data/latest/',
        'http://printer.local/',
      ];
      for (const url of refused) {
        const res = await t.request('POST', '/api/v1/webhooks', {
          token: org.ownerToken,
          body: { url, events: ['message.sent'] },
        });
        assert.equal(res.status, 400, `${url}: ${res.text}`);
        assert.equal(res.body.error, 'validation_error');
        assert.equal(res.body.details[0].path, '/url');
        // What the address is can be allowed by the operator, and the refusal says how; a scheme cannot.
        const scheme = !/^https?:/.test(url);
        assert.equal(/WEBHOOK_ALLOW_PRIVATE=true/.test(res.body.detail), !scheme, `${url}: ${res.body.detail}`);
        assert.equal(/WEBHOOK_ALLOW_PRIVATE=true/.test(res.body.details[0].message), !scheme, url);
      }
      const ok = await t.request('POST', '/api/v1/webhooks', {
        token: org.ownerToken,
        body: { url: 'https://93.184.216.34/hook', events: ['message.sent'] },
      });
      assert.equal(ok.status, 201, ok.text);
      const moved = await t.request('PUT', `/api/v1/webhooks/${ok.body.id}`, {
        token: org.ownerToken,
        body: { url: 'http://[::ffff:10.1.2.3]/' },
      });
      assert.equal(moved.status, 400);
      assert.equal(moved.body.details[0].path, '/url');
    });
  });
});
