import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { changeEventId, domainEvent, messageEventData, type DomainEvent } from '../../src/events/event-stream.ts';
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

test("a message's events are stored without the message and read back byte for byte as appended", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'relaybox-stored-events-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const open = () => {
    const store = new EmbeddedStore(dir);
    const subjects = store.collection<SubjectDoc>('messages');
    return { store, subjects, stream: new StoreEventStream(store, undefined, { retentionDays: 30, subjects }) };
  };
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
  await first.store.close();

  // Read back after a restart, from the rows (not from what the appending process held in memory).
  const again = open();
  t.after(() => again.store.close());
  const read = await again.stream.read('late', 'c', 10);
  assert.deepEqual(
    read.map((r) => JSON.stringify(r.event)),
    appended.map((e) => JSON.stringify(e)),
  );
});
