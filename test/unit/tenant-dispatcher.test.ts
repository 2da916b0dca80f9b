import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import { TenantDispatcher } from '../../src/actors/tenant/tenant-dispatcher.ts';
import type { TenantState } from '../../src/actors/tenant/tenant-state.ts';
import { queueItemOf, type StatusReport } from '../../src/actors/tenant/protocol.ts';
import type { RelayDoc } from '../../src/relays/relay-store.ts';
import { cancelledJobIds, zeroCounts, type JobDoc } from '../../src/jobs/job-store.ts';
import type { ActorContext } from '../../src/runtime/types.ts';
import {
  config,
  healthOff,
  message,
  org,
  phone,
  recordingContext,
  relay,
  scope,
  tenantStore,
} from './tenant-fixtures.ts';

/**
 * A tenant actor's dispatcher on a real embedded store of its own, activated
 * with these relays online and these messages stored. The actor context is a
 * stand-in that records what is sent; `handedOut` also plays the relay
 * actor's part (the claim that makes a handed-out message `processing`, one
 * more attempt).
 */
async function open(t: TestContext, relays: RelayDoc[], stored: MessageDoc[] = [], pacing = config.pacing) {
  const { db, events, outbox, rollups } = await tenantStore(t, relays, stored);
  const dispatcher = new TenantDispatcher({
    config: { ...config, pacing },
    db,
    outbox,
    rollups,
    closedSources: (orgId, closed) => cancelledJobIds(db, orgId, closed),
  });
  const { ctx, sent } = recordingContext(undefined as unknown as TenantState);
  let seq = 0;
  ctx.state = await dispatcher.activate(ctx as unknown as ActorContext<undefined>);
  /** One actor message, handled as the tenant actor does: nothing in the state is fresh after it. */
  const handle = async (run: () => Promise<void>) => {
    ctx.id = `am_${++seq}`;
    try {
      await run();
    } finally {
      ctx.state.fresh = false;
    }
  };
  /** Removes and returns what was sent of this kind since the last look. */
  const drain = (type: string, kind: string) => {
    const matching = sent.filter((s) => s.type === type && s.msg.kind === kind);
    sent.splice(0, sent.length, ...sent.filter((s) => !matching.includes(s)));
    return matching;
  };
  const attachments = new Map<string, { epoch: string; session: number }>();
  const joins = () => {
    for (const a of drain('relay', 'attach'))
      attachments.set(a.key, { epoch: String(a.msg.epoch), session: Number(a.msg.session) });
  };
  joins();
  /** A grant of a relay actor to the current join of its relay (or to an earlier one). */
  const grantFor = (relayId: string, credits: number, epoch?: string) => {
    joins();
    const join = attachments.get(relayId)!;
    return {
      session: join.session,
      epoch: epoch ?? join.epoch,
      credits,
      capacity: relays.find((r) => r.id === relayId)!.capacity,
    };
  };
  return {
    events,
    /** Stores queued messages and tells the dispatcher, as the send path does. */
    queue: async (...docs: MessageDoc[]) => {
      await db.messages.insertMany(scope, docs);
      await handle(() =>
        dispatcher.enqueue(
          ctx,
          docs.map((d) => queueItemOf(d, 'accepted')),
        ),
      );
    },
    grant: (relayId: string, credits: number, epoch?: string) =>
      handle(() => dispatcher.grant(ctx, { relayId, ...grantFor(relayId, credits, epoch) })),
    /** A relay's report on an attempt, through its relay actor; `freed` credits come with it. */
    report: (
      relayId: string,
      messageId: string,
      attempt: number,
      status: StatusReport['status'],
      freed = 0,
      error?: string,
    ) =>
      handle(() =>
        dispatcher.status(ctx, {
          relayId,
          session: 1,
          messageId,
          attempt,
          status,
          at: new Date().toISOString(),
          ...(error ? { error } : {}),
          ...(freed ? { grant: grantFor(relayId, freed) } : {}),
        }),
      ),
    /** Reports that waited side by side, handed to the batch handler together. */
    reports: (
      list: Array<
        [relayId: string, messageId: string, attempt: number, status: StatusReport['status'], freed?: number]
      >,
    ) =>
      handle(() =>
        dispatcher.statuses(
          ctx,
          list.map(([relayId, messageId, attempt, status, freed]) => ({
            relayId,
            session: 1,
            messageId,
            attempt,
            status,
            at: new Date().toISOString(),
            ...(freed ? { grant: grantFor(relayId, freed) } : {}),
          })),
        ),
      ),
    retry: (messageId: string, attempts?: number) => handle(() => dispatcher.retry(ctx, messageId, attempts)),
    /** A cancel's close of a bulk job, as the request asks for it. */
    closeSource: (source: string) => handle(() => dispatcher.closeSource(ctx, source)),
    /** One look of the activation's sweep chain (its next timer is left out). */
    sweep: async () => {
      await handle(() => dispatcher.sweep(ctx, ctx.state.sweepChain!));
      drain('tenant', 'sweep');
    },
    closed: () => [...ctx.state.closedSources],
    jobs: db.jobs,
    /** The hand-overs since the last look, per relay, each claimed in the store as its relay actor would. */
    handedOut: async () => {
      const out: [string, string[]][] = [];
      for (const d of drain('relay', 'deliver')) {
        const ids = (d.msg.items as { id: string }[]).map((i) => i.id);
        for (const id of ids) {
          await db.messages.updateOne(
            scope,
            { id, status: 'queued' },
            {
              $set: { status: 'processing', relayId: d.key, processingAt: new Date().toISOString() },
              $inc: { attempts: 1 },
            },
          );
        }
        out.push([d.key, ids]);
      }
      return out;
    },
    /** The retry timers set since the last look: message and delay. */
    retryTimers: () => drain('tenant', 'retry').map((s) => [s.msg.messageId, s.delayMs, s.msg.attempts] as const),
    doc: async (id: string) => (await db.messages.findOne(scope, { id }))!,
    /** Why a queued message waits, as the status record asks the dispatch. */
    waiting: (id: string) => dispatcher.waiting(ctx, id),
    db,
  };
}

