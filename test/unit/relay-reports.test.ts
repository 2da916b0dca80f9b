import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FailoverCheck } from '../../src/actors/relay/failover-check.ts';
import { RelayCredits } from '../../src/actors/relay/relay-credits.ts';
import { RelaySends, type SendReport } from '../../src/actors/relay/relay-sends.ts';
import type { RelayState } from '../../src/actors/relay/relay-state.ts';
import { reportsOf, statusBatch, tenantProtocol } from '../../src/actors/tenant/protocol.ts';
import type { MessagingCollections } from '../../src/messages/message-store.ts';
import type { RelayLink } from '../../src/relays/relay-link.ts';
import type { MessageOfKind } from '../../src/runtime/actor.ts';
import { workClass } from '../../src/runtime/work-lane.ts';
import { recordingContext, type Sent } from './tenant-fixtures.ts';

/** A relay actor's context on relay `r1` of capacity 4 with `inFlight` sends in flight (attempt 1), its credits granted to join `e1`. */
function relay(inFlight: string[], bulk: string[] = []) {
  const credits = new RelayCredits();
  credits.capacity = 4;
  for (const id of inFlight) credits.add(id, 1);
  credits.attach(1, 'e1');
  credits.due();
  const state: RelayState = { doc: undefined, lastHeartbeatAt: 0, credits, bulkSends: new Set(bulk) };
  const { ctx, sent } = recordingContext(state, { type: 'relay', key: 'r1' });
  return { ctx, sent, credits };
}

const sends = (batchReports: boolean) =>
  new RelaySends({
    db: {} as MessagingCollections,
    link: {} as RelayLink,
    sendTimeoutMs: 60_000,
    batchReports,
    check: new FailoverCheck({ db: {} as MessagingCollections, link: {} as RelayLink, sendTimeoutMs: 60_000 }),
  });

const report = (messageId: string, status: SendReport['status']): SendReport => ({
  session: 1,
  messageId,
  status,
  at: '2026-11-29T09:00:00.000Z',
  attempt: 1,
});

test('reports that came together go on to the tenant actor as one statuses message, with the credits they freed', async () => {
  const { ctx, sent, credits } = relay(['m1', 'm2']);
  const reports = [report('m1', 'sent'), report('m2', 'sent'), report('m1', 'delivered')];
  await sends(true).reports(ctx, 'org_1', reports);
  assert.equal(sent.length, 1, 'one message for three reports');
  const [{ type, key, msg }] = sent as [Sent];
  assert.deepEqual([type, key, msg.kind], ['tenant', 'org_1', 'statuses']);
  const m = msg as unknown as MessageOfKind<typeof tenantProtocol, 'statuses'>;
  assert.deepEqual(m.reports, reports, 'every report, in order');
  assert.deepEqual(m.grant, { session: 1, epoch: 'e1', credits: 2, capacity: 4 }, 'both sends settled: two credits');
  assert.equal(credits.size, 0);
  // As the tenant actor reads it: each report as its own status, the grant with the last.
  assert.deepEqual(
    reportsOf(m).map((r) => [r.relayId, r.messageId, r.status, r.grant?.credits]),
    [
      ['r1', 'm1', 'sent', undefined],
      ['r1', 'm2', 'sent', undefined],
      ['r1', 'm1', 'delivered', 2],
    ],
  );
});

test('one report goes on as a status, as before', async () => {
  const { ctx, sent } = relay(['m1']);
  await sends(true).reports(ctx, 'org_1', [report('m1', 'sent')]);
  assert.deepEqual(
    sent.map((s) => s.msg),
    [
      {
        kind: 'status',
        relayId: 'r1',
        ...report('m1', 'sent'),
        grant: { session: 1, epoch: 'e1', credits: 1, capacity: 4 },
      },
    ],
  );
});

test('a report that settles nothing carries no grant; more reports than one message holds go in several', async () => {
  const { ctx, sent } = relay([]);
  const many = Array.from({ length: statusBatch + 3 }, (_, i) => report(`m${i}`, 'delivered'));
  await sends(true).reports(ctx, 'org_1', many);
  assert.deepEqual(
    sent.map((s) => [s.msg.kind, (s.msg.reports as unknown[] | undefined)?.length, s.msg.grant]),
    [
      ['statuses', statusBatch, undefined],
      ['statuses', 3, undefined],
    ],
  );
});

