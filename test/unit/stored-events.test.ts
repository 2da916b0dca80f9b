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
import { CarriedEvents } from '../../src/events/carried-events.ts';
import { Outbox } from '../../src/events/outbox.ts';
import { StoreEventStream } from '../../src/events/store-event-stream.ts';
import { createLogger } from '../../src/log.ts';
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

test("a message's row carries its status events: one row a change, read in stream order, byte for byte, after a restart and as history", async (t) => {
  const open = await storeDir(t, 'relaybox-carried-status-');
  const first = open();
  await first.stream.ready();
  const outbox = new Outbox(first.stream, createLogger('silent'));
  const scope = { tenantId: 'org_1' };
  const accepted = (id: string): SubjectDoc & { teamId: string; createdAt: string } => ({
    ...message(id, '+14155550199'),
    teamId: 'team_1',
    status: 'processing',
    createdAt: '2026-01-01T00:00:00.000Z',
  });
  const [a, b] = [accepted('msg_a'), accepted('msg_b')];
  await first.stream.insertQueued!([a, b], (docs) => first.subjects.insertMany(scope, docs));
  const event = (
    name: 'message.sent' | 'message.delivered' | 'message.read',
    m: typeof a,
    status: string,
    extra = {},
  ) => domainEvent(name, m, { ...messageEventData({ ...m, status }), ...extra }, changeEventId(name, m.id));
  // Handed to its relay, on the attempt given.
  const handedOver = (attempt: number, at: string) =>
    domainEvent(
      'message.checkpoint',
      a,
      { ...messageEventData({ ...a, status: 'processing' }), hop: 'handed_to_relay', at, attempt },
      changeEventId('message.checkpoint', `${a.id}:${attempt}:handed_to_relay`),
    );
  const hop = handedOver(1, '2026-01-01T00:00:01.000Z');
  // An id not derived from the message is kept in the row.
  const aSent = { ...event('message.sent', a, 'sent'), id: 'evt_own' };
  const bSent = event('message.sent', b, 'sent');
  const change = (m: typeof a, from: string, to: string, events: DomainEvent[], carrier: object) => ({
    filter: { id: m.id, status: from },
    update: { $set: { status: to } },
    events,
    exclusive: true,
    carrier: carrier as { id: string },
  });
  const readA = await first.subjects.findOne(scope, { id: a.id });
  const readB = await first.subjects.findOne(scope, { id: b.id });
  assert.deepEqual(
    await outbox.changeMany(first.subjects, scope, [
      change(a, 'processing', 'sent', [hop, aSent], readA!),
      // Read as queued: it does not apply, and its event is never read.
      change(b, 'queued', 'sent', [bSent], readB!),
    ]),
    [true, false],
  );
  const online = domainEvent('relay.online', { tenantId: 'org_1' }, { id: 'rly_1', name: 'one', status: 'online' });
  await first.stream.append([online]);
  const delivered = event('message.delivered', a, 'delivered', { deliveredAt: '2026-01-01T00:00:02.000Z' });
  const read = event('message.read', a, 'delivered', { readAt: '2026-01-01T00:00:03.000Z' });
  await outbox.changeMany(first.subjects, scope, [
    change(a, 'sent', 'delivered', [delivered, read], (await first.subjects.findOne(scope, { id: a.id }))!),
  ]);
  await outbox.changeMany(first.subjects, scope, [
    change(b, 'processing', 'sent', [bSent], (await first.subjects.findOne(scope, { id: b.id }))!),
  ]);
  // Its four slots are taken: a fifth event is a row.
  const again2 = handedOver(2, '2026-01-01T00:00:04.000Z');
  await outbox.changeMany(first.subjects, scope, [
    change(a, 'delivered', 'delivered', [again2], (await first.subjects.findOne(scope, { id: a.id }))!),
  ]);
  const expected = [queuedEvent(a), queuedEvent(b), hop, aSent, online, delivered, read, bSent, again2];

  assert.equal(
    await eventCollection(first.store).count(platformScope, {}),
    2,
    'no event row for a status change that fits',
  );
  const stored = (await first.subjects.findOne(scope, { id: a.id }))!;
  assert.equal(stored.statusSeq, 8, 'the position of the newest event it carries');
  const slots = JSON.stringify([stored.ev1, stored.ev2, stored.ev3, stored.ev4]);
  assert.doesNotMatch(slots, /a body no event row copies/, 'the body is stored once');
  assert.deepEqual(
    JSON.parse(slots).map((e: { q: number; e: string; i?: string }) => [e.q, e.e, e.i ?? null]),
    [
      [3, 'checkpoint', null],
      // Its id is not the one derived from the message: the row keeps it.
      [4, 'sent', 'evt_own'],
      [7, 'delivered', null],
      [8, 'read', null],
    ],
  );
  const live = await first.stream.read('live', 'c', 20);
  assert.deepEqual(
    live.map((r) => r.position),
    ['1', '2', '3', '4', '6', '7', '8', '9', '10'],
  );
  sameEvents(live, expected);
  await first.stream.ack('behind', ['3']);

  const history = (q: { type?: string; after?: number; skip: number; limit: number }) =>
    CarriedEvents.of(first.store, 'messages')!.history({
      tenantId: 'org_1',
      since: '2025-01-01T00:00:00.000Z',
      descending: q.after === undefined,
      ...q,
    });
  const all = history({ skip: 0, limit: 20 });
  assert.deepEqual([all.rows.map((r) => r.seq), all.total], [[10, 9, 8, 7, 6, 4, 3, 2, 1], 9]);
  sameEvents(
    all.rows.flatMap((r) => (r.carried ? [{ event: r.event }] : [])),
    [...expected].reverse().filter((e) => e !== online && e !== again2),
  );
  const page = history({ after: 3, skip: 1, limit: 2 });
  assert.deepEqual([page.rows.map((r) => r.seq), page.total], [[6, 7], 6]);
  const sent = history({ type: 'message.sent', skip: 0, limit: 20 });
  assert.deepEqual([sent.rows.map((r) => r.seq), sent.total], [[9, 4], 2]);
  const hops = history({ type: 'message.checkpoint', skip: 0, limit: 20 });
  assert.deepEqual([hops.rows.map((r) => r.seq), hops.total], [[10, 3], 2]);
  const retained = CarriedEvents.of(first.store, 'messages')!.history({
    tenantId: 'org_1',
    since: '2100-01-01T00:00:00.000Z',
    descending: true,
    skip: 0,
    limit: 20,
  });
  assert.deepEqual([retained.rows.length, retained.total], [0, 0], 'none within a retention that starts later');

  // From the rows after a restart: every event, and a group behind reads on from its cursor.
  const again = await reopened(t, first, open);
  sameEvents(again.read, expected.slice(0, 9));
  assert.deepEqual(
    (await again.again.stream.read('behind', 'c', 20)).map((r) => r.position),
    ['4', '6', '7', '8', '9', '10'],
  );
  sameEvents(await again.again.stream.read('behind', 'c', 20), expected.slice(3));
});