test('activation queues what the store holds, highest priority first, leaving out a message waiting on its backoff', async (t) => {
  const later = new Date(Date.now() + 3_600_000).toISOString();
  const d = await open(
    t,
    [relay('r1', 10)],
    [
      message('low'),
      message('backing_off', { priority: 90, nextAttemptAt: later }),
      message('mid', { priority: 50 }),
      message('high', { priority: 90 }),
      message('sent_already', { status: 'sent', priority: 100 }),
    ],
  );
  assert.deepEqual(await d.handedOut(), [], 'no credit yet: nothing handed out');
  await d.grant('r1', 10);
  assert.deepEqual(await d.handedOut(), [['r1', ['high', 'mid', 'low']]]);
});

test('the highest priority goes first, one freed credit at a time', async (t) => {
  const d = await open(t, [relay('r1', 1)]);
  await d.queue(message('low1'), message('mid', { priority: 50 }), message('low2'), message('high', { priority: 90 }));
  assert.deepEqual(await d.handedOut(), [], 'no credit yet');
  const order: string[] = [];
  await d.grant('r1', 1);
  for (let i = 0; i < 4; i++) {
    const [[relayId, ids]] = (await d.handedOut()) as [[string, string[]]];
    assert.equal(relayId, 'r1');
    assert.equal(ids.length, 1, 'one credit, one message');
    order.push(ids[0]!);
    await d.report('r1', ids[0]!, 1, 'sent', 1);
  }
  assert.deepEqual(order, ['high', 'mid', 'low1', 'low2']);
  assert.deepEqual(await d.handedOut(), []);
});

test("a single send queued behind a bulk job's backlog goes out second, not after the job", async (t) => {
  const d = await open(t, [relay('r1', 2)]);
  const job = Array.from({ length: 200 }, (_, i) => message(`job_${i}`, { jobId: 'job_a', jobIndex: i }));
  await d.queue(...job);
  await d.queue(message('single'));
  await d.grant('r1', 2);
  assert.deepEqual(await d.handedOut(), [['r1', ['job_0', 'single']]]);
  await d.report('r1', 'job_0', 1, 'sent', 1);
  await d.report('r1', 'single', 1, 'sent', 1);
  assert.deepEqual(
    await d.handedOut(),
    [
      ['r1', ['job_1']],
      ['r1', ['job_2']],
    ],
    'the job goes on, a freed credit at a time',
  );
});

