import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  changeEventId,
  domainEvent,
  messageEventData,
  queuedEvent,
  type DomainEvent,
} from '../../src/events/event-stream.ts';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { eventCollection, type SubjectDoc } from '../../src/events/stored-events.ts';
import { platformScope } from '../../src/store/collection.ts';
import { EmbeddedStore } from '../../src/store/embedded-store.ts';

const message = (id: string, from: string | null): SubjectDoc & Record<string, unknown> => ({
  id,
  tenantId: 'org_1',
  teamId: 'team_1',
  to: '+14155550100',
  from,
  body: `a body no event row copies ${id}`,
  conversationId: `cnv_${id}`,
  status: 'delivered',
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
});

/** A store in a directory of its own (removed after the test), opened again by each call, with its messages and its event stream keeping a history. */
async function storeDir(t: TestContext, prefix: string) {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return () => {
    const store = new EmbeddedStore(dir);
    const subjects = store.collection<SubjectDoc>('messages');
    return { store, subjects, stream: new StoreEventStream(store, undefined, { retentionDays: 30, subjects }) };
  };
}

/** Closes the store and opens it again: what its stream reads for a new group then comes from the rows, not from what the appending process held in memory. */
async function reopened(
  t: TestContext,
  first: { store: EmbeddedStore },
  open: () => ReturnType<Awaited<ReturnType<typeof storeDir>>>,
) {
  await first.store.close();
  const again = open();
  t.after(() => again.store.close());
  return { again, read: await again.stream.read('late', 'c', 10) };
}

/** The same events, byte for byte. */
const sameEvents = (read: Array<{ event: DomainEvent }>, expected: DomainEvent[]) =>
  assert.deepEqual(
    read.map((r) => JSON.stringify(r.event)),
    expected.map((e) => JSON.stringify(e)),
  );

test("a message's events are stored without the message and read back byte for byte as appended", async (t) => {
  const open = await storeDir(t, 'relaybox-stored-events-');
  const first = open();
  const [a, b] = [message('msg_a', '+14155550199'), message('msg_b', null)];
  await first.subjects.insertMany({ tenantId: 'org_1' }, [a, b]);
  const appended: DomainEvent[] = [
    domainEvent(
      'message.queued',
      a,
      messageEventData({ ...a, status: 'queued' }),
      changeEventId('message.queued', a.id),
    ),
    domainEvent('message.sent', a, {
      ...messageEventData({ ...a, status: 'sent' }),
      sentAt: '2026-01-01T00:00:01.000Z',
    }),
    domainEvent('message.failed', b, { ...messageEventData({ ...b, status: 'failed' }), error: 'cancelled' }),
    // Not a copy of a message: kept as it is.
    domainEvent('message.queued', { tenantId: 'org_1' }, { id: 'msg_c', note: 'partial' }),
    domainEvent('relay.online', { tenantId: 'org_1' }, { id: 'rly_1', name: 'one', status: 'online' }),
  ];
  await first.stream.append(appended);

  const rows = await eventCollection(first.store).find(platformScope, {}, { sort: { seq: 1 } });
  for (const row of rows.slice(0, 3)) {
    assert.doesNotMatch(JSON.stringify(row), /a body no event row copies/, 'the body is stored once, in the message');
    assert.equal(row.event.id, undefined, 'the id is the row id');
  }
  // Read back after a restart, from the rows.
  sameEvents((await reopened(t, first, open)).read, appended);
});

test("an accepted message's row carries its message.queued: one row, read in stream order with the event rows, once, after a restart too", async (t) => {
  const open = await storeDir(t, 'relaybox-carried-events-');
  const accepted = (id: string): SubjectDoc & { teamId: string; createdAt: string; queuedSeq?: number } => ({
    ...message(id, null),
    teamId: 'team_1',
    status: 'queued',
    createdAt: '2026-01-01T00:00:00.000Z',
  });
  const first = open();
  await first.stream.ready();
  const [a, b, c] = [accepted('msg_a'), accepted('msg_b'), accepted('msg_c')];
  const online = domainEvent('relay.online', { tenantId: 'org_1' }, { id: 'rly_1', name: 'one', status: 'online' });
  const sent = domainEvent('message.sent', a, { ...messageEventData({ ...a, status: 'sent' }) });
  const insert = (docs: Array<typeof a>) => first.subjects.insertMany({ tenantId: 'org_1' }, docs);
  await first.stream.insertQueued!([a, b], insert);
  await first.stream.append([online, sent]);
  await first.stream.insertQueued!([c], insert);
  const expected = [queuedEvent(a), queuedEvent(b), online, sent, queuedEvent(c)];

  assert.equal(await eventCollection(first.store).count(platformScope, {}), 2, 'no event row for an accepted message');
  const live = await first.stream.read('live', 'c', 10);
  assert.deepEqual(
    live.map((r) => r.position),
    ['1', '2', '3', '4', '5'],
  );
  sameEvents(live, expected);
  await first.stream.ack('behind', ['2']);
  // From the rows: the messages' and the events', merged by position.
  const { again, read } = await reopened(t, first, open);
  sameEvents(read, expected);
  assert.deepEqual(
    (await again.stream.read('behind', 'c', 10)).map((r) => r.position),
    ['3', '4', '5'],
  );
  assert.equal((await again.stream.lag()).find((l) => l.group === 'behind')?.events, 3);
  // The sequence continues past the carried positions.
  const d = accepted('msg_d');
  await again.stream.insertQueued!([d], (docs) => again.subjects.insertMany({ tenantId: 'org_1' }, docs));
  assert.equal(d.queuedSeq, 6);
  assert.deepEqual(
    (await again.stream.read('late', 'c', 10)).map((r) => r.event.id),
    [...expected, queuedEvent(d)].map((e) => e.id),
  );
});
