import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TenantRecovery } from '../../src/actors/tenant/tenant-recovery.ts';
import { config, message, recordingContext, relay, scope, tenantState, tenantStore } from './tenant-fixtures.ts';

test('a rebuild queues what the store holds but a retry waiting on its backoff, and asks each online relay for credits', async (t) => {
  const later = new Date(Date.now() + 60_000).toISOString();
  const { db } = await tenantStore(
    t,
    [relay('r1', 5), { ...relay('r2', 5), status: 'offline' }],
    [message('low'), message('high', { priority: 9 }), message('backoff', { nextAttemptAt: later })],
  );
  const recovery = new TenantRecovery({ config, db });
  const state = tenantState();
  const { ctx, sent } = recordingContext(state);
  await recovery.rebuild(ctx, state);
  assert.deepEqual(
    state.queue.take(() => true).map((i) => i.id),
    ['high', 'low'],
  );
  assert.deepEqual([...state.relays.keys()], ['r1']);
  assert.equal(typeof state.relayOnlineSince, 'number');
  const attach = sent.filter((s) => s.msg.kind === 'attach');
  assert.deepEqual(
    attach.map((s) => [s.key, s.msg.session, s.msg.epoch]),
    [['r1', 1, state.relays.get('r1')!.epoch]],
  );
});

test('a reconcile drops a relay gone offline, joins a new session afresh, and has a stray in flight handed back', async (t) => {
  const { db } = await tenantStore(t, [relay('r1', 5), relay('r2', 5)]);
  const recovery = new TenantRecovery({ config, db });
  const state = tenantState();
  const { ctx, sent } = recordingContext(state);
  await recovery.rebuild(ctx, state);
  const firstEpoch = state.relays.get('r2')!.epoch;
  await db.relays.updateOne(scope, { id: 'r1' }, { $set: { status: 'offline' } });
  await db.relays.updateOne(scope, { id: 'r2' }, { $set: { session: 2 } });
  await db.messages.insertMany(scope, [message('stray', { status: 'processing', relayId: 'r1', attempts: 1 })]);
  sent.length = 0;
  await recovery.reconcile(ctx, state);
  assert.deepEqual([...state.relays.keys()], ['r2']);
  assert.equal(state.relays.get('r2')!.session, 2);
  assert.notEqual(state.relays.get('r2')!.epoch, firstEpoch, 'a new join');
  assert.deepEqual(
    sent.map((s) => [s.key, s.msg.kind]),
    [
      ['r2', 'attach'],
      ['r1', 'hand-back'],
    ],
  );
});

test('a reconcile asks again for the credits of a relay it holds none for while nothing is in flight on it', async (t) => {
  const { db } = await tenantStore(t, [relay('r1', 5), relay('r2', 5)], [message('waiting')]);
  const recovery = new TenantRecovery({ config, db });
  const state = tenantState();
  const { ctx, sent } = recordingContext(state);
  await recovery.rebuild(ctx, state);
  await db.messages.insertMany(scope, [message('busy', { status: 'processing', relayId: 'r2', attempts: 1 })]);
  const epoch = state.relays.get('r1')!.epoch;
  sent.length = 0;
  // The grants of both joins were lost on their way: no credit, and only r2 has a send in flight.
  await recovery.reconcile(ctx, state);
  assert.deepEqual(
    sent.filter((s) => s.msg.kind === 'attach').map((s) => s.key),
    ['r1'],
  );
  assert.notEqual(state.relays.get('r1')!.epoch, epoch, 'a new join, whose grants count');
});

test('a reconcile finds queued messages again when nothing is held in memory and a relay could take them', async (t) => {
  const { db } = await tenantStore(t, [relay('r1', 5)]);
  const recovery = new TenantRecovery({ config, db });
  const state = tenantState();
  const { ctx } = recordingContext(state);
  await recovery.rebuild(ctx, state);
  state.relays.get('r1')!.credits = 5;
  // Queued in the store with no actor message to say so (a lost enqueue), and a count that says nothing waits.
  await db.messages.insertMany(scope, [message('lost-1'), message('lost-2', { priority: 9 })]);
  assert.equal(state.queue.size, 0);
  await recovery.reconcile(ctx, state);
  assert.deepEqual(
    state.queue.take(() => true).map((i) => i.id),
    ['lost-2', 'lost-1'],
  );
});
