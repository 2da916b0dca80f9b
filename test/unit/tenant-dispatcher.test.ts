import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { createLogger } from '../../src/log.ts';
import { messagingCollections } from '../../src/messages/message-store.ts';
import { TenantDispatcher } from '../../src/messages/tenant-dispatcher.ts';
import { relayCollections } from '../../src/relays/relay-store.ts';
import type { ActorContext } from '../../src/runtime/types.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';

test('a tenant whose rebuild fails keeps no half-built state, and gets exactly one sweep chain once it succeeds', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-dispatcher-'));
  const store = new EmbeddedStore(dir);
  t.after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  const db = { ...messagingCollections(store), ...relayCollections(store) };
  const events = new StoreEventStream(store);
  await store.init();
  let failFinds = 1;
  const realFind = db.messages.find.bind(db.messages);
  db.messages.find = async (...args) => {
    if (failFinds-- > 0) throw new Error('the store did not answer');
    return realFind(...args);
  };
  const config = { messageRetryBaseMs: 10, messageMaxAttempts: 3, messageSendTimeoutMs: 1000, tenantSweepMs: 1000, relayHeartbeatTimeoutMs: 1000 };
  const link = { deliver: async () => {} } as never;
  const dispatcher = new TenantDispatcher({ config, db, events, link, log: createLogger('silent') });
  const sent: Array<{ kind: string }> = [];
  const ctx = (msgId: string): ActorContext => ({
    type: 'tenant', key: 'org_1', msgId, delivery: 1, log: createLogger('silent'),
    send: async (_type, _key, msg) => (sent.push(msg), 'id'),
  });

  await assert.rejects(dispatcher.enqueue(ctx('m1'), 'org_1', [{ id: 'msg_a', priority: 0, fromNumber: null }]), /did not answer/);
  assert.equal(dispatcher.snapshot('org_1'), undefined, 'nothing kept after a failed rebuild');
  assert.equal(sent.length, 0);

  await dispatcher.enqueue(ctx('m1'), 'org_1', [{ id: 'msg_a', priority: 0, fromNumber: null }]);
  await dispatcher.enqueue(ctx('m2'), 'org_1', [{ id: 'msg_b', priority: 0, fromNumber: null }]);
  assert.equal(dispatcher.snapshot('org_1')?.queued, 2);
  assert.deepEqual(sent.map((m) => m.kind), ['sweep'], 'one sweep chain');
});