test('a message from a number goes to the relay that owns it, and waits for it rather than going to another relay', async (t) => {
  const d = await open(t, [relay('owner', 1, [phone]), relay('other', 5)]);
  await d.grant('owner', 1);
  await d.grant('other', 5);
  await d.queue(
    message('from1', { fromNumber: phone }),
    message('from2', { fromNumber: phone }),
    message('any'),
    message('unowned', { fromNumber: '+19995550100' }),
  );
  assert.deepEqual(await d.handedOut(), [
    ['owner', ['from1']],
    ['other', ['any', 'unowned']],
  ]);
  assert.equal((await d.doc('from2')).status, 'queued', 'its owner is full: it waits');
  await d.report('owner', 'from1', 1, 'sent', 1);
  assert.deepEqual(await d.handedOut(), [['owner', ['from2']]]);
});

test('a relay is never handed more than its credits; a grant of an earlier join adds none', async (t) => {
  const d = await open(t, [relay('r1', 3), relay('r2', 2)]);
  await d.grant('r1', 3);
  await d.grant('r2', 2);
  await d.queue(...Array.from({ length: 10 }, (_, i) => message(`m${i}`)));
  const first = new Map(await d.handedOut());
  assert.equal(first.get('r1')?.length, 3);
  assert.equal(first.get('r2')?.length, 2);
  await d.queue(message('m10'));
  assert.deepEqual(await d.handedOut(), [], 'every credit is used');

  await d.grant('r2', 4, 'an-earlier-join');
  assert.deepEqual(await d.handedOut(), [], "another join's credits are not this one's");

  const settled = first.get('r2')![0]!;
  await d.report('r2', settled, 1, 'delivered', 1);
  const next = await d.handedOut();
  assert.equal(next.length, 1);
  assert.equal(next[0]![0], 'r2');
  assert.equal(next[0]![1].length, 1, 'one credit freed, one message handed out');
  assert.equal((await d.doc(settled)).status, 'delivered');
});

/** Hands `id` out, fails its attempt with the relay's credit freed, and returns the retry timer set for it. */
async function failOnce(d: Awaited<ReturnType<typeof open>>, id: string, attempt: number) {
  assert.deepEqual(await d.handedOut(), [['r1', [id]]]);
  assert.equal((await d.doc(id)).attempts, attempt);
  const before = Date.now();
  await d.report('r1', id, attempt, 'failed', 1, `Messages error ${attempt}`);
  return { before, after: Date.now(), timers: d.retryTimers(), doc: await d.doc(id) };
}

test('a failed attempt is tried again after a backoff that grows four times, then goes to a relay again', async (t) => {
  const d = await open(t, [relay('r1', 1)]);
  await d.grant('r1', 1);
  await d.queue(message('m1'));
  for (const [attempt, nominal] of [
    [1, 1_000],
    [2, 4_000],
  ] as const) {
    const { before, after, timers, doc } = await failOnce(d, 'm1', attempt);
    assert.equal(timers.length, 1, 'one retry timer');
    const [messageId, delayMs] = timers[0]!;
    assert.equal(messageId, 'm1');
    assert.ok(delayMs! >= nominal * 0.8 && delayMs! <= nominal * 1.2, `attempt ${attempt}: ${delayMs} ms`);
    assert.deepEqual([doc.status, doc.relayId, doc.lastError], ['queued', null, `Messages error ${attempt}`]);
    const due = Date.parse(doc.nextAttemptAt!);
    assert.ok(due >= before + nominal * 0.8 && due <= after + nominal * 1.2, 'the store has when it is due');
    assert.deepEqual(await d.handedOut(), [], 'the credit is free, but the message waits for its backoff');
    await d.retry('m1');
  }
  assert.deepEqual(await d.handedOut(), [['r1', ['m1']]]);
  assert.equal((await d.doc('m1')).attempts, 3);
});

