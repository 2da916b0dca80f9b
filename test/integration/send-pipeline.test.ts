import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DomainEvent } from '../../src/events/event-stream.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { waitFor } from './runtime-contract.ts';

// Waits of 150 ms then 600 ms: apart enough that a loaded machine's scheduling delays cannot reorder them.
// Retry waits of 320 – 480 ms, then 1,280 – 1,920 ms: apart by more than a due-timer round on a loaded cluster takes.
const fastRetries = { MESSAGE_RETRY_BASE_MS: '400', TENANT_SWEEP_MS: '300' };

eachBackend(
  (backend) => {
    describe(`send pipeline (${backend})`, () => {
      let t: TestApp;
      const relays: StandInRelay[] = [];

      before(async () => {
        t = await startTestApp(backend, fastRetries);
      });
      after(async () => {
        for (const r of relays) r.close();
        await t.stop();
      });

      const relayFor = (org: Org, capacity: number, phoneNumbers: string[] = []) => {
        const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity, phoneNumbers });
        relays.push(relay);
        return relay;
      };
      const send = (org: Org, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
        t.request('POST', '/api/v1/messages', { token: org.ownerToken, body, headers });
      const statusOf = async (org: Org, id: string) =>
        (await t.request('GET', `/api/v1/messages/${id}/status`, { token: org.ownerToken })).body;
      const eventsOf = async (org: Org, group: string): Promise<DomainEvent[]> => {
        const out: DomainEvent[] = [];
        for (;;) {
          const batch = await t.app.events.read(group, 'test', 500);
          if (batch.length === 0) return out.filter((e) => e.tenantId === org.orgId);
          out.push(...batch.map((b) => b.event));
          await t.app.events.ack(
            group,
            batch.map((b) => b.position),
          );
        }
      };

      test('a valid send is 201 queued with its fields, and message.queued is on the event stream', async () => {
        const org = await signup(t);
        const res = await send(org, { to: '+14155550100', body: 'Hello', priority: 7 });
        assert.equal(res.status, 201);
        for (const field of ['id', 'status', 'to', 'body', 'priority', 'createdAt'])
          assert.ok(field in res.body, field);
        assert.equal(res.body.status, 'queued');
        assert.equal(res.body.to, '+14155550100');
        assert.equal(res.body.priority, 7);
        assert.equal(res.body.direction, 'sent');
        assert.equal(res.body.tenantId, undefined);
        const defaults = await send(org, {
          to: 'Friend@Example.com',
          attachments: ['https://cdn.example.com/a/photo.jpg'],
        });
        assert.equal(defaults.status, 201);
        assert.equal(defaults.body.priority, 0);
        const events = await eventsOf(org, `g-${org.orgId}`);
        const queued = events.filter((e) => e.event === 'message.queued');
        assert.deepEqual(queued.map((e) => e.data.id).sort(), [res.body.id, defaults.body.id].sort());
        const metrics = await t.request('GET', '/metrics');
        for (const stage of ['auth', 'rate_limit', 'validate', 'persist', 'enqueue']) {
          assert.match(
            metrics.text,
            new RegExp(
              `relaybox_http_stage_duration_seconds_count\\{route="/api/v1/messages",stage="${stage}"\\} [1-9]`,
            ),
            `stage ${stage} in /metrics`,
          );
        }
        assert.match(
          metrics.text,
          /relaybox_runtime_pending_messages\{type="tenant"\} \d+/,
          'actor backlog in /metrics',
        );
        assert.match(metrics.text, /relaybox_runtime_dead_letters\{type="tenant"\} 0/);
        const first = queued.find((e) => e.data.id === res.body.id)!;
        assert.deepEqual(Object.keys(first.data).sort(), ['body', 'conversationId', 'from', 'id', 'status', 'to']);
        assert.equal(first.teamId, org.teamId);
      });

      test('every validation rule is a 400 validation_error naming its field', async () => {
        const org = await signup(t);
        const cases: Array<[Record<string, unknown>, string]> = [
          [{ body: 'no recipient' }, '/to'],
          [{ to: 'not a number', body: 'x' }, '/to'],
          [{ to: '12345', body: 'x' }, '/to'],
          [{ to: '+1', body: 'x' }, '/to'],
          [{ to: 'group:', body: 'x' }, '/to'],
          [{ to: '+14155550100' }, '/body'],
          [{ to: '+14155550100', body: '' }, '/body'],
          [{ to: '+14155550100', body: 'x'.repeat(10_001) }, '/body'],
          [
            {
              to: '+14155550100',
              body: 'x',
              attachments: Array.from({ length: 11 }, (_, i) => `https://e.com/${i}.png`),
            },
            '/attachments',
          ],
          [{ to: '+14155550100', body: 'x', attachments: ['ftp://e.com/a.png'] }, '/attachments/0'],
          [{ to: '+14155550100', body: 'x', priority: -1 }, '/priority'],
          [{ to: '+14155550100', body: 'x', priority: 101 }, '/priority'],
          [{ to: '+14155550100', body: 'x', priority: 1.5 }, '/priority'],
          [{ to: '+14155550100', body: 'x', fromNumber: '5550100' }, '/fromNumber'],
          [{ to: '+14155550100', body: 'x', fromNumber: '+14155550199' }, '/fromNumber'],
          [{ to: '+14155550100', body: 'x', colour: 'red' }, '/colour'],
          [{ to: 'group:grp_unknown', body: 'x' }, '/to'],
        ];
        for (const [body, field] of cases) {
          const res = await send(org, body);
          const expected = field === '/to' && String(body.to).startsWith('group:grp') ? 404 : 400;
          assert.equal(
            res.status,
            expected,
            `${JSON.stringify(body).slice(0, 80)} → ${res.status} ${res.text.slice(0, 200)}`,
          );
          if (expected === 400) {
            assert.equal(res.body.error, 'validation_error');
            assert.ok(
              res.body.details.some((d: { path: string }) => d.path === field),
              `${field} named in ${JSON.stringify(res.body.details)}`,
            );
          }
        }
        const attachmentsOnly = await send(org, { to: '+14155550100', attachments: ['https://e.com/a.png'] });
        assert.equal(attachmentsOnly.status, 201, 'attachments stand in for a body');
        const tenThousand = await send(org, { to: '+14155550100', body: 'x'.repeat(10_000) });
        assert.equal(tenThousand.status, 201, '10,000 characters is allowed');
      });

      test('Idempotency-Key: a repeat replays the first answer; another body is 422; keys are per organization', async () => {
        const org = await signup(t);
        const other = await signup(t);
        const key = { 'idempotency-key': 'order-42' };
        const first = await send(org, { to: '+14155550100', body: 'once' }, key);
        const again = await send(org, { to: '+14155550100', body: 'once' }, key);
        assert.equal(first.status, 201);
        assert.equal(again.status, 201);
        assert.equal(again.body.id, first.body.id);
        assert.equal(again.headers.get('idempotent-replayed'), 'true');
        const concurrent = await Promise.all(
          Array.from({ length: 5 }, () =>
            send(org, { to: '+14155550100', body: 'race' }, { 'idempotency-key': 'race' }),
          ),
        );
        assert.equal(new Set(concurrent.map((r) => r.body.id)).size, 1, 'concurrent repeats make one message');
        const mismatch = await send(org, { to: '+14155550100', body: 'twice?' }, key);
        assert.equal(mismatch.status, 422);
        assert.equal(mismatch.body.error, 'idempotency_mismatch');
        const elsewhere = await send(other, { to: '+14155550100', body: 'once' }, key);
        assert.equal(elsewhere.status, 201);
        assert.notEqual(elsewhere.body.id, first.body.id);
        const listed = await t.request('GET', '/api/v1/messages?direction=sent', { token: org.ownerToken });
        assert.equal(listed.body.data.filter((m: { body: string }) => m.body === 'once').length, 1);
        assert.equal(listed.body.data.filter((m: { body: string }) => m.body === 'race').length, 1);
        const tooLong = await send(org, { to: '+14155550100', body: 'x' }, { 'idempotency-key': 'k'.repeat(256) });
        assert.equal(tooLong.status, 400);
        const keys = t.app.store.collection('idempotency_keys');
        const past = new Date(Date.now() - 1000).toISOString();
        assert.ok((await keys.updateMany({ tenantId: org.orgId }, {}, { $set: { expiresAt: past } })) >= 2);
        const fresh = await send(org, { to: '+14155550100', body: 'once' }, key);
        assert.notEqual(fresh.body.id, first.body.id, 'after 24 h the key is new again');
        await waitFor(
          async () => (await keys.count({ tenantId: org.orgId }, { expiresAt: past })) === 0,
          5_000,
          'expired keys swept',
        );
      });

      test('dispatch: higher priority first, first in first out within a priority, within the relay capacity', async () => {
        const org = await signup(t);
        const order = [0, 50, 100, 50, 0, 100];
        const ids: string[] = [];
        for (const [i, priority] of order.entries())
          ids.push((await send(org, { to: '+14155550100', body: `m${i}`, priority })).body.id);
        const relay = relayFor(org, 1);
        await relay.connect();
        const dispatched: string[] = [];
        for (let i = 0; i < order.length; i++) {
          await waitFor(() => relay.sends.length === i + 1, 5_000, `send ${i + 1}`);
          await sleep(30);
          assert.equal(relay.sends.length, i + 1, 'never more in flight than the capacity');
          const frame = relay.sends[i]!;
          dispatched.push(frame.messageId);
          await relay.report(frame.messageId, 'sent');
        }
        const byBody = (id: string) => `m${ids.indexOf(id)}`;
        assert.deepEqual(dispatched.map(byBody), ['m2', 'm5', 'm1', 'm3', 'm0', 'm4']);
        const status = await statusOf(org, ids[2]!);
        assert.equal(status.status, 'sent');
        assert.equal(status.attempts, 1);
        assert.ok(status.sentAt && status.queuedAt);
      });

      test('sent then delivered with timestamps; a replayed sent after delivered leaves delivered', async () => {
        // The process's counters and histograms, read before and after: each status is counted once, where it is stored.
        const metric = async (line: RegExp) => Number(line.exec((await t.request('GET', '/metrics')).text)?.[1] ?? 0);
        const counted = () =>
          Promise.all([
            metric(/^relaybox_messages_total\{outcome="sent"\} (\d+)$/m),
            metric(/^relaybox_messages_total\{outcome="delivered"\} (\d+)$/m),
            metric(/^relaybox_message_latency_seconds_count\{to="delivered"\} (\d+)$/m),
          ]);
        // The counters are the process's: reports of the tests before this one may still be landing (slower on the wire), so start once they stand still.
        let before = await counted();
        for (const until = Date.now() + 15_000; Date.now() < until;) {
          await sleep(500);
          const now = await counted();
          if (now.every((n, i) => n === before[i])) break;
          before = now;
        }
        const org = await signup(t);
        const relay = relayFor(org, 5);
        await relay.connect();
        const id = (await send(org, { to: '+14155550100', body: 'track me' })).body.id;
        await waitFor(() => relay.sends.some((s) => s.messageId === id), 5_000, 'dispatched');
        const frame = relay.sends.find((s) => s.messageId === id)!;
        assert.equal(frame.to, '+14155550100');
        assert.equal(frame.body, 'track me');
        await waitFor(async () => (await statusOf(org, id)).status === 'processing', 3_000, 'processing');
        await relay.report(id, 'sent');
        await waitFor(async () => (await statusOf(org, id)).status === 'sent', 3_000, 'sent');
        await relay.report(id, 'delivered');
        await waitFor(async () => (await statusOf(org, id)).status === 'delivered', 3_000, 'delivered');
        await relay.report(id, 'sent');
        await relay.report(id, 'delivered');
        await sleep(200);
        const final = await statusOf(org, id);
        assert.equal(final.status, 'delivered');
        assert.ok(final.sentAt <= final.deliveredAt);
        const sentEvents = (await eventsOf(org, `g2-${org.orgId}`)).filter((e) => e.event === 'message.sent');
        assert.equal(sentEvents.length, 1, 'message.sent once');
        const after = await counted();
        assert.deepEqual(
          after.map((n, i) => n - before[i]!),
          [1, 1, 1],
          'sent, delivered and its latency counted once each, the replays not at all',
        );
      });

      test('message.delivered and message.read once each, in order, in the events API: a relay that reports delivered twice, and one that reports read before sent is stored', async () => {
        const org = await signup(t);
        const relay = relayFor(org, 1);
        await relay.connect();
        const twice = (await send(org, { to: '+14155550100', body: 'delivered twice' })).body.id;
        const early = (await send(org, { to: '+14155550101', body: 'read first' })).body.id;
        await waitFor(() => relay.sends.some((s) => s.messageId === twice), 5_000, 'the first dispatched');
        await relay.report(twice, 'sent');
        await relay.report(twice, 'delivered');
        await relay.report(twice, 'delivered');
        await waitFor(() => relay.sends.some((s) => s.messageId === early), 5_000, 'the second dispatched');
        await relay.report(early, 'read');
        const third = (await send(org, { to: '+14155550102', body: 'after the read' })).body.id;
        await waitFor(
          () => relay.sends.some((s) => s.messageId === third),
          5_000,
          "a read that comes first frees the send's credit",
        );
        for (const status of ['sent', 'delivered', 'read'] as const) await relay.report(early, status);

        const statusEvents = async (query = '') => {
          const page = (await t.request('GET', `/api/v1/events?limit=100${query}`, { token: org.ownerToken })).body;
          return (page.data as Array<{ event: string; data: Record<string, unknown> }>)
            .filter(
              (e) => e.event.startsWith('message.') && e.event !== 'message.queued' && e.event !== 'message.checkpoint',
            )
            .reverse();
        };
        await waitFor(async () => (await statusEvents()).length >= 5, 5_000, 'five status events');
        await sleep(300);
        const events = await statusEvents();
        assert.deepEqual(
          events.map((e) => [e.data.id, e.event]),
          [
            [twice, 'message.sent'],
            [twice, 'message.delivered'],
            [early, 'message.sent'],
            [early, 'message.delivered'],
            [early, 'message.read'],
          ],
        );
        const [twiceStatus, earlyStatus] = [await statusOf(org, twice), await statusOf(org, early)];
        assert.deepEqual(
          [earlyStatus.status, earlyStatus.sentAt, earlyStatus.deliveredAt],
          ['delivered', earlyStatus.readAt, earlyStatus.readAt],
        );
        const delivered = events[1]!;
        assert.deepEqual(Object.keys(delivered.data).sort(), [
          'body',
          'conversationId',
          'deliveredAt',
          'from',
          'id',
          'status',
          'to',
        ]);
        assert.deepEqual([delivered.data.status, delivered.data.deliveredAt], ['delivered', twiceStatus.deliveredAt]);
        const read = events[4]!;
        assert.deepEqual(Object.keys(read.data).sort(), [
          'body',
          'conversationId',
          'from',
          'id',
          'readAt',
          'status',
          'to',
        ]);
        assert.equal(read.data.readAt, earlyStatus.readAt);
        assert.deepEqual(
          (await statusEvents('&type=message.delivered')).map((e) => e.data.id),
          [twice, early],
          'the type filter',
        );
        assert.deepEqual(
          (await statusEvents('&type=message.read')).map((e) => e.data.id),
          [early],
        );
      });

      test('a failing send is retried with backoff, then failed, dead-lettered and message.failed', async () => {
        const org = await signup(t);
        const relay = relayFor(org, 5);
        await relay.connect();
        const id = (await send(org, { to: '+14155550100', body: 'doomed' })).body.id;
        const attemptsSeen: number[] = [];
        for (let attempt = 1; attempt <= 3; attempt++) {
          await waitFor(
            () => relay.sends.filter((s) => s.messageId === id).length === attempt,
            10_000,
            `attempt ${attempt}`,
          );
          attemptsSeen.push(Date.now());
          await relay.report(id, 'failed', `network said no (${attempt})`);
        }
        await waitFor(async () => (await statusOf(org, id)).status === 'failed', 5_000, 'failed');
        const status = await statusOf(org, id);
        assert.equal(status.attempts, 3);
        assert.equal(status.lastError, 'network said no (3)');
        assert.ok(
          attemptsSeen[2]! - attemptsSeen[1]! >= attemptsSeen[1]! - attemptsSeen[0]!,
          `the second wait is longer than the first: attempts seen at +0, +${attemptsSeen[1]! - attemptsSeen[0]!}, +${attemptsSeen[2]! - attemptsSeen[0]!} ms`,
        );
        await sleep(300);
        assert.equal(relay.sends.filter((s) => s.messageId === id).length, 3, 'no fourth attempt');
        const failed = (await eventsOf(org, `g3-${org.orgId}`)).filter((e) => e.event === 'message.failed');
        assert.deepEqual(
          failed.map((e) => e.data.id),
          [id],
        );
        const stats = await t.request('GET', '/api/v1/messages/queue/stats', { token: org.ownerToken });
        assert.deepEqual(stats.body, { pending: 0, processing: 0, failed: 1, deadLetter: 1 });
      });

      test('queue stats count each state', async () => {
        const org = await signup(t);
        for (let i = 0; i < 3; i++) await send(org, { to: '+14155550100', body: `p${i}` });
        assert.deepEqual((await t.request('GET', '/api/v1/messages/queue/stats', { token: org.ownerToken })).body, {
          pending: 3,
          processing: 0,
          failed: 0,
          deadLetter: 0,
        });
        const relay = relayFor(org, 2);
        await relay.connect();
        await waitFor(() => relay.sends.length === 2, 5_000, 'two in flight');
        await waitFor(
          async () =>
            (await t.request('GET', '/api/v1/messages/queue/stats', { token: org.ownerToken })).body.processing === 2,
          3_000,
          'stats',
        );
        assert.deepEqual((await t.request('GET', '/api/v1/messages/queue/stats', { token: org.ownerToken })).body, {
          pending: 1,
          processing: 2,
          failed: 0,
          deadLetter: 0,
        });
      });

      test('a relay that goes offline hands its in-flight messages to another relay', async () => {
        const org = await signup(t);
        const first = relayFor(org, 10);
        await first.connect();
        const ids: string[] = [];
        for (let i = 0; i < 4; i++) ids.push((await send(org, { to: '+14155550100', body: `f${i}` })).body.id);
        await waitFor(() => first.sends.length === 4, 5_000, 'all on the first relay');
        await first.report(ids[0]!, 'sent');
        await first.disconnect('socket closed');
        const second = relayFor(org, 10);
        await second.connect();
        await waitFor(() => second.sends.length === 3, 5_000, 'the rest moved');
        assert.deepEqual(second.sends.map((s) => s.messageId).sort(), ids.slice(1).sort());
        for (const id of ids.slice(1)) await second.report(id, 'delivered');
        await waitFor(
          async () => (await statusOf(org, ids[3]!)).status === 'delivered',
          3_000,
          'delivered by the second',
        );
        const status = await statusOf(org, ids[1]!);
        assert.equal(status.attempts, 1, 'the interrupted attempt does not count');
        const events = await eventsOf(org, `g4-${org.orgId}`);
        assert.ok(events.some((e) => e.event === 'relay.offline' && e.data.id === first.id));
        assert.ok(events.some((e) => e.event === 'relay.online' && e.data.id === second.id));
      });

      test('the sweep dispatches a queued message whose actor message was lost, and hands back a send whose relay is gone', async () => {
        const org = await signup(t);
        const relay = relayFor(org, 5);
        await relay.connect();
        const template = (await send(org, { to: '+14155550100', body: 'template' })).body;
        await waitFor(() => relay.sends.some((f) => f.messageId === template.id), 5_000, 'the template went out');
        const messages = t.app.store.collection('messages');
        const scope = { tenantId: org.orgId, teamId: org.teamId };
        const stored = await messages.findOne(scope, { id: template.id });
        const lost = {
          ...stored!,
          id: `msg_lost_${Date.now()}`,
          status: 'queued',
          relayId: null,
          attempts: 0,
          body: 'lost in transit',
        };
        const orphan = {
          ...stored!,
          id: `msg_orphan_${Date.now()}`,
          status: 'processing',
          relayId: 'relay_gone',
          attempts: 1,
          body: 'relay vanished',
        };
        await messages.insertOne(scope, lost);
        await messages.insertOne(scope, orphan);
        await waitFor(
          () => relay.sends.some((f) => f.messageId === lost.id),
          5_000,
          'the lost message is found by the sweep',
        );
        await waitFor(
          () => relay.sends.some((f) => f.messageId === orphan.id),
          5_000,
          'the orphaned send is handed back and sent again',
        );
        assert.equal((await statusOf(org, orphan.id)).attempts, 1, 'the interrupted attempt does not count');
      });

      test('a relay that reconnects keeps its in-flight sends against its capacity and can still report them', async () => {
        const org = await signup(t);
        const relay = relayFor(org, 1);
        await relay.connect();
        const first = (await send(org, { to: '+14155550100', body: 'before the reconnect' })).body.id;
        await waitFor(() => relay.sends.some((f) => f.messageId === first), 5_000, 'first dispatched');
        await relay.connect();
        const second = (await send(org, { to: '+14155550100', body: 'after the reconnect' })).body.id;
        await sleep(300);
        assert.ok(!relay.sends.some((f) => f.messageId === second), 'capacity 1 is still taken by the first send');
        await relay.report(first, 'sent');
        await waitFor(
          () => relay.sends.some((f) => f.messageId === second),
          5_000,
          'second dispatched once the first is reported',
        );
        assert.equal((await statusOf(org, first)).status, 'sent');
      });

      test('fromNumber: only an active registered number, sent through the relay that owns it', async () => {
        const org = await signup(t);
        const created = await t.request('POST', '/api/v1/phone-numbers', {
          token: org.ownerToken,
          body: { number: '+14155550111', label: 'Sales' },
        });
        assert.equal(created.status, 201);
        assert.equal(created.body.status, 'active');
        const plain = relayFor(org, 5);
        const owner = relayFor(org, 5, ['+14155550111']);
        await plain.connect();
        await owner.connect();
        const id = (await send(org, { to: '+14155550100', body: 'from sales', fromNumber: '+14155550111' })).body.id;
        await waitFor(() => owner.sends.some((s) => s.messageId === id), 5_000, 'sent by the owner');
        assert.equal(owner.sends.find((s) => s.messageId === id)!.fromNumber, '+14155550111');
        assert.ok(!plain.sends.some((s) => s.messageId === id));
        const removed = await t.request('DELETE', `/api/v1/phone-numbers/${created.body.id}`, {
          token: org.ownerToken,
        });
        assert.equal(removed.status, 200);
        assert.equal(removed.body.status, 'deactivated');
        const refused = await send(org, { to: '+14155550100', body: 'x', fromNumber: '+14155550111' });
        assert.equal(refused.status, 400);
        assert.equal(refused.body.details[0].path, '/fromNumber');
        const listed = await t.request('GET', '/api/v1/phone-numbers', { token: org.ownerToken });
        assert.equal(
          listed.body.data.find((n: { id: string }) => n.id === created.body.id).status,
          'deactivated',
          'kept with its history',
        );
      });

      test('phone numbers: create, list, update label and metadata, validation, admin only', async () => {
        const org = await signup(t);
        const bad = await t.request('POST', '/api/v1/phone-numbers', {
          token: org.ownerToken,
          body: { number: '555-0100' },
        });
        assert.equal(bad.status, 400);
        const created = await t.request('POST', '/api/v1/phone-numbers', {
          token: org.ownerToken,
          body: { number: '+442071234567' },
        });
        assert.equal(created.status, 201);
        const dup = await t.request('POST', '/api/v1/phone-numbers', {
          token: org.ownerToken,
          body: { number: '+442071234567' },
        });
        assert.equal(dup.status, 409);
        const updated = await t.request('PUT', `/api/v1/phone-numbers/${created.body.id}`, {
          token: org.ownerToken,
          body: { label: 'London', metadata: { region: 'eu' } },
        });
        assert.equal(updated.status, 200);
        assert.equal(updated.body.label, 'London');
        assert.deepEqual(updated.body.metadata, { region: 'eu' });
        assert.equal(
          (await t.request('PUT', `/api/v1/phone-numbers/${created.body.id}`, { token: org.ownerToken, body: {} }))
            .status,
          400,
        );
        const member = await apiKey(t, org, 'member');
        assert.equal(
          (await t.request('POST', '/api/v1/phone-numbers', { token: member, body: { number: '+442071234568' } }))
            .status,
          403,
        );
        assert.equal((await t.request('GET', '/api/v1/phone-numbers', { token: member })).status, 200);
      });
    });
  },
  { cluster: true },
);
