import assert from 'node:assert/strict';
import { test } from 'node:test';
import { foldReports, type StatusChange } from '../../src/actors/tenant/status-fold.ts';
import type { StatusReport } from '../../src/actors/tenant/protocol.ts';
import { queueDueAsSms, readFallbacksDue } from '../../src/actors/tenant/sms-fallback-watch.ts';
import { followDeliveries } from '../../src/actors/tenant/undelivered-watch.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import { fallbackProblem, storedFallback } from '../../src/messages/sms-fallback.ts';
import { message, recordingContext, scope, tenantState, tenantStore } from './tenant-fixtures.ts';

const ifUndelivered = { sms: 'if_undelivered' as const, afterSeconds: 2 };
const sent = (id: string, sentAt: string): StatusChange => ({
  filter: { id },
  set: { sentAt },
  events: [],
  exclusive: true,
  reached: ['sent'],
});

test('the window is checked beyond the schema, and stored with its default', () => {
  assert.equal(fallbackProblem({ sms: 'if_undelivered', afterSeconds: 30 }, 30), null);
  assert.equal(fallbackProblem({ sms: 'if_undelivered' }, 30), null);
  assert.match(fallbackProblem({ sms: 'if_undelivered', afterSeconds: 29 }, 30)!.message, /at least 30/);
  assert.match(fallbackProblem({ sms: 'if_not_imessage', afterSeconds: 60 }, 30)!.message, /only/);
  assert.deepEqual(storedFallback({ sms: 'if_undelivered' }), { sms: 'if_undelivered', afterSeconds: 300 });
  assert.deepEqual(storedFallback({ sms: 'if_not_imessage' }), { sms: 'if_not_imessage' });
});

test('an if_undelivered message past its window is queued again as SMS, once; one without the fallback or delivered is not', async (t) => {
  const now = Date.now();
  const iso = (agoMs: number) => new Date(now - agoMs).toISOString();
  const stuck = message('stuck', {
    status: 'sent',
    relayId: 'r1',
    attempts: 1,
    sentAt: iso(5_000),
    fallback: ifUndelivered,
  });
  const plain = message('plain', { status: 'sent', relayId: 'r1', attempts: 1, sentAt: iso(5_000) });
  const young = message('young', {
    status: 'sent',
    relayId: 'r1',
    attempts: 1,
    sentAt: iso(500),
    fallback: ifUndelivered,
  });
  const done = message('done', {
    status: 'sent',
    relayId: 'r1',
    attempts: 1,
    sentAt: iso(5_000),
    fallback: ifUndelivered,
  });
  const { db, outbox } = await tenantStore(t, [], [stuck, plain, young, done]);
  const state = tenantState();
  const { ctx } = recordingContext(state);
  const read = new Map<string, MessageDoc>([stuck, plain, young, done].map((m) => [m.id, m]));
  followDeliveries(
    ctx,
    state,
    [sent('stuck', iso(5_000)), sent('plain', iso(5_000)), sent('young', iso(500)), sent('done', iso(5_000))],
    [true, true, true, true],
    read,
  );
  assert.deepEqual([...state.smsFallbackDue.keys()], ['stuck', 'young', 'done'], 'only the messages that asked for it');
  followDeliveries(ctx, state, [{ ...sent('done', iso(5_000)), reached: ['delivered'] }], [true], read);

  assert.equal(await queueDueAsSms(ctx, state, { db, outbox }, now), 1);
  const queued = (await db.messages.findOne(scope, { id: 'stuck' }))!;
  assert.deepEqual(
    [queued.status, queued.viaSms, queued.relayId, queued.attempts, typeof queued.smsFallbackAt],
    ['queued', true, 'r1', 1, 'string'],
  );
  assert.deepEqual(
    state.queue.take(() => true).map((i) => i.id),
    ['stuck'],
  );
  assert.deepEqual([...state.smsFallbackDue.keys()], ['young']);

  // An activation reads back what still waits: not the message whose SMS is asked for.
  const again = tenantState();
  await readFallbacksDue(db.messages, scope.tenantId, again);
  assert.deepEqual([...again.smsFallbackDue.keys()].sort(), ['done', 'young']);
  again.smsFallbackDue.set('stuck', now - 1);
  assert.equal(await queueDueAsSms(ctx, again, { db, outbox }, now), 1, 'not "stuck" twice: "done" is still sent');
});

test("the iMessage's delivery reported before its SMS is claimed cancels the SMS; the SMS attempt's sent is a second message.sent", () => {
  const now = new Date().toISOString();
  const base = { relayId: 'r1', attempts: 1, sentAt: now, fallback: ifUndelivered, smsFallbackAt: now };
  const queued = message('m', { ...base, status: 'queued', viaSms: true });
  const report = (status: StatusReport['status'], attempt: number): StatusReport =>
    ({ messageId: 'm', relayId: 'r1', attempt, status, at: now }) as StatusReport;
  const [cancel] = foldReports(new Map([['m', queued]]), [report('delivered', 1)], now);
  assert.equal(cancel!.set.status, 'delivered');
  assert.equal(cancel!.set.viaSms, false);
  assert.equal(cancel!.set.smsFallbackAt, null, "its checkpoints are the iMessage's");
  assert.equal(cancel!.filter.status, 'queued');
  assert.deepEqual(
    cancel!.events.map((e) => e.event),
    ['message.delivered'],
  );
  assert.equal(foldReports(new Map([['m', queued]]), [report('delivered', 0)], now).length, 0, 'another attempt');

  const sms = message('m', { ...base, status: 'processing', viaSms: true, attempts: 2 });
  const [smsSent] = foldReports(new Map([['m', sms]]), [report('sent', 2)], now);
  const first = message('m', { relayId: 'r1', attempts: 1, status: 'processing', fallback: ifUndelivered });
  const [firstSent] = foldReports(new Map([['m', first]]), [report('sent', 1)], now);
  const sentId = (c: StatusChange) => c.events.find((e) => e.event === 'message.sent')!.id;
  assert.notEqual(sentId(smsSent!), sentId(firstSent!));
});