test('a retry timer that comes after a later attempt failed hands out nothing: the later backoff holds', async (t) => {
  const d = await open(t, [relay('r1', 1)]);
  await d.grant('r1', 1);
  await d.queue(message('m1'));
  const first = (await failOnce(d, 'm1', 1)).timers;
  assert.deepEqual(
    first.map(([id, , attempts]) => [id, attempts]),
    [['m1', 1]],
    'the timer names the attempt it follows',
  );
  // The sweep found the message due first and queued it: attempt 2 is made, and fails.
  await d.retry('m1', 1);
  const second = (await failOnce(d, 'm1', 2)).timers;
  assert.deepEqual(
    second.map(([id, , attempts]) => [id, attempts]),
    [['m1', 2]],
  );
  await d.retry('m1', 1);
  assert.deepEqual(await d.handedOut(), [], "attempt 1's late timer does not cut attempt 2's backoff short");
  assert.equal((await d.doc('m1')).attempts, 2);
  await d.retry('m1', 2);
  assert.deepEqual(await d.handedOut(), [['r1', ['m1']]]);
});

test('after the last attempt the message is failed and dead-lettered, with one message.failed event and no retry', async (t) => {
  const d = await open(t, [relay('r1', 1)]);
  await d.grant('r1', 1);
  await d.queue(message('m1'));
  for (const attempt of [1, 2]) {
    await failOnce(d, 'm1', attempt);
    await d.retry('m1');
  }
  const { timers, doc } = await failOnce(d, 'm1', 3);
  assert.deepEqual(timers, [], 'no retry after the last attempt');
  assert.deepEqual(
    [doc.status, doc.deadLettered, doc.lastError, doc.attempts],
    ['failed', true, 'Messages error 3', 3],
  );
  assert.ok(doc.failedAt);
  const failed = (await d.events.read('test', 'c1', 100)).filter((e) => e.event.event === 'message.failed');
  assert.equal(failed.length, 1);
  assert.equal(failed[0]!.event.data.id, 'm1');
  await d.retry('m1');
  assert.deepEqual(await d.handedOut(), [], 'a stray retry timer hands out nothing');
});

test('a report on an earlier attempt changes nothing and frees no credit', async (t) => {
  const d = await open(t, [relay('r1', 1)]);
  await d.grant('r1', 1);
  await d.queue(message('m1'));
  await failOnce(d, 'm1', 1);
  await d.retry('m1');
  assert.deepEqual(await d.handedOut(), [['r1', ['m1']]]);
  const inFlight = await d.doc('m1');
  assert.equal(inFlight.attempts, 2);
  await d.queue(message('m2'));

  for (const status of ['failed', 'sent', 'delivered'] as const)
    await d.report('r1', 'm1', 1, status, 0, 'a late report');
  const after = await d.doc('m1');
  assert.deepEqual(
    [after.status, after.attempts, after.lastError, after.sentAt],
    ['processing', 2, inFlight.lastError, null],
  );
  assert.deepEqual(d.retryTimers(), [], 'no retry started');
  assert.deepEqual(await d.handedOut(), [], 'no credit came back: m2 waits');

  await d.report('r1', 'm1', 2, 'sent', 1);
  assert.equal((await d.doc('m1')).status, 'sent');
  assert.deepEqual(await d.handedOut(), [['r1', ['m2']]]);
});

