import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { relayProtocol } from '../../src/actors/relay/protocol.ts';
import { actorClient } from '../../src/runtime/actor.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { waitFor } from './runtime-contract.ts';

const fastRetries = { MESSAGE_RETRY_BASE_MS: '150', TENANT_SWEEP_MS: '300' };
const minute = 60_000;
const number = '+14155550111';

interface Bucket {
  start: string;
  accepted: number;
  sent: number;
  delivered: number;
  read: number;
  failed: number;
  received: number;
  latency: Record<'sent' | 'delivered', { p50: number | null; p95: number | null; p99: number | null }>;
}
const outcomes = ['accepted', 'sent', 'delivered', 'read', 'failed', 'received'] as const;
const totals = (buckets: Bucket[]) =>
  Object.fromEntries(outcomes.map((o) => [o, buckets.reduce((sum, b) => sum + b[o], 0)]));
const busy = (buckets: Bucket[]) => buckets.filter((b) => outcomes.some((o) => b[o] > 0));

/** A reported percentile is its histogram bin's upper bound: at or above the true latency, less than 9 % (or 1 ms) over it. */
function near(actual: number | null, ms: number, what: string): void {
  assert.ok(
    actual !== null && actual >= ms && actual <= Math.ceil(ms * 1.091) + 1,
    `${what}: ${actual} for a true ${ms} ms`,
  );
}

