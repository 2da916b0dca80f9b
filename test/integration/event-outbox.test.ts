import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DomainEvent } from '../../src/events/event-stream.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

eachBackend((backend) => {
  describe(`event outbox (${backend})`, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(backend, { TENANT_SWEEP_MS: '300' });
    });
    after(() => t.stop());

    const storedMessage = (orgId: string, id: string) => t.app.store.collection('messages').findOne({ tenantId: orgId }, { id });

    test('a send is stored with its message.queued event; published, the event leaves the message', async () => {
      const org = await signup(t);
      const res = await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to: '+14155550100', body: 'x' } });
      assert.equal(res.status, 201);
      const doc = await storedMessage(org.orgId, res.body.id);
      assert.equal(doc?.outbox, undefined, 'published before the answer, so cleared');
      assert.equal(doc?.outboxAt, undefined);
    });

    test('when the event stream fails, the send still succeeds and its event is published later with the id it was stored under', async () => {
      const org = await signup(t);
      const stream = t.app.events;
      const append = stream.append.bind(stream);
      let refusing = true;
      stream.append = async (events: DomainEvent[], opts?: { once?: boolean }) => {
        if (refusing && events.some((e) => e.tenantId === org.orgId)) throw new Error('event stream unavailable');
        return append(events, opts);
      };
      try {
        const res = await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to: '+14155550100', body: 'kept' } });
        assert.equal(res.status, 201, 'the message is stored and queued: the answer does not depend on the stream');
        const doc = await storedMessage(org.orgId, res.body.id);
        const held = Object.values((doc?.outbox ?? {}) as Record<string, DomainEvent>);
        assert.equal(held.length, 1, 'the event waits in the message');
        assert.equal(held[0]!.event, 'message.queued');
        await sleep(500);
        assert.equal((await t.request('GET', '/api/v1/events', { token: org.ownerToken })).body.data.length, 0, 'nothing published yet');
        refusing = false;
        const deadline = Date.now() + 20_000;
        let listed: any[] = [];
        while (Date.now() < deadline) {
          listed = (await t.request('GET', '/api/v1/events', { token: org.ownerToken })).body.data;
          if (listed.length > 0) break;
          await sleep(200);
        }
        assert.deepEqual(listed.map((e) => [e.id, e.event, e.data.id]), [[held[0]!.id, 'message.queued', res.body.id]], 'the tenant sweep published it, once, under its stored id');
        const after = await storedMessage(org.orgId, res.body.id);
        assert.equal(after?.outboxAt, undefined, 'and cleared it');
      } finally {
        stream.append = append;
      }
    });
  });
});