test('reports handled as a batch end as the same reports one by one would: one write and one message.sent per message, stale ones ignored', async (t) => {
  const d = await open(t, [relay('r1', 3)]);
  await d.grant('r1', 3);
  await d.queue(message('m1'), message('m2'), message('m3'), message('m4'));
  assert.deepEqual(await d.handedOut(), [['r1', ['m1', 'm2', 'm3']]]);
  await d.reports([
    ['r1', 'm1', 1, 'sent'],
    ['r1', 'm1', 1, 'delivered', 1],
    ['r1', 'm2', 1, 'delivered', 1],
    ['r1', 'm3', 2, 'sent'],
    ['r1', 'm2', 1, 'read'],
    ['r1', 'm1', 1, 'sent'],
  ]);
  const [m1, m2, m3] = [await d.doc('m1'), await d.doc('m2'), await d.doc('m3')];
  assert.deepEqual(
    [m1.status, Boolean(m1.sentAt), Boolean(m1.deliveredAt), m1.readAt],
    ['delivered', true, true, null],
  );
  assert.deepEqual(
    [m2.status, m2.sentAt === m2.deliveredAt, Boolean(m2.readAt)],
    ['delivered', true, true],
    'delivered with no sent before it counts as sent at the same time',
  );
  assert.deepEqual([m3.status, m3.sentAt], ['processing', null], 'a report on another attempt changes nothing');
  for (const m of [m1, m2]) assert.equal(m.outbox, undefined, 'published and cleared');
  const sent = (await d.events.read('test', 'c1', 100))
    .filter((e) => e.event.event === 'message.sent')
    .map((e) => e.event.data.id);
  assert.deepEqual(sent.sort(), ['m1', 'm2'], 'one message.sent each');
  assert.deepEqual(await d.handedOut(), [['r1', ['m4']]], 'the credits that came back hand out what waits');
});

test('message.delivered and message.read once each, in order: a repeated delivered emits nothing, and a read before sent is stored is sent, delivered and read; the hand-over checkpoint comes with the first report', async (t) => {
  const d = await open(t, [relay('r1', 2)]);
  await d.grant('r1', 2);
  await d.queue(message('twice'), message('early'));
  assert.deepEqual(await d.handedOut(), [['r1', ['twice', 'early']]]);
  await d.report('r1', 'twice', 1, 'sent', 1);
  await d.report('r1', 'twice', 1, 'delivered');
  await d.report('r1', 'twice', 1, 'delivered');
  await d.report('r1', 'early', 1, 'read', 1);
  for (const status of ['sent', 'delivered', 'read'] as const) await d.report('r1', 'early', 1, status);
  const events = (await d.events.read('test', 'c1', 100)).map((e) => e.event);
  assert.deepEqual(
    events.map((e) => [e.data.id, e.event, e.data.hop]),
    [
      ['twice', 'message.checkpoint', 'handed_to_relay'],
      ['twice', 'message.sent', undefined],
      ['twice', 'message.delivered', undefined],
      ['early', 'message.checkpoint', 'handed_to_relay'],
      ['early', 'message.sent', undefined],
      ['early', 'message.delivered', undefined],
      ['early', 'message.read', undefined],
    ],
  );
  const [twice, early] = [await d.doc('twice'), await d.doc('early')];
  assert.deepEqual([twice.status, twice.readAt], ['delivered', null]);
  assert.deepEqual(
    [early.status, early.sentAt, early.deliveredAt],
    ['delivered', early.readAt, early.readAt],
    'a read first: sent and delivered at its time',
  );
  const delivered = events.find((e) => e.event === 'message.delivered' && e.data.id === 'twice')!;
  assert.deepEqual(delivered.data, {
    id: 'twice',
    to: twice.to,
    from: null,
    body: 'twice',
    status: 'delivered',
    conversationId: 'conv_1',
    deliveredAt: twice.deliveredAt,
  });
  const read = events.find((e) => e.event === 'message.read')!;
  assert.deepEqual(read.data, {
    id: 'early',
    to: early.to,
    from: null,
    body: 'early',
    status: 'delivered',
    conversationId: 'conv_1',
    readAt: early.readAt,
  });
  assert.equal(early.outbox, undefined, 'published and cleared');
});

/** A bulk job of the team as the store has it. */
const bulkJob = (id: string, fields: Partial<JobDoc> = {}): JobDoc => ({
  id,
  tenantId: org,
  teamId: 'team_1',
  status: 'processing',
  totalRecipients: 4,
  scheduledAt: null,
  startedAt: '2026-01-01T00:00:00.000Z',
  completedAt: null,
  cancelledAt: null,
  counts: zeroCounts(),
  trackTick: 0,
  released: true,
  conversationsTouched: true,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  ...fields,
});

