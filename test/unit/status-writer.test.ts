import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StatusReport } from '../../src/actors/tenant/protocol.ts';
import { StatusWriter } from '../../src/actors/tenant/status-writer.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import { config, message, recordingContext, scope, tenantState, tenantStore } from './tenant-fixtures.ts';

const inFlight = (id: string) =>
  message(id, { status: 'processing', relayId: 'r1', attempts: 1, processingAt: new Date().toISOString() });
const report = (messageId: string, fields: Partial<StatusReport> = {}): StatusReport => ({
  relayId: 'r1',
  session: 1,
  messageId,
  attempt: 1,
  status: 'sent',
  at: new Date().toISOString(),
  ...fields,
});
const freed = (credits: number) => ({ session: 1, epoch: 'epoch_r1', credits, capacity: 10 });

test('reports are written and the credits they free are counted and said, not handed out', async (t) => {
  const { db, outbox, rollups } = await tenantStore(t, [], [inFlight('m1'), inFlight('m2')]);
  const writer = new StatusWriter({ config, db, outbox, rollups });
  const state = tenantState([{ id: 'r1', credits: 0 }]);
  const { ctx, sent } = recordingContext(state);
  assert.equal(await writer.settle(ctx, state, [report('m1', { grant: freed(1) }), report('m2')]), true);
  assert.equal(state.relays.get('r1')!.credits, 1);
  assert.deepEqual(
    (await db.messages.find(scope, {}, { sort: { id: 1 } })).map((m) => m.status),
    ['sent', 'sent'],
  );
  assert.deepEqual(sent, [], 'nothing is handed out or scheduled here');
  // A report of an earlier attempt, with a grant of another join: nothing changes, nothing is released.
  assert.equal(
    await writer.settle(ctx, state, [
      report('m1', { attempt: 0, status: 'delivered', grant: { ...freed(1), epoch: 'old' } }),
    ]),
    false,
  );
  assert.equal((await db.messages.findOne(scope, { id: 'm1' }))!.status, 'sent');
});

test('a send timeout fails only the attempt still in flight: a retry after the backoff', async (t) => {
  const { db, outbox, rollups } = await tenantStore(t, [], [inFlight('m1')]);
  const writer = new StatusWriter({ config, db, outbox, rollups });
  const state = tenantState([{ id: 'r1', credits: 0 }]);
  const { ctx, sent } = recordingContext(state);
  assert.equal(await writer.timedOut(ctx, 'm1', 'r1', 2), false, 'another attempt');
  assert.equal((await db.messages.findOne(scope, { id: 'm1' }))!.status, 'processing');
  assert.equal(await writer.timedOut(ctx, 'm1', 'r1', 1), true);
  const doc = (await db.messages.findOne(scope, { id: 'm1' }))!;
  assert.deepEqual([doc.status, doc.relayId], ['queued', null]);
  assert.match(String(doc.lastError), /did not report on the send within 60000 ms/);
  assert.deepEqual(
    sent.map((s) => [s.type, s.msg.kind, s.msg.messageId]),
    [['tenant', 'retry', 'm1']],
  );
});

test('a failure report counts its grant, and after the last attempt the message is failed and dead-lettered', async (t) => {
  const last = message('m1', { status: 'processing', relayId: 'r1', attempts: config.messageMaxAttempts });
  const { db, outbox, rollups } = await tenantStore(t, [], [last]);
  const writer = new StatusWriter({ config, db, outbox, rollups });
  const state = tenantState([{ id: 'r1', credits: 0 }]);
  const { ctx, sent } = recordingContext(state);
  await writer.failed(
    ctx,
    state,
    report('m1', { status: 'failed', attempt: config.messageMaxAttempts, error: 'no service', grant: freed(1) }),
  );
  assert.equal(state.relays.get('r1')!.credits, 1);
  const doc = (await db.messages.findOne(scope, { id: 'm1' }))!;
  assert.deepEqual([doc.status, doc.deadLettered, doc.lastError], ['failed', true, 'no service']);
  assert.deepEqual(sent, [], 'no retry');
});

test("Messages' own error fails the message with its reason: not_registered at once, and any error after the send", async (t) => {
  const wasSent = message('m2', { status: 'sent', relayId: 'r1', attempts: 1, sentAt: new Date().toISOString() });
  const { db, outbox, rollups } = await tenantStore(t, [], [inFlight('m1'), wasSent, inFlight('m3')]);
  const writer = new StatusWriter({ config, db, outbox, rollups });
  const state = tenantState([{ id: 'r1', credits: 0 }]);
  const { ctx, sent } = recordingContext(state);
  const failure = (reason: 'not_registered' | 'network') => ({
    status: 'failed' as const,
    error: `Messages reported error ${reason === 'network' ? 3 : 22}`,
    reason,
  });
  await writer.failed(ctx, state, report('m1', { ...failure('not_registered'), service: 'iMessage' }));
  // An error without a reason (a relay's own failure) cannot undo a send.
  await writer.failed(ctx, state, report('m2', { status: 'failed', error: 'osascript failed' }));
  assert.equal((await db.messages.findOne(scope, { id: 'm2' }))!.status, 'sent');
  await writer.failed(ctx, state, report('m2', failure('network')));
  // Before the send, a network error is one failed attempt, retried, and says why.
  await writer.failed(ctx, state, report('m3', failure('network')));
  const docs = await db.messages.find(scope, {}, { sort: { id: 1 } });
  assert.deepEqual(
    docs.map((d) => [d.id, d.status, d.failureReason, d.attempts]),
    [
      ['m1', 'failed', 'not_registered', 1],
      ['m2', 'failed', 'network', 1],
      ['m3', 'queued', 'network', 1],
    ],
  );
  assert.equal(docs[0]!.service, 'iMessage');
  assert.deepEqual(
    sent.map((s) => [s.msg.kind, s.msg.messageId]),
    [['retry', 'm3']],
    'only the network error before the send is retried',
  );
});

test('not_registered after the send: an if_undelivered message goes as SMS at once, with its sms_fallback checkpoint; an if_not_imessage one fails', async (t) => {
  const at = new Date().toISOString();
  const sentWith = (id: string, fallback: MessageDoc['fallback']) =>
    message(id, { status: 'sent', relayId: 'r1', attempts: 1, sentAt: at, fallback });
  const { db, outbox, rollups } = await tenantStore(
    t,
    [],
    [sentWith('m1', { sms: 'if_undelivered', afterSeconds: 300 }), sentWith('m2', { sms: 'if_not_imessage' })],
  );
  const writer = new StatusWriter({ config, db, outbox, rollups });
  const state = tenantState([{ id: 'r1', credits: 0 }]);
  const { ctx, sent } = recordingContext(state);
  const notRegistered = {
    status: 'failed' as const,
    error: 'Messages reported error 22',
    reason: 'not_registered' as const,
  };
  await writer.failed(ctx, state, report('m1', notRegistered));
  await writer.failed(ctx, state, report('m2', notRegistered));
  const [m1, m2] = await db.messages.find(scope, {}, { sort: { id: 1 } });
  assert.deepEqual([m1!.status, m1!.viaSms, m1!.relayId, typeof m1!.smsFallbackAt], ['queued', true, null, 'string']);
  assert.deepEqual([m2!.status, m2!.failureReason], ['failed', 'not_registered']);
  assert.deepEqual(
    sent.map((s) => [s.msg.kind, s.msg.messageId]),
    [['retry', 'm1']],
  );
  // Asked once: a second report of the same failure changes nothing.
  await writer.failed(ctx, state, report('m1', notRegistered));
  assert.equal(sent.length, 1);
});
