import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { JobTracker } from '../../src/actors/job/job-tracker.ts';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { jobCollections, zeroCounts, type JobDoc } from '../../src/jobs/job-store.ts';
import { createLogger } from '../../src/log.ts';
import { messagingCollections, type MessageDoc } from '../../src/messages/message-store.ts';
import type { ActorClient, ActorContext } from '../../src/runtime/actor.ts';
import type { jobProtocol } from '../../src/actors/job/protocol.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';
import { message as queuedMessage } from './tenant-fixtures.ts';

const org = 'org_jobs';
const team = 'team_1';
const scope = { tenantId: org, teamId: team };
const jobId = 'job_1';
const at = '2026-01-01T00:00:00.000Z';

const job = (fields: Partial<JobDoc> = {}): JobDoc => ({
  id: jobId,
  tenantId: org,
  teamId: team,
  status: 'processing',
  totalRecipients: 3,
  scheduledAt: null,
  startedAt: at,
  completedAt: null,
  cancelledAt: null,
  counts: { ...zeroCounts(), queued: 3 },
  trackTick: 4,
  released: true,
  conversationsTouched: true,
  createdAt: at,
  updatedAt: at,
  ...fields,
});

/** A queued message of the job, numbered `i`, all accepted at `at`. */
const message = (i: number, fields: Partial<MessageDoc> = {}): MessageDoc =>
  queuedMessage(`msg_${i}`, {
    tenantId: org,
    teamId: team,
    to: `+1415555010${i}`,
    participant: `+1415555010${i}`,
    conversationId: `conv_${i}`,
    body: `hello ${i}`,
    queuedAt: at,
    createdAt: at,
    updatedAt: at,
    jobId,
    jobIndex: i,
    ...fields,
  });

interface Sent {
  type: string;
  key: string;
  msg: { kind: string; [field: string]: unknown };
}

/** A job actor's tracker on an embedded store of its own holding this job and its messages; the actor context records what is sent. */
async function open(t: TestContext, stored: JobDoc) {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-job-'));
  const store = new EmbeddedStore(dir);
  const db = { ...messagingCollections(store), ...jobCollections(store) };
  const events = new StoreEventStream(store);
  await store.init();
  t.after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  await db.jobs.insertOne(scope, stored);
  await db.messages.insertMany(scope, [
    message(0, { status: 'processing', relayId: 'r1', attempts: 1 }),
    message(1),
    message(2),
  ]);
  const log = createLogger('silent');
  const tracker = new JobTracker({
    db,
    events,
    jobs: undefined as unknown as ActorClient<typeof jobProtocol>,
    log,
    trackMs: 1_000,
  });
  const sent: Sent[] = [];
  const ctx: ActorContext = {
    type: 'job',
    key: jobId,
    id: 'am_1',
    delivery: 1,
    log,
    state: undefined,
    send: async (to, key, msg) => {
      sent.push({ type: to.type, key, msg: msg as Sent['msg'] });
      return `am_1:${sent.length}`;
    },
    derivedId: (label) => `am_1:${label}`,
    deactivate: () => {},
    owned: new AbortController().signal,
  };
  return {
    stop: (cancelledAt?: string) => tracker.stop(ctx, org, team, cancelledAt),
    sent,
    job: async () => (await db.jobs.findOne(scope, { id: jobId }))!,
    statuses: async () =>
      (await db.messages.find(scope, { jobId }, { sort: { jobIndex: 1 } })).map(
        (m) => `${m.status}${m.lastError ? ` (${m.lastError})` : ''}`,
      ),
  };
}

test('a stop finds its cancel in the store: the queued messages are stopped and the progress followed, the dispatch not told again', async (t) => {
  const j = await open(t, job({ status: 'cancelled', cancelledAt: '2026-01-01T00:00:05.000Z' }));
  await j.stop('2026-01-01T00:00:05.000Z');
  assert.deepEqual(
    await j.statuses(),
    ['processing', 'failed (cancelled)', 'failed (cancelled)'],
    'what a relay has finishes as reported',
  );
  assert.deepEqual(
    j.sent.map((s) => [s.type, s.msg.kind]),
    [['job', 'track']],
  );
  assert.equal(j.sent[0]!.msg.tick, 4, 'the chain goes on from where the job is');
});

test('a stop whose cancel the store lost (a concurrent write of the job put it back as processing) makes the cancel again and closes the dispatch again', async (t) => {
  const j = await open(t, job({ status: 'processing' }));
  await j.stop('2026-01-01T00:00:05.000Z');
  const after = await j.job();
  assert.equal(after.status, 'cancelled');
  assert.equal(after.cancelledAt, '2026-01-01T00:00:05.000Z', 'when the request cancelled it');
  assert.deepEqual(await j.statuses(), ['processing', 'failed (cancelled)', 'failed (cancelled)']);
  assert.deepEqual(
    j.sent.map((s) => [s.type, s.key, s.msg.kind]),
    [
      ['tenant', org, 'close-source'],
      ['job', jobId, 'track'],
    ],
  );
  assert.equal(j.sent[0]!.msg.source, jobId);
});

test('a stop for a job that finished first changes nothing', async (t) => {
  const j = await open(t, job({ status: 'completed', completedAt: '2026-01-01T00:00:04.000Z' }));
  await j.stop('2026-01-01T00:00:05.000Z');
  assert.equal((await j.job()).status, 'completed');
  assert.deepEqual(await j.statuses(), ['processing', 'queued', 'queued']);
  assert.deepEqual(j.sent, []);
});
