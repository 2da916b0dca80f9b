import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

/** The per-endpoint limit of this suite (WEBHOOK_CONCURRENCY), below the default so that the limit is what stops A. */
const perEndpoint = 3;

eachBackend((backend) => {
  describe(`one tenant's hanging endpoint and another's deliveries (${backend})`, () => {
    let t: TestApp;
    let receiver: WebhookReceiver;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let hungA = 0;
    let maxHungA = 0;

    before(async () => {
      t = await startTestApp(backend, {
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_CONCURRENCY: String(perEndpoint),
        // Longer than the test: A's attempts stay unanswered, not timed out and retried.
        WEBHOOK_TIMEOUT_MS: '120000',
      });
      receiver = await WebhookReceiver.start();
      // One server for both tenants (one origin, one connection pool): A's path never answers until the test ends.
      receiver.respond = async (d, res) => {
        if (d.path.endsWith('?tenant=a')) {
          hungA++;
          maxHungA = Math.max(maxHungA, hungA);
          await released;
          hungA--;
        }
        res.writeHead(204).end();
      };
    });
    after(async () => {
      release();
      await receiver.stop();
      await t.stop();
    });

    const call = (org: Org, method: string, path: string, body?: unknown) =>
      t.request(method, `/api/v1${path}`, { token: org.ownerToken, body });
    const hook = async (org: Org, tenant: string) => {
      const res = await call(org, 'POST', '/webhooks', {
        url: `${receiver.url}?tenant=${tenant}`,
        events: ['message.queued'],
      });
      assert.equal(res.status, 201, res.text);
      return res.body.id as string;
    };
    const send = async (org: Org, n: number) => {
      for (let i = 0; i < n; i++) {
        const res = await call(org, 'POST', '/messages', { to: '+14155550100', body: `m${i}` });
        assert.equal(res.status, 201, res.text);
      }
    };
    const statuses = async (org: Org, id: string) =>
      ((await call(org, 'GET', `/webhooks/${id}/deliveries?limit=100`)).body.data as Array<{ status: string }>).map(
        (d) => d.status,
      );

    test("B's events are all delivered while A's endpoint holds its own limit of attempts, unanswered", async () => {
      const a = await signup(t, 'Hanging');
      const b = await signup(t, 'Healthy');
      const hookA = await hook(a, 'a');
      const hookB = await hook(b, 'b');
      const eventsA = 4 * perEndpoint;
      const eventsB = 20;

      await send(a, eventsA);
      await until("A's endpoint holding its limit", async () => hungA === perEndpoint);
      await send(b, eventsB);
      await until("every one of B's deliveries recorded as succeeded", async () => {
        const s = await statuses(b, hookB);
        return s.length === eventsB && s.every((x) => x === 'succeeded');
      });

      // B is done; A is where it was: its limit in flight, unanswered, the rest waiting in its own queue.
      const fromB = receiver.received.filter((d) => d.path.endsWith('?tenant=b'));
      assert.equal(new Set(fromB.map((d) => d.headers['webhook-id'])).size, eventsB);
      const fromA = receiver.received.filter((d) => d.path.endsWith('?tenant=a'));
      assert.equal(fromA.length, perEndpoint, 'A was sent no more than its limit');
      assert.equal(hungA, perEndpoint, "A's attempts are still unanswered");
      assert.equal(maxHungA, perEndpoint, "A's attempts in flight never exceeded its per-endpoint limit");
      const stateA = await statuses(a, hookA);
      assert.equal(stateA.length, eventsA);
      assert.ok(
        stateA.every((s) => s === 'pending'),
        `A's deliveries are all pending: ${stateA.join(',')}`,
      );
    });
  });
});