test('a cancelled job stays closed while the store shows it processing again (a lost write), and leaves the closed set once it finishes', async (t) => {
  const d = await open(t, [relay('r1', 3)]);
  const jobScope = { tenantId: org, teamId: 'team_1' };
  await d.jobs.insertOne(jobScope, bulkJob('job_a'));
  await d.grant('r1', 1);
  await d.queue(...Array.from({ length: 4 }, (_, i) => message(`job_${i}`, { jobId: 'job_a', jobIndex: i })));
  assert.deepEqual(await d.handedOut(), [['r1', ['job_0']]]);
  await d.jobs.updateOne(jobScope, { id: 'job_a' }, { $set: { status: 'cancelled' } });
  await d.closeSource('job_a');
  // A write of the job that read it before the cancel lands after it (FerretDB 1.x): the store shows it running again.
  await d.jobs.updateOne(jobScope, { id: 'job_a' }, { $set: { status: 'processing' } });
  await d.sweep();
  assert.deepEqual(d.closed(), ['job_a']);
  await d.grant('r1', 2);
  assert.deepEqual(await d.handedOut(), [], 'nothing more of the cancelled job is handed out');

  await d.jobs.updateOne(
    jobScope,
    { id: 'job_a' },
    { $set: { status: 'cancelled', completedAt: '2026-01-01T00:01:00.000Z' } },
  );
  await d.sweep();
  assert.deepEqual(d.closed(), [], 'a finished job drops out');
});

test('an organization whose messages were sent before line contacts were kept: their recipients are known to their lines, once', async (t) => {
  const sentBefore = (id: string, to: string, sentAt: string, fields: Partial<MessageDoc> = {}) =>
    message(id, { to, status: 'delivered', relayId: 'r1', attempts: 1, sentAt, ...fields });
  const d = await open(
    t,
    [relay('r1', 10)],
    [
      sentBefore('old_a', '+14155551001', '2026-01-01T00:00:00.000Z'),
      sentBefore('old_a_again', '+14155551001', '2025-12-01T00:00:00.000Z'),
      sentBefore('old_b', '+14155551002', '2026-01-02T00:00:00.000Z'),
      sentBefore('old_c', '+14155551003', '2026-01-03T00:00:00.000Z', { fromNumber: phone }),
      message('never_sent', { to: '+14155551004', status: 'failed' }),
    ],
    { perSecond: 1_000, burst: 1_000, newContactsPerDay: 1, ...healthOff },
  );
  const contacts = await d.db.lineContacts.find(scope, {}, { sort: { line: 1, to: 1 } });
  assert.deepEqual(
    contacts.map((c) => [c.line, c.to, c.firstAt]),
    [
      [phone, '+14155551003', '2026-01-03T00:00:00.000Z'],
      ['relay:r1', '+14155551001', '2025-12-01T00:00:00.000Z'],
      ['relay:r1', '+14155551002', '2026-01-02T00:00:00.000Z'],
    ],
  );
  assert.ok((await d.db.orgPacing.findOne(scope, { id: org }))?.contactsFromHistoryAt, 'marked done');
  await d.grant('r1', 10);
  await d.queue(
    message('a', { to: '+14155551001' }),
    message('b', { to: '+14155551002' }),
    message('new_1', { to: '+14155551005' }),
    message('new_2', { to: '+14155551006' }),
  );
  assert.deepEqual(await d.handedOut(), [['r1', ['a', 'b', 'new_1']]], 'known recipients go; one new one a day');
});

test('a line out of its rate holds its own messages only: a message from a number of the same relay still goes', async (t) => {
  const d = await open(t, [relay('r1', 10, [phone])], [], {
    perSecond: 1,
    burst: 1,
    newContactsPerDay: 10,
    ...healthOff,
  });
  await d.grant('r1', 10);
  await d.queue(
    message('relay_1', { to: '+14155551001' }),
    message('relay_2', { to: '+14155551002' }),
    message('number_1', { fromNumber: phone, to: '+14155551001' }),
  );
  assert.deepEqual(await d.handedOut(), [['r1', ['relay_1', 'number_1']]], 'each line sends its burst of one');
  assert.equal((await d.waiting('relay_2'))?.waitingFor, 'line_rate');
});
