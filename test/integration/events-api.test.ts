import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { domainEvent } from '../../src/events/event-stream.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();

eachBackend((backend) => {
  describe(`events API (${backend})`, () => {
    let t: TestApp;
    let org: Org;
    const sent: string[] = [];

    const events = (query = '', token = org.ownerToken) => t.request('GET', `/api/v1/events${query}`, { token });
    const waitForEvents = async (count: number, query = '') => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const res = await events(query);
        if (res.body.pagination.total >= count) return res.body;
        if (Date.now() > deadline) throw new Error(`expected ${count} events, have ${res.body.pagination.total}`);
        await sleep(50);
      }
    };

    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Eventful');
      for (let i = 0; i < 3; i++) {
        const res = await t.request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: '+14155550100', body: `m${i}` },
        });
        assert.equal(res.status, 201);
        sent.push(res.body.id);
      }
      await waitForEvents(3);
    });
    after(() => t.stop());

    test('newest first, each with id, event, timestamp, data and a cursor; any role reads', async () => {
      const page = (await events()).body;
      assert.deepEqual(
        page.data.map((e: any) => e.data.id),
        [...sent].reverse(),
      );
      assert.deepEqual(Object.keys(page.data[0]).sort(), ['cursor', 'data', 'event', 'id', 'livemode', 'timestamp']);
      assert.equal(page.data[0].livemode, true, 'live data');
      assert.ok(page.data.every((e: any) => e.event === 'message.queued' && e.id.startsWith('evt_')));
      assert.deepEqual(page.pagination, { page: 1, limit: 20, total: 3, totalPages: 1 });
      assert.equal((await events('', await apiKey(t, org, 'viewer'))).status, 200);
    });

    test('after=<cursor> answers the later events oldest first; pages and type filter', async () => {
      const all = (await events()).body.data.reverse();
      const later = (await events(`?after=${all[0].cursor}`)).body;
      assert.deepEqual(
        later.data.map((e: any) => e.id),
        [all[1].id, all[2].id],
      );
      assert.deepEqual((await events(`?after=${all[2].cursor}`)).body.data, []);
      const first = (await events('?limit=2')).body;
      assert.equal(first.data.length, 2);
      assert.deepEqual(first.pagination, { page: 1, limit: 2, total: 3, totalPages: 2 });
      assert.deepEqual(
        (await events('?limit=2&page=2')).body.data.map((e: any) => e.data.id),
        [sent[0]],
      );
      assert.equal((await events('?type=message.queued')).body.pagination.total, 3);
      assert.deepEqual((await events('?type=message.sent')).body.data, []);
      assert.equal((await events('?type=message.exploded')).status, 400);
      assert.equal((await events('?after=not-a-cursor')).status, 400);
      assert.equal((await events('?limit=101')).status, 400);
    });

    test('events are kept EVENT_RETENTION_DAYS (30): older ones are gone', async () => {
      await t.app.events.append([
        {
          ...domainEvent('relay.online', { tenantId: org.orgId }, { id: 'rly_old', name: 'old', status: 'online' }),
          timestamp: daysAgo(31),
        },
        {
          ...domainEvent('relay.online', { tenantId: org.orgId }, { id: 'rly_kept', name: 'kept', status: 'online' }),
          timestamp: daysAgo(29),
        },
      ]);
      const relays = await waitForEvents(1, '?type=relay.online');
      await sleep(200);
      assert.deepEqual(
        (await events('?type=relay.online')).body.data.map((e: any) => e.data.id),
        ['rly_kept'],
      );
      assert.equal(relays.pagination.total, 1);
    });

    test("a second organization's cursors reveal nothing about the first's volume, and work only for it", async () => {
      const other = await signup(t, 'Neighbour');
      const send = (o: Org, body: string) =>
        t.request('POST', '/api/v1/messages', { token: o.ownerToken, body: { to: '+14155550100', body } });
      const otherEvents = async (count: number) => {
        const deadline = Date.now() + 15_000;
        for (;;) {
          const page = (await events('', other.ownerToken)).body;
          if (page.pagination.total >= count) return page.data.reverse();
          if (Date.now() > deadline) throw new Error(`expected ${count} events of the second organization`);
          await sleep(50);
        }
      };
      assert.equal((await send(other, 'b1')).status, 201);
      for (let i = 0; i < 5; i++) assert.equal((await send(org, `busy ${i}`)).status, 201);
      assert.equal((await send(other, 'b2')).status, 201);
      const [first, second] = await otherEvents(2);
      const stored = await t.app.store.collection('org_events').find({ tenantId: other.orgId }, {});
      for (const e of [first, second]) {
        assert.match(e.cursor, /^[A-Za-z0-9_-]{22}$/, 'opaque');
        assert.doesNotMatch(e.cursor, /^[0-9-]+$/, 'not a position in the stream every organization shares');
        assert.ok(!stored.some((doc) => doc.cursor === e.cursor), 'not the stored stream position');
      }
      // Catching up still works for the second organization, in its own order.
      assert.deepEqual(
        (await events(`?after=${first.cursor}`, other.ownerToken)).body.data.map((e: any) => e.id),
        [second.id],
      );
      // A cursor is only meaningful to the organization it was given to.
      const mine = (await events()).body.data[0].cursor;
      const foreign = await events(`?after=${mine}`, other.ownerToken);
      assert.equal(foreign.status, 400);
      assert.equal(foreign.body.details[0].path, '/after');
      assert.equal((await events(`?after=${first.cursor}`)).status, 400);
    });

    test('another organization sees none of them', async () => {
      const other = await signup(t, 'Other');
      const res = await t.request('GET', '/api/v1/events', { token: other.ownerToken });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.data, []);
    });
  });
});
