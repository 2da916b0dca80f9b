import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StatusChange } from '../../src/actors/tenant/status-fold.ts';
import {
  awaitingDeliveryKept,
  followDeliveries,
  markUndelivered,
  readAwaitingDelivery,
} from '../../src/actors/tenant/undelivered-watch.ts';
import { message, recordingContext, scope, tenantState, tenantStore } from './tenant-fixtures.ts';

const change = (id: string, reached: StatusChange['reached'], sentAt: string): StatusChange => ({
  filter: { id },
  set: { sentAt },
  events: [],
  exclusive: true,
  reached,
});

test('sent messages are followed until delivered, and marked undelivered once past the window', async (t) => {
  const now = Date.now();
  const iso = (agoMs: number) => new Date(now - agoMs).toISOString();
  const { db, outbox } = await tenantStore(
    t,
    [],
    [
      message('old', { status: 'sent', relayId: 'r1', attempts: 1, sentAt: iso(5_000) }),
      message('new', { status: 'sent', relayId: 'r1', attempts: 1, sentAt: iso(500) }),
      message('gone', { status: 'delivered', relayId: 'r1', attempts: 1, sentAt: iso(5_000) }),
    ],
  );
  const state = tenantState();
  state.undeliveredAfterMs = 2_000;
  const { ctx } = recordingContext(state);
  followDeliveries(
    ctx,
    state,
    [
      change('old', ['sent'], iso(5_000)),
      change('new', ['sent'], iso(500)),
      change('gone', ['sent'], iso(5_000)),
      change('skipped', ['sent'], iso(5_000)),
    ],
    [true, true, true, false],
  );
  assert.deepEqual([...state.awaitingDelivery.keys()], ['old', 'new', 'gone']);
  // Delivered since: forgotten, never marked.
  followDeliveries(ctx, state, [change('gone', ['delivered'], iso(5_000))], [true]);
  assert.equal(await markUndelivered(ctx, state, { db, outbox }, now), 1);
  assert.deepEqual([...state.awaitingDelivery.keys()], ['new'], 'a marked message is no longer followed');
  const old = (await db.messages.findOne(scope, { id: 'old' }))!;
  assert.deepEqual([old.status, typeof old.undeliveredAt], ['sent', 'string']);
  assert.equal((await db.messages.findOne(scope, { id: 'new' }))!.undeliveredAt, undefined);

  // A new activation reads back what is still awaited; a message marked already is not marked twice.
  const again = tenantState();
  again.undeliveredAfterMs = 2_000;
  await readAwaitingDelivery(db.messages, scope.tenantId, again);
  assert.deepEqual([...again.awaitingDelivery.keys()], ['new']);
  again.awaitingDelivery.set('old', now - 5_000);
  assert.equal(await markUndelivered(ctx, again, { db, outbox }, now + 2_000), 1, 'only "new"');
  assert.equal(again.awaitingDelivery.size, 0);
});

test('the followed set is bounded', () => {
  const state = tenantState();
  const { ctx } = recordingContext(state);
  for (let i = 0; i < awaitingDeliveryKept; i += 1) state.awaitingDelivery.set(`m${i}`, 0);
  followDeliveries(ctx, state, [change('one-more', ['sent'], new Date().toISOString())], [true]);
  assert.equal(state.awaitingDelivery.size, awaitingDeliveryKept);
  assert.equal(state.awaitingDelivery.has('one-more'), false);
});