test('with RELAY_REPORT_BATCHES off each report goes on alone, with the credit it freed', async () => {
  const { ctx, sent } = relay(['m1', 'm2']);
  await sends(false).reports(ctx, 'org_1', [report('m1', 'sent'), report('m2', 'sent')]);
  assert.deepEqual(
    sent.map((s) => [s.msg.kind, s.msg.messageId, (s.msg.grant as { credits: number } | undefined)?.credits]),
    [
      ['status', 'm1', 1],
      ['status', 'm2', 1],
    ],
  );
});

test("reports on a job's sends go on as bulk work; one on any other send makes the message interactive", async () => {
  const { ctx, sent } = relay(['m1', 'm2', 'm3'], ['m1', 'm2']);
  const s = sends(true);
  await s.reports(ctx, 'org_1', [report('m1', 'sent'), report('m2', 'sent')]);
  await s.reports(ctx, 'org_1', [report('m1', 'delivered'), report('m3', 'sent')]);
  await s.reports(ctx, 'org_1', [report('m2', 'delivered')]);
  assert.deepEqual(
    sent.map((m) => m.workClass),
    [workClass.bulk, workClass.interactive, workClass.bulk],
  );
  assert.deepEqual([...ctx.state.bulkSends], [], "a job's send is forgotten at its last report");
});

test('a hand-over of three sends arms one timer for the three before its frames, which go out in one message', async () => {
  const { ctx, sent, credits } = relay([]);
  const docs = ['m1', 'm2', 'm3'].map((id) => ({
    id,
    attempts: 1,
    to: '+15551230000',
    body: 'hi',
    attachments: [],
    createdAt: '2026-11-29T09:00:00.000Z',
  }));
  const order: string[] = [];
  const db = {
    messages: {
      updateManyReturning: async () => docs.map((d) => ({ ...d, claim: 'c' })),
    },
  } as unknown as MessagingCollections;
  const link = {
    deliverAll: async (_relay: unknown, frames: Array<{ messageId: string }>) =>
      void order.push(`frames ${frames.map((f) => f.messageId).join(' ')}`),
  } as unknown as RelayLink;
  const s = new RelaySends({
    db,
    link,
    sendTimeoutMs: 60_000,
    batchReports: true,
    check: new FailoverCheck({ db, link, sendTimeoutMs: 60_000 }),
  });
  const doc = { id: 'r1', status: 'online', session: 1, node: 'n1' } as unknown as Parameters<RelaySends['deliver']>[1];
  const ctxLogged = {
    ...ctx,
    send: async (...args: Parameters<typeof ctx.send>) => {
      order.push(`send ${args[2].kind}`);
      return ctx.send(...args);
    },
  };
  const items = docs.map((d) => ({ id: d.id, priority: 50, fromNumber: null }));
  await s.deliver(ctxLogged, doc, { kind: 'deliver', tenantId: 'org_1', session: 1, epoch: 'e1', items });
  const timers = sent.filter((m) => m.msg.kind === 'send-timeouts');
  assert.equal(timers.length, 1, 'one timer for the hand-over');
  assert.ok(timers[0]!.delayMs! > 59_000 && timers[0]!.delayMs! <= 60_000, 'due at the send timeout');
  assert.deepEqual(timers[0]!.msg.sends, [
    { messageId: 'm1', attempt: 1 },
    { messageId: 'm2', attempt: 1 },
    { messageId: 'm3', attempt: 1 },
  ]);
  assert.deepEqual(
    order.slice(0, 2),
    ['send send-timeouts', 'frames m1 m2 m3'],
    'the frames in one message, after the timer',
  );
  assert.equal(credits.size, 3, 'the three in flight');
  assert.ok(!sent.some((m) => m.msg.kind === 'send-timeout'), 'no timer of its own for a send');
});

test("a hand-over's timer retries only the sends still in flight, each once, and grants their credits back in one grant", async () => {
  const { ctx, sent, credits } = relay(['m1', 'm2', 'm3']);
  credits.settle('m1', 1);
  credits.due();
  await sends(true).sendTimeout(ctx, 'org_1', [
    { messageId: 'm1', attempt: 1 },
    { messageId: 'm2', attempt: 1 },
    { messageId: 'm3', attempt: 2 },
  ]);
  assert.deepEqual(
    sent.map((m) => [m.msg.kind, m.msg.messageId ?? m.msg.credits]),
    [
      ['send-timeout', 'm2'],
      ['grant', 1],
    ],
    'm1 was reported, m3 is on another attempt: only m2 times out',
  );
  assert.equal(credits.size, 1, 'm3 stays in flight');
});

test('a timer that settles nothing sends nothing', async () => {
  const { ctx, sent } = relay([]);
  await sends(true).sendTimeout(ctx, 'org_1', [{ messageId: 'm1', attempt: 1 }]);
  assert.deepEqual(sent, []);
});