function messagesTotal(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^relaybox_messages_total\{outcome="(\w+)"\} (\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

eachBackend((backend) => {
  describe(`message statistics (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];

    before(async () => {
      t = await startTestApp(backend, fastRetries);
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });

    const stats = (token: string, query: string) => t.request('GET', `/api/v1/stats/messages?${query}`, { token });
    const range = (fromMs: number, toMs: number, interval: string, extra = '') =>
      `from=${new Date(fromMs).toISOString()}&to=${new Date(toMs).toISOString()}&interval=${interval}${extra}`;

    test("a send's outcomes and latencies land in the bucket of their write: zero-filled, by number and by relay, not in another organization", async () => {
      const org = await signup(t);
      const other = await signup(t);
      const started = Date.now();
      const metricsBefore = messagesTotal((await t.request('GET', '/metrics')).text);
      assert.equal(
        (await t.request('POST', '/api/v1/phone-numbers', { token: org.ownerToken, body: { number } })).status,
        201,
      );
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 10, phoneNumbers: [number] });
      relays.push(relay);
      await relay.connect();
      const send = async (body: Record<string, unknown>) => {
        const res = await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body });
        assert.equal(res.status, 201, res.text);
        return res.body as { id: string; createdAt: string };
      };
      const [m1, m2, m3] = [
        await send({ to: '+14155550100', body: 'one', fromNumber: number }),
        await send({ to: '+14155550101', body: 'two', fromNumber: number }),
        await send({ to: '+14155550102', body: 'three', fromNumber: number }),
      ];
      const m4 = await send({ to: '+14155550103', body: 'four' });
      await waitFor(
        () => [m1, m2, m3, m4].every((m) => relay.sends.some((s) => s.messageId === m.id)),
        5_000,
        'all four handed to the relay',
      );
      // Reported at chosen times after acceptance, so the latencies are known to the millisecond.
      const report = (m: { id: string; createdAt: string }, status: 'sent' | 'delivered' | 'read', afterMs: number) =>
        actorClient(t.app.runtime, relayProtocol).send(relay.id, {
          kind: 'status',
          tenantId: org.orgId,
          session: relay.session,
          messageId: m.id,
          attempt: relay.lastAttempt(m.id),
          status,
          at: new Date(Date.parse(m.createdAt) + afterMs).toISOString(),
        });
      await report(m1, 'sent', 1_000);
      await report(m1, 'delivered', 5_000);
      await report(m1, 'read', 6_000);
      await report(m2, 'sent', 5_000);
      await report(m3, 'sent', 20_000);
      await report(m3, 'delivered', 30_000);
      for (let attempt = 1; attempt <= 3; attempt++) {
        await waitFor(
          () => relay.sends.filter((s) => s.messageId === m4.id).length === attempt,
          5_000,
          `attempt ${attempt}`,
        );
        await relay.report(m4.id, 'failed', `no (${attempt})`);
      }
      await actorClient(t.app.runtime, relayProtocol).send(relay.id, {
        kind: 'inbound',
        tenantId: org.orgId,
        session: relay.session,
        rowId: 1,
        guid: `GUID-${org.orgId}-1`,
        from: '+14155550199',
        isGroup: false,
        body: 'hi',
        receivedAt: new Date().toISOString(),
      });
      const all = { accepted: 4, sent: 3, delivered: 2, read: 1, failed: 1, received: 1 };
      await waitFor(
        async () => {
          const res = await stats(org.ownerToken, range(started - 10 * minute, Date.now() + minute, '1m'));
          return JSON.stringify(totals(res.body.buckets)) === JSON.stringify(all);
        },
        10_000,
        'every outcome counted',
      );
      const ended = Date.now();

      const fromMs = started - 10 * minute;
      const toMs = ended + minute;
      const minutes = await stats(org.ownerToken, range(fromMs, toMs, '1m'));
      assert.equal(minutes.status, 200);
      assert.equal(minutes.body.interval, '1m');
      assert.equal(minutes.body.from, new Date(fromMs).toISOString());
      const buckets = minutes.body.buckets as Bucket[];
      const first = Math.floor(fromMs / minute) * minute;
      assert.equal(
        buckets.length,
        Math.ceil((toMs - first) / minute),
        'one bucket a minute from the floor of from to to',
      );
      buckets.forEach((b, i) =>
        assert.equal(b.start, new Date(first + i * minute).toISOString(), 'consecutive, oldest first'),
      );
      assert.deepEqual(
        buckets[0],
        {
          start: buckets[0]!.start,
          accepted: 0,
          sent: 0,
          delivered: 0,
          read: 0,
          failed: 0,
          received: 0,
          latency: { sent: { p50: null, p95: null, p99: null }, delivered: { p50: null, p95: null, p99: null } },
        },
        'zero-filled',
      );
      for (const b of busy(buckets)) {
        assert.ok(
          Date.parse(b.start) >= Math.floor(started / minute) * minute && Date.parse(b.start) <= ended,
          `counted in the minute of its write (${b.start})`,
        );
      }
      assert.deepEqual(totals(buckets), all);

      const metricsAfter = messagesTotal((await t.request('GET', '/metrics')).text);
      for (const outcome of ['accepted', 'sent', 'delivered', 'failed'] as const) {
        assert.equal(
          (metricsAfter[outcome] ?? 0) - (metricsBefore[outcome] ?? 0),
          all[outcome],
          `relaybox_messages_total{outcome="${outcome}"} agrees`,
        );
      }

      // The day's bucket holds every sample (unless the test ran across midnight UTC): its percentiles are known.
      const day = busy((await stats(org.ownerToken, range(started - minute, ended + minute, '1d'))).body.buckets);
      assert.ok(day.length >= 1);
      if (day.length === 1) {
        const { sent, delivered } = day[0]!.latency;
        near(sent.p50, 5_000, 'sent p50');
        near(sent.p95, 20_000, 'sent p95');
        near(sent.p99, 20_000, 'sent p99');
        near(delivered.p50, 5_000, 'delivered p50');
        near(delivered.p99, 30_000, 'delivered p99');
        assert.deepEqual(totals(day), all);
      }
      const hours = await stats(org.ownerToken, range(started - minute, ended + minute, '1h'));
      assert.deepEqual(totals(hours.body.buckets), all, 'the hour buckets count the same');

      const byNumber = await stats(
        org.ownerToken,
        range(fromMs, toMs, '1m', `&phoneNumber=${encodeURIComponent(number)}`),
      );
      assert.equal(byNumber.status, 200, byNumber.text);
      assert.deepEqual(
        totals(byNumber.body.buckets),
        { accepted: 3, sent: 3, delivered: 2, read: 1, failed: 0, received: 1 },
        "the number's own: the fourth had no sender number",
      );
      const byRelay = await stats(org.ownerToken, range(fromMs, toMs, '1m', `&relayId=${relay.id}`));
      assert.deepEqual(
        totals(byRelay.body.buckets),
        { accepted: 0, sent: 3, delivered: 2, read: 1, failed: 1, received: 1 },
        "the relay's own: a message has no relay when accepted",
      );
      const otherRelay = await stats(org.ownerToken, range(fromMs, toMs, '1m', '&relayId=relay_unknown'));
      assert.deepEqual(busy(otherRelay.body.buckets), []);

      const elsewhere = await stats(other.ownerToken, range(fromMs, toMs, '1m'));
      assert.equal(elsewhere.status, 200);
      assert.equal(elsewhere.body.buckets.length, buckets.length);
      assert.deepEqual(busy(elsewhere.body.buckets), [], 'another organization sees zeros');
      const elsewhereByRelay = await stats(other.ownerToken, range(fromMs, toMs, '1m', `&relayId=${relay.id}`));
      assert.deepEqual(busy(elsewhereByRelay.body.buckets), [], "even naming this organization's relay");

      const viewer = await apiKey(t, org, 'viewer');
      const asViewer = await stats(viewer, range(fromMs, toMs, '1m'));
      assert.equal(asViewer.status, 200);
      assert.deepEqual(totals(asViewer.body.buckets), all, 'a viewer reads them');
    });

    test('defaults: the last 24 h by hour; bad values and too many buckets are 400 validation_error', async () => {
      const org = await signup(t);
      const before = Date.now();
      const plain = await stats(org.ownerToken, '');
      assert.equal(plain.status, 200);
      assert.equal(plain.body.interval, '1h');
      const to = Date.parse(plain.body.to);
      assert.ok(to >= before && to <= Date.now(), 'to is now');
      assert.equal(Date.parse(plain.body.from), to - 24 * 3_600_000);
      assert.equal(
        plain.body.buckets.length,
        Math.ceil((to - Math.floor((to - 24 * 3_600_000) / 3_600_000) * 3_600_000) / 3_600_000),
      );
      assert.equal((await stats(org.ownerToken, 'interval=1d')).body.buckets.length, 2, "yesterday's and today's day");
      const day = 24 * 3_600_000;
      const now = Date.now();
      assert.equal(
        (await stats(org.ownerToken, range(now - day, now, '1m'))).status,
        200,
        'a day of minutes is allowed',
      );
      const cases: Array<[string, string]> = [
        ['interval=5m', '/interval'],
        ['from=yesterday', '/from'],
        ['to=2030-13-01T00:00:00Z', '/to'],
        [range(now, now - minute, '1h'), '/from'],
        [range(now, now, '1h'), '/from'],
        [range(now - 2 * day, now, '1m'), '/from'],
        [`phoneNumber=5550100`, '/phoneNumber'],
        [`phoneNumber=${encodeURIComponent(number)}&relayId=relay_1`, '/relayId'],
        ['relayId=', '/relayId'],
        ['colour=red', '/colour'],
      ];
      for (const [query, path] of cases) {
        const res = await stats(org.ownerToken, query);
        assert.equal(res.status, 400, `${query} → ${res.status} ${res.text.slice(0, 200)}`);
        assert.equal(res.body.error, 'validation_error');
        assert.ok(
          res.body.details.some((d: { path: string }) => d.path === path),
          `${query}: ${path} named in ${JSON.stringify(res.body.details)}`,
        );
      }
      assert.match((await stats(org.ownerToken, range(now - 2 * day, now, '1m'))).body.message, /at most 1500/);
      assert.equal((await t.request('GET', '/api/v1/stats/messages')).status, 401);
    });
  });
});
