import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { apiKey, eachBackend, signup, startTestApp, teamHeader, type Org, type TestApp } from '../support/test-app.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { waitFor } from './runtime-contract.ts';
import type { JobDoc } from '../../src/jobs/job-store.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';

// Stand-in relays do not heartbeat: a slow backend must not take them offline in the middle of a test.
const fast = {
  MESSAGE_RETRY_BASE_MS: '40',
  MESSAGE_MAX_ATTEMPTS: '1',
  TENANT_SWEEP_MS: '300',
  JOB_TRACK_MS: '100',
  RELAY_HEARTBEAT_TIMEOUT_MS: '600000',
};
const entries = (n: number, body = 'hello') =>
  Array.from({ length: n }, (_, i) => ({ to: `+1415555${String(i).padStart(4, '0')}`, body: `${body} ${i}` }));

eachBackend((backend) => {
  describe(`bulk jobs (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];

    before(async () => {
      t = await startTestApp(backend, fast);
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });

    const bulk = (org: Org, body: unknown, headers: Record<string, string> = {}, token = org.ownerToken) =>
      t.request('POST', '/api/v1/messages/bulk', { token, body, headers });
    const detail = async (org: Org, jobId: string, headers: Record<string, string> = {}) =>
      (await t.request('GET', `/api/v1/messages/bulk/${jobId}`, { token: org.ownerToken, headers })).body;
    const relayFor = (org: Org, capacity: number) => {
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity });
      relays.push(relay);
      return relay;
    };
    const storedMessages = (org: Org) => t.app.store.collection('messages').count({ tenantId: org.orgId }, {});
    const storedJobs = (org: Org) => t.app.store.collection('bulk_jobs').count({ tenantId: org.orgId }, {});
    /** A job and its messages as the store has them: what a wait that timed out was waiting on. */
    const storedJob = async (org: Org, jobId: string) => {
      const scope = { tenantId: org.orgId };
      const job = await t.app.store.collection<JobDoc>('bulk_jobs').findOne(scope, { id: jobId });
      const messages = await t.app.store
        .collection<MessageDoc>('messages')
        .find(scope, { jobId }, { sort: { jobIndex: 1 } });
      return JSON.stringify({
        job: job && { status: job.status, trackTick: job.trackTick, completedAt: job.completedAt },
        messages: messages.map((m) => ({
          i: m.jobIndex,
          status: m.status,
          relayId: m.relayId,
          attempts: m.attempts,
          updatedAt: m.updatedAt,
          lastError: m.lastError,
        })),
      });
    };

    test('limits: 0 and 10,001 entries, 10 MiB + 1, scheduledAt in the past or beyond 90 days are refused and nothing is created', async () => {
      const org = await signup(t);
      const none = await bulk(org, { messages: [] });
      assert.equal(none.status, 400);
      assert.equal(none.body.error, 'validation_error');
      assert.equal(none.body.details[0].path, '/messages');
      const tooMany = await bulk(org, { messages: entries(10_001, 'x') });
      assert.equal(tooMany.status, 400);
      assert.equal(tooMany.body.details[0].path, '/messages');
      // A valid JSON body of exactly 10 MiB + 1 byte: the size alone refuses it.
      const limit = 10 * 1024 * 1024;
      const skeleton = JSON.stringify({ messages: [{ to: '+14155550100', body: '' }] });
      const padded = skeleton.replace('"body":""', `"body":"${'x'.repeat(limit + 1 - skeleton.length)}"`);
      assert.equal(Buffer.byteLength(padded), limit + 1);
      const tooLarge = await bulk(org, padded);
      assert.equal(tooLarge.status, 413);
      assert.equal(tooLarge.body.error, 'payload_too_large');
      const past = await bulk(org, { messages: entries(2), scheduledAt: new Date(Date.now() - 60_000).toISOString() });
      assert.equal(past.status, 400);
      assert.equal(past.body.details[0].path, '/scheduledAt');
      const far = await bulk(org, {
        messages: entries(2),
        scheduledAt: new Date(Date.now() + 91 * 24 * 3600 * 1000).toISOString(),
      });
      assert.equal(far.status, 400);
      assert.equal(far.body.details[0].path, '/scheduledAt');
      const notADate = await bulk(org, { messages: entries(2), scheduledAt: 'tomorrow' });
      assert.equal(notADate.status, 400);
      assert.equal(await storedMessages(org), 0);
      assert.equal(await storedJobs(org), 0);
      // Scheduled an hour ahead, so the 10,000 messages stay idle for the rest of the suite.
      const tenThousand = await bulk(org, {
        messages: entries(10_000, 'y'),
        scheduledAt: new Date(Date.now() + 3600_000).toISOString(),
      });
      assert.equal(tenThousand.status, 201, tenThousand.text.slice(0, 300));
      assert.equal(tenThousand.body.totalRecipients, 10_000);
      assert.equal(await storedMessages(org), 10_000);
      const inRange = await bulk(org, {
        messages: entries(1),
        scheduledAt: new Date(Date.now() + 89 * 24 * 3600 * 1000).toISOString(),
      });
      assert.equal(inRange.status, 201);
      assert.equal(inRange.body.status, 'scheduled');
    });

    test('one bad entry refuses the whole job naming its path; many are listed up to 100; nothing is created', async () => {
      const org = await signup(t);
      const messages = entries(30);
      messages[17] = { to: 'not a number', body: 'x' };
      const one = await bulk(org, { messages });
      assert.equal(one.status, 400);
      assert.equal(one.body.error, 'validation_error');
      assert.deepEqual(
        one.body.details.map((d: { path: string }) => d.path),
        ['/messages/17/to'],
      );
      const schemaBad = entries(5) as Array<Record<string, unknown>>;
      schemaBad[3] = { to: '+14155550100', body: 'x', priority: 101 };
      const byShape = await bulk(org, { messages: schemaBad });
      assert.equal(byShape.status, 400);
      assert.deepEqual(
        byShape.body.details.map((d: { path: string }) => d.path),
        ['/messages/3/priority'],
      );
      const noBody = await bulk(org, { messages: [...entries(2), { to: '+14155550100', body: '' }] });
      assert.deepEqual(
        noBody.body.details.map((d: { path: string }) => d.path),
        ['/messages/2/body'],
      );
      const semantic = [
        { to: '+14155550100', body: 'x' },
        { to: 'group:grp_1', body: 'x' },
        { to: '+14155550100', body: 'x', fromNumber: '+14155550199' },
      ];
      const two = await bulk(org, { messages: semantic });
      assert.equal(two.status, 400);
      assert.deepEqual(
        two.body.details.map((d: { path: string }) => d.path),
        ['/messages/1/to', '/messages/2/fromNumber'],
      );
      const allBad = Array.from({ length: 500 }, () => ({ to: 'nobody', body: 'x' }));
      const many = await bulk(org, { messages: allBad });
      assert.equal(many.status, 400);
      assert.equal(many.body.details.length, 100);
      assert.equal(many.body.details[99].path, '/messages/99/to');
      const unknownField = await bulk(org, { messages: entries(1), colour: 'red' });
      assert.equal(unknownField.status, 400);
      assert.equal(await storedMessages(org), 0);
      assert.equal(await storedJobs(org), 0);
    });

    test('Idempotency-Key: a repeat replays the job, another body is 422', async () => {
      const org = await signup(t);
      const key = { 'idempotency-key': 'campaign-7' };
      const first = await bulk(org, { messages: entries(3) }, key);
      const again = await bulk(org, { messages: entries(3) }, key);
      assert.equal(first.status, 201);
      assert.equal(again.status, 201);
      assert.equal(again.body.jobId, first.body.jobId);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      const mismatch = await bulk(org, { messages: entries(4) }, key);
      assert.equal(mismatch.status, 422);
      assert.equal(mismatch.body.error, 'idempotency_mismatch');
      assert.equal(await storedJobs(org), 1);
      assert.equal(await storedMessages(org), 3);
    });

    test('a job completes with correct counts and results when a relay delivers some and fails others; progress is visible while it runs', async () => {
      const org = await signup(t);
      const created = await bulk(org, { messages: entries(40) });
      assert.equal(created.status, 201);
      for (const field of ['jobId', 'status', 'totalRecipients', 'createdAt', 'scheduledAt'])
        assert.ok(field in created.body, field);
      assert.equal(created.body.status, 'processing');
      assert.equal(created.body.scheduledAt, null);
      const jobId = created.body.jobId;
      const before = await detail(org, jobId);
      assert.deepEqual(before.counts, {
        queued: 40,
        processing: 0,
        sent: 0,
        delivered: 0,
        failed: 0,
        cancelled: 0,
        skipped: 0,
      });
      assert.equal(before.progress, 0);
      assert.equal(before.estimatedCompletionAt, null, 'no relay online');
      const relay = relayFor(org, 4);
      await relay.connect();
      const reported = new Set<string>();
      const fate = (to: string) =>
        Number(to.slice(-4)) % 4 === 0 ? 'failed' : Number(to.slice(-4)) % 4 === 1 ? 'sent' : 'delivered';
      let sawMidway = false;
      let last: any;
      await waitFor(
        async () => {
          for (const frame of relay.sends) {
            if (reported.has(frame.messageId)) continue;
            reported.add(frame.messageId);
            const outcome = fate(frame.to);
            await relay.report(
              frame.messageId,
              outcome === 'failed' ? 'failed' : 'sent',
              outcome === 'failed' ? 'unknown recipient' : undefined,
            );
            if (outcome === 'delivered') await relay.report(frame.messageId, 'delivered');
          }
          if (!sawMidway && reported.size >= 12 && reported.size <= 28) {
            const mid = await detail(org, jobId);
            if (mid.progress > 0 && mid.progress < 1) {
              sawMidway = true;
              assert.equal(mid.status, 'processing');
              assert.ok(mid.estimatedCompletionAt !== null, 'a relay is online: there is an estimate');
              const partial = await t.request('GET', `/api/v1/messages/bulk/${jobId}/results?limit=100`, {
                token: org.ownerToken,
              });
              assert.equal(partial.body.pagination.total, 40);
            }
          }
          await sleep(50);
          last = await detail(org, jobId);
          return last.status === 'completed';
        },
        90_000,
        'the job completes',
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}; last seen ${JSON.stringify(last)}, ${relay.sends.length} handed out, ${reported.size} reported`,
        );
      });
      assert.ok(sawMidway, 'progress was seen between 0 and 1 while the job ran');
      const done = await detail(org, jobId);
      assert.deepEqual(done.counts, {
        queued: 0,
        processing: 0,
        sent: 10,
        delivered: 20,
        failed: 10,
        cancelled: 0,
        skipped: 0,
      });
      assert.equal(done.progress, 1);
      assert.ok(done.startedAt && done.completedAt && done.completedAt >= done.startedAt);
      const failed = await t.request('GET', `/api/v1/messages/bulk/${jobId}/results?status=failed&limit=100`, {
        token: org.ownerToken,
      });
      assert.equal(failed.body.pagination.total, 10);
      assert.ok(
        failed.body.data.every(
          (r: { to: string; error: string }) => fate(r.to) === 'failed' && r.error === 'unknown recipient',
        ),
      );
      const page2 = await t.request('GET', `/api/v1/messages/bulk/${jobId}/results?page=2&limit=15`, {
        token: org.ownerToken,
      });
      assert.equal(page2.body.data.length, 15);
      assert.equal(page2.body.data[0].to, '+14155550015', 'results are in request order');
      assert.deepEqual(Object.keys(page2.body.data[0]).sort(), ['error', 'messageId', 'status', 'to']);
      const status = await t.request('GET', `/api/v1/messages/${page2.body.data[0].messageId}/status`, {
        token: org.ownerToken,
      });
      assert.equal(status.body.jobId, jobId, 'each message shows its job');
      const listed = await t.request('GET', '/api/v1/messages/bulk?status=completed', { token: org.ownerToken });
      assert.equal(listed.body.data[0].jobId, jobId);
      assert.equal(listed.body.data[0].progress, 1);
      const conversations = await t.request('GET', '/api/v1/conversations?limit=100', { token: org.ownerToken });
      assert.equal(conversations.body.pagination.total, 40, 'each recipient has its conversation');
      const metrics = await t.request('GET', '/metrics');
      assert.match(metrics.text, /relaybox_bulk_jobs\{status="completed"\} [1-9]/);
      assert.match(metrics.text, /relaybox_bulk_messages_accepted_total [1-9]/);
    });

    test('a scheduled job sends nothing before scheduledAt and starts on time', async () => {
      const org = await signup(t);
      const relay = relayFor(org, 10);
      await relay.connect();
      const arrivals: number[] = [];
      const unsubscribe = t.app.messaging.link.onFrame((d) => {
        if (d.relayId === relay.id && d.frame.type === 'send') arrivals.push(Date.now());
      });
      const at = new Date(Date.now() + 3_000);
      const created = await bulk(org, { messages: entries(5), scheduledAt: at.toISOString() });
      assert.equal(created.status, 201);
      assert.equal(created.body.status, 'scheduled');
      assert.equal(created.body.scheduledAt, at.toISOString());
      const jobId = created.body.jobId;
      const before = await detail(org, jobId);
      if (Date.now() < at.getTime() - 200) assert.equal(before.status, 'scheduled');
      await waitFor(() => relay.sends.length === 5, 10_000, 'sent at scheduledAt');
      // The tenant's sweep may hand the due messages out a moment before the job actor's start records it.
      await waitFor(async () => (await detail(org, jobId)).status === 'processing', 5_000, 'the job is processing');
      const started = await detail(org, jobId);
      unsubscribe();
      assert.ok(Math.min(...arrivals) >= at.getTime(), 'no send before scheduledAt');
      assert.ok(Date.parse(started.startedAt) >= at.getTime(), 'not early');
      assert.ok(
        Date.parse(started.startedAt) - at.getTime() < 3_000,
        `on time (started ${Date.parse(started.startedAt) - at.getTime()} ms after)`,
      );
    });

    test('a job scheduled 33 days ahead, past what one Node timer holds, stays scheduled and sends nothing', async () => {
      const org = await signup(t);
      const relay = relayFor(org, 10);
      await relay.connect();
      const at = new Date(Date.now() + 33 * 24 * 3600 * 1000).toISOString();
      const created = await bulk(org, { messages: entries(3), scheduledAt: at });
      assert.equal(created.status, 201);
      assert.equal(created.body.status, 'scheduled');
      const jobId = created.body.jobId;
      // Several of the tenant's sweeps (300 ms here) and of the timer polls later.
      await sleep(2_000);
      const later = await detail(org, jobId);
      assert.equal(later.status, 'scheduled', await storedJob(org, jobId));
      assert.equal(later.startedAt, null);
      assert.equal(relay.sends.length, 0, 'nothing sent');
      const held = await t.app.store.collection<MessageDoc>('messages').find({ tenantId: org.orgId }, { jobId });
      assert.deepEqual(
        held.map((m) => [m.status, m.nextAttemptAt]),
        [0, 1, 2].map(() => ['queued', at]),
        'each message is held until scheduledAt',
      );
    });

    test('cancel: a scheduled job sends nothing; a running job stops what no relay has; a completed job is 409', async () => {
      const org = await signup(t);
      const relay = relayFor(org, 3);
      await relay.connect();
      const scheduled = await bulk(org, {
        messages: entries(5),
        scheduledAt: new Date(Date.now() + 1_000).toISOString(),
      });
      const cancelled = await t.request('POST', `/api/v1/messages/bulk/${scheduled.body.jobId}/cancel`, {
        token: org.ownerToken,
      });
      assert.equal(cancelled.status, 200);
      assert.equal(cancelled.body.status, 'cancelled');
      await sleep(1_800);
      assert.equal(relay.sends.length, 0, 'a cancelled scheduled job sends nothing');
      const cancelledDetail = await detail(org, scheduled.body.jobId);
      assert.deepEqual(cancelledDetail.counts, {
        queued: 0,
        processing: 0,
        sent: 0,
        delivered: 0,
        failed: 0,
        cancelled: 5,
        skipped: 0,
      });
      assert.equal(cancelledDetail.status, 'cancelled');

      const running = await bulk(org, { messages: entries(20) });
      const jobId = running.body.jobId;
      await waitFor(() => relay.sends.length === 3, 5_000, 'three handed to the relay');
      const stop = await t.request('POST', `/api/v1/messages/bulk/${jobId}/cancel`, { token: org.ownerToken });
      assert.equal(stop.status, 200);
      assert.deepEqual(
        stop.body.counts,
        { queued: 0, processing: 3, sent: 0, delivered: 0, failed: 0, cancelled: 17, skipped: 0 },
        'counted as cancelled from the answer on',
      );
      for (const frame of relay.sends) await relay.report(frame.messageId, 'delivered');
      await waitFor(
        async () => (await detail(org, jobId)).completedAt !== null,
        60_000,
        'the handed-out sends finish',
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}; ${relay.sends.length} handed out; stored: ${await storedJob(org, jobId)}`);
      });
      await sleep(300);
      assert.equal(relay.sends.length, 3, 'nothing more was handed out');
      const after = await detail(org, jobId);
      assert.equal(after.status, 'cancelled');
      assert.deepEqual(after.counts, {
        queued: 0,
        processing: 0,
        sent: 0,
        delivered: 3,
        failed: 0,
        cancelled: 17,
        skipped: 0,
      });
      assert.equal(after.progress, 1);
      const stopped = await t.request('GET', `/api/v1/messages/bulk/${jobId}/results?status=cancelled&limit=1`, {
        token: org.ownerToken,
      });
      assert.equal(stopped.body.pagination.total, 17);
      assert.equal(stopped.body.data[0].error, 'cancelled');
      const msg = await t.request('GET', `/api/v1/messages/${stopped.body.data[0].messageId}/status`, {
        token: org.ownerToken,
      });
      assert.equal(msg.body.status, 'failed');
      assert.equal(msg.body.lastError, 'cancelled');
      const stats = await t.request('GET', '/api/v1/messages/queue/stats', { token: org.ownerToken });
      assert.equal(stats.body.deadLetter, 0, 'cancelled messages are not dead letters');
      const cancelledIds = new Set(
        (
          await t.request('GET', `/api/v1/messages/bulk/${jobId}/results?status=cancelled&limit=100`, {
            token: org.ownerToken,
          })
        ).body.data.map((r: { messageId: string }) => r.messageId),
      );
      await waitFor(
        async () => {
          const failedEvents = (
            await t.request('GET', '/api/v1/events?type=message.failed&limit=100', { token: org.ownerToken })
          ).body.data.filter((e: { data: { id: string } }) => cancelledIds.has(e.data.id));
          return (
            failedEvents.length === 17 &&
            failedEvents.every(
              (e: { data: { error: string; status: string } }) =>
                e.data.error === 'cancelled' && e.data.status === 'failed',
            )
          );
        },
        10_000,
        'one message.failed event for each cancelled message',
      );

      const small = await bulk(org, { messages: entries(2) });
      await waitFor(() => relay.sends.length === 5, 5_000, 'dispatched');
      for (const frame of relay.sends.slice(3)) await relay.report(frame.messageId, 'delivered');
      await waitFor(async () => (await detail(org, small.body.jobId)).status === 'completed', 20_000, 'completed');
      const late = await t.request('POST', `/api/v1/messages/bulk/${small.body.jobId}/cancel`, {
        token: org.ownerToken,
      });
      assert.equal(late.status, 409);
      assert.equal(late.body.error, 'conflict');
    });

    test("fairness: a single send queued after a 2,000-message job is dispatched before the job's 100th message", async () => {
      const org = await signup(t);
      const job = await bulk(org, { messages: entries(2_000, 'campaign') });
      assert.equal(job.status, 201);
      const single = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155559999', body: 'one-off' },
      });
      assert.equal(single.status, 201);
      const relay = relayFor(org, 10);
      await relay.connect();
      const reported = new Set<string>();
      await waitFor(
        async () => {
          for (const f of relay.sends)
            if (!reported.has(f.messageId)) (reported.add(f.messageId), await relay.report(f.messageId, 'sent'));
          return relay.sends.some((f) => f.messageId === single.body.id) || relay.sends.length >= 150;
        },
        20_000,
        'the single send is dispatched',
      );
      const position = relay.sends.findIndex((f) => f.messageId === single.body.id);
      assert.ok(position >= 0 && position < 100, `the single send went out at position ${position}`);
      await t.request('POST', `/api/v1/messages/bulk/${job.body.jobId}/cancel`, { token: org.ownerToken });
    });

    test('team and organization isolation; viewer reads, member writes', async () => {
      const org = await signup(t);
      const other = await signup(t);
      const team = await teamHeader(t, org);
      const created = await bulk(org, { messages: entries(2) }, team);
      assert.equal(created.status, 201);
      const jobId = created.body.jobId;
      assert.equal((await detail(org, jobId, team)).jobId, jobId);
      for (const path of [`/api/v1/messages/bulk/${jobId}`, `/api/v1/messages/bulk/${jobId}/results`]) {
        assert.equal(
          (await t.request('GET', path, { token: org.ownerToken })).status,
          404,
          `${path} from the default team`,
        );
        assert.equal(
          (await t.request('GET', path, { token: other.ownerToken })).status,
          404,
          `${path} from another organization`,
        );
      }
      assert.equal(
        (await t.request('POST', `/api/v1/messages/bulk/${jobId}/cancel`, { token: other.ownerToken })).status,
        404,
      );
      assert.equal(
        (await t.request('GET', '/api/v1/messages/bulk', { token: org.ownerToken })).body.pagination.total,
        0,
        'the default team sees none',
      );
      assert.equal(
        (await t.request('GET', '/api/v1/messages/bulk', { token: org.ownerToken, headers: team })).body.pagination
          .total,
        1,
      );
      const viewer = await apiKey(t, org, 'viewer');
      const member = await apiKey(t, org, 'member');
      assert.equal(
        (await t.request('GET', `/api/v1/messages/bulk/${jobId}`, { token: viewer, headers: team })).status,
        200,
      );
      assert.equal((await bulk(org, { messages: entries(1) }, team, viewer)).status, 403);
      assert.equal(
        (await t.request('POST', `/api/v1/messages/bulk/${jobId}/cancel`, { token: viewer, headers: team })).status,
        403,
      );
      assert.equal((await bulk(org, { messages: entries(1) }, team, member)).status, 201);
    });
  });
});
