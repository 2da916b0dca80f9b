import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { domainEvent, type DomainEvent, type ReadEvent } from '../../src/events/event-stream.ts';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { platformScope } from '../../src/store/collection.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';

async function open(
  t: TestContext,
  keep?: number,
): Promise<{ dir: string; store: EmbeddedStore; stream: StoreEventStream }> {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-events-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const store = new EmbeddedStore(dir);
  t.after(() => store.close());
  return { dir, store, stream: new StoreEventStream(store, keep) };
}

const events = (from: number, count: number): DomainEvent[] =>
  Array.from({ length: count }, (_, i) =>
    domainEvent('message.queued', { tenantId: 'org_1', teamId: 'team_1' }, { id: `msg_${from + i}` }),
  );

const ids = (read: ReadEvent[]) => read.map((r) => r.event.data.id);
const positions = (read: ReadEvent[]) => read.map((r) => r.position);

test('each group reads every event in order and moves on only by acknowledging', async (t) => {
  const { stream } = await open(t);
  assert.deepEqual(await stream.read('webhooks', 'c1', 10), [], 'an empty stream reads nothing');
  await stream.append(events(1, 3));
  await stream.append(events(4, 2));
  await stream.append([]);

  const first = await stream.read('webhooks', 'c1', 3);
  assert.deepEqual(ids(first), ['msg_1', 'msg_2', 'msg_3']);
  assert.deepEqual(positions(first), ['1', '2', '3']);
  assert.deepEqual(
    ids(await stream.read('automations', 'c1', 10)),
    ['msg_1', 'msg_2', 'msg_3', 'msg_4', 'msg_5'],
    'groups are independent',
  );

  assert.deepEqual(
    ids(await stream.read('webhooks', 'c2', 3)),
    ['msg_1', 'msg_2', 'msg_3'],
    'unacknowledged events are read again (at least once)',
  );
  await stream.ack('webhooks', positions(first));
  assert.deepEqual(ids(await stream.read('webhooks', 'c1', 10)), ['msg_4', 'msg_5']);
  await stream.ack('webhooks', ['5']);
  assert.deepEqual(await stream.read('webhooks', 'c1', 10), []);
  await stream.ack('webhooks', []);
  assert.deepEqual(
    ids(await stream.read('automations', 'c1', 2)),
    ['msg_1', 'msg_2'],
    'one group acknowledging moves no other',
  );

  const full = (await stream.read('automations', 'c1', 1))[0]!;
  assert.equal(full.event.event, 'message.queued');
  assert.equal(full.event.tenantId, 'org_1');
  assert.equal(full.event.teamId, 'team_1');
});

test('concurrent appends get distinct, increasing positions', async (t) => {
  const { stream } = await open(t);
  await Promise.all([stream.append(events(1, 2)), stream.append(events(3, 2)), stream.append(events(5, 1))]);
  const read = await stream.read('g', 'c', 10);
  assert.deepEqual(positions(read), ['1', '2', '3', '4', '5']);
  assert.deepEqual(ids(read), ['msg_1', 'msg_2', 'msg_3', 'msg_4', 'msg_5']);
});

test('trimming keeps the newest `keep` events', async (t) => {
  const { store, stream } = await open(t, 10);
  for (let i = 1; i <= 25; i++) await stream.append(events(i, 1));
  await stream.append(events(26, 4));
  await stream.trimmed();
  const read = await stream.read('late', 'c', 100);
  assert.deepEqual(
    ids(read),
    Array.from({ length: 10 }, (_, i) => `msg_${20 + i}`),
  );
  assert.deepEqual(
    positions(read),
    Array.from({ length: 10 }, (_, i) => String(20 + i)),
  );
  assert.equal(
    await store.collection('events').count(platformScope, {}),
    10,
    'the trimmed events are deleted from the store',
  );

  const behind = await stream.read('late', 'c', 3);
  await stream.ack('late', positions(behind));
  for (let i = 30; i <= 40; i++) await stream.append(events(i, 1));
  await stream.trimmed();
  assert.deepEqual(
    ids(await stream.read('late', 'c', 100)),
    Array.from({ length: 10 }, (_, i) => `msg_${31 + i}`),
    'a group behind the trim resumes at the oldest kept',
  );
});

test('after a restart the sequence and every group cursor continue', async (t) => {
  const { dir, store, stream } = await open(t);
  await stream.append(events(1, 6));
  await stream.ack('webhooks', positions(await stream.read('webhooks', 'c', 4)));
  await stream.ack('automations', positions(await stream.read('automations', 'c', 1)));
  await store.close();

  const reopened = new EmbeddedStore(dir);
  t.after(() => reopened.close());
  const again = new StoreEventStream(reopened);
  assert.deepEqual(ids(await again.read('webhooks', 'c', 10)), ['msg_5', 'msg_6']);
  await again.append(events(7, 1));
  const next = await again.read('webhooks', 'c', 10);
  assert.deepEqual(positions(next), ['5', '6', '7'], 'new events continue the sequence');
  assert.deepEqual(ids(await again.read('automations', 'c', 10)), [
    'msg_2',
    'msg_3',
    'msg_4',
    'msg_5',
    'msg_6',
    'msg_7',
  ]);
  assert.deepEqual(ids(await again.read('new-group', 'c', 2)), ['msg_1', 'msg_2']);
});

test('new events come after every acknowledged position, even when the stored events are gone', async (t) => {
  const { dir, store, stream } = await open(t);
  await stream.append(events(1, 3));
  await stream.ack('webhooks', ['3']);
  await store.collection('events').deleteMany(platformScope, {});
  await store.close();

  const reopened = new EmbeddedStore(dir);
  t.after(() => reopened.close());
  const again = new StoreEventStream(reopened);
  await again.append(events(4, 1));
  assert.deepEqual(positions(await again.read('webhooks', 'c', 10)), ['4']);
});
