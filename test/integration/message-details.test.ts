import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';
import { WebhookReceivers } from '../support/webhook-receiver.ts';

/** What the dashboard's message page reads: the message itself, the deliveries of one event, the retry policy. */
eachBackend((backend) => {
  describe(`a message's details (${backend})`, () => {
    let t: TestApp;
    const receivers = new WebhookReceivers();

    before(async () => {
      t = await startTestApp(backend, {
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_MAX_ATTEMPTS: '5',
        WEBHOOK_RETRY_BASE_MS: '2000',
        WEBHOOK_RETRY_CAP_MS: '60000',
      });
    });
    after(async () => {
      await t.stop();
      await receivers.stopAll();
    });
    const call = (org: Org, method: string, path: string, body?: unknown, token = org.ownerToken) =>
      t.request(method, `/api/v1${path}`, { token, body });

    test("GET /messages/{id} answers the message to its own team only; another organization's is 404", async () => {
      const org = await signup(t, 'Details');
      const other = await signup(t, 'Elsewhere');
      const sent = await call(org, 'POST', '/messages', { to: '+14155550100', body: 'the whole message', priority: 7 });
      assert.equal(sent.status, 201, sent.text);
      const read = await call(org, 'GET', `/messages/${sent.body.id}`, undefined, await apiKey(t, org, 'viewer'));
      assert.equal(read.status, 200, read.text);
      assert.equal(read.body.to, '+14155550100');
      assert.equal(read.body.body, 'the whole message');
      assert.equal(read.body.priority, 7);
      assert.equal(read.body.conversationId, sent.body.conversationId);
      assert.deepEqual(read.body.attachments, []);
      assert.equal((await call(other, 'GET', `/messages/${sent.body.id}`)).status, 404);
      assert.equal((await call(org, 'GET', '/messages/msg_none')).status, 404);
    });

    test("deliveries filter by event id: one event's deliveries, none of another's", async () => {
      const org = await signup(t, 'Event filter');
      const r = await receivers.start();
      const made = await call(org, 'POST', '/webhooks', { url: r.url, events: ['message.queued'] });
      assert.equal(made.status, 201, made.text);
      const first = await call(org, 'POST', '/messages', { to: '+14155550101', body: 'one' });
      await call(org, 'POST', '/messages', { to: '+14155550102', body: 'two' });
      await r.waitFor(2);
      const events = await until('both events are listed', async () => {
        const page = (await call(org, 'GET', '/events?type=message.queued')).body;
        return page.data.length >= 2 && page.data;
      });
      const event = events.find((e: { data: { id: string } }) => e.data.id === first.body.id);
      const log = await until('the delivery is recorded', async () => {
        const page = (await call(org, 'GET', `/webhooks/${made.body.id}/deliveries?eventId=${event.id}`)).body;
        return page.data.length > 0 && page;
      });
      assert.equal(log.data.length, 1);
      assert.equal(log.data[0].eventId, event.id);
      const none = await call(org, 'GET', `/webhooks/${made.body.id}/deliveries?eventId=evt_none`);
      assert.equal(none.status, 200);
      assert.deepEqual(none.body.data, []);
    });

    test('the webhook retry policy is the one configured, for every role', async () => {
      const org = await signup(t, 'Retry policy');
      const policy = await call(org, 'GET', '/webhooks/retry-policy', undefined, await apiKey(t, org, 'viewer'));
      assert.equal(policy.status, 200, policy.text);
      assert.deepEqual(policy.body, { maxAttempts: 5, firstRetryMs: 2000, factor: 4, maxDelayMs: 60000, jitter: 0.2 });
    });
  });
});
