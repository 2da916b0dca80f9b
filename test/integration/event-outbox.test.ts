import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { DomainEvent, EventStream } from '../../src/events/event-stream.ts';
import { RelaySocket } from '../support/relay-socket.ts';
import { eachBackend, signup, startTestApp, type TestApp } from '../support/test-app.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Makes the app's event stream refuse appends of one organization's events (as if it were unreachable) until `allow()`; `restore()` undoes it. */
function refuseAppends(stream: EventStream, orgId: string) {
  const append = stream.append.bind(stream);
  let refusing = true;
  let refused = 0;
  stream.append = async (events: DomainEvent[], opts?: { once?: boolean }) => {
    if (refusing && events.some((e) => e.tenantId === orgId)) {
      refused++;
      throw new Error('event stream unavailable');
    }
    return append(events, opts);
  };
  return { refused: () => refused, allow: () => (refusing = false), restore: () => (stream.append = append) };
}

eachBackend((backend) => {
  describe(`event outbox (${backend})`, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(backend, { TENANT_SWEEP_MS: '300' });
    });
    after(() => t.stop());

    const storedMessage = (orgId: string, id: string) =>
      t.app.store.collection('messages').findOne({ tenantId: orgId }, { id });

    test('a send is stored with its message.queued event; published after the answer, the event leaves the message', async () => {
      const org = await signup(t);
      const res = await t.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        body: { to: '+14155550100', body: 'x' },
      });
      assert.equal(res.status, 201);
      let doc = await storedMessage(org.orgId, res.body.id);
      assert.ok(doc, 'stored before the answer');
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && (doc?.outbox !== undefined || doc?.outboxAt !== undefined)) {
        await sleep(20);
        doc = await storedMessage(org.orgId, res.body.id);
      }
      assert.equal(doc?.outbox, undefined, 'published, so cleared');
      assert.equal(doc?.outboxAt, undefined);
    });

    // On the embedded default the stream is kept in the same store: a new message and its message.queued event are one transaction, and so are a status change and its event.
    const queuedWithMessage = backend === 'embedded';

    if (queuedWithMessage) {
      test('a send and its message.queued event are written in one transaction: no outbox, no separate append to fail', async () => {
        const org = await signup(t);
        assert.ok(t.app.events.appendWithWrite, 'the embedded stream commits with the store');
        const refusal = refuseAppends(t.app.events, org.orgId);
        try {
          const res = await t.request('POST', '/api/v1/messages', {
            token: org.ownerToken,
            body: { to: '+14155550100', body: 'kept' },
          });
          assert.equal(res.status, 201);
          const doc = await storedMessage(org.orgId, res.body.id);
          assert.equal(doc?.outbox, undefined, 'no outbox written');
          assert.equal(doc?.outboxAt, undefined);
          let listed: any[] = [];
          const deadline = Date.now() + 10_000;
          while (Date.now() < deadline && listed.length === 0) {
            listed = (await t.request('GET', '/api/v1/events', { token: org.ownerToken })).body.data;
            if (listed.length === 0) await sleep(50);
          }
          assert.deepEqual(
            listed.map((e) => [e.event, e.data.id]),
            [['message.queued', res.body.id]],
            'in the stream without any sweep',
          );
          assert.equal(refusal.refused(), 0, 'never went through a separate append');
        } finally {
          refusal.restore();
        }
      });
    }

    if (!queuedWithMessage) {
      test('when the event stream fails, the send still succeeds and its event is published later with the id it was stored under', async () => {
        const org = await signup(t);
        const refusal = refuseAppends(t.app.events, org.orgId);
        try {
          const res = await t.request('POST', '/api/v1/messages', {
            token: org.ownerToken,
            body: { to: '+14155550100', body: 'kept' },
          });
          assert.equal(res.status, 201, 'the message is stored and queued: the answer does not depend on the stream');
          const doc = await storedMessage(org.orgId, res.body.id);
          const held = Object.values((doc?.outbox ?? {}) as Record<string, DomainEvent>);
          assert.equal(held.length, 1, 'the event waits in the message');
          assert.equal(held[0]!.event, 'message.queued');
          await sleep(500);
          assert.equal(
            (await t.request('GET', '/api/v1/events', { token: org.ownerToken })).body.data.length,
            0,
            'nothing published yet',
          );
          refusal.allow();
          const deadline = Date.now() + 20_000;
          let listed: any[] = [];
          while (Date.now() < deadline) {
            listed = (await t.request('GET', '/api/v1/events', { token: org.ownerToken })).body.data;
            if (listed.length > 0) break;
            await sleep(200);
          }
          assert.deepEqual(
            listed.map((e) => [e.id, e.event, e.data.id]),
            [[held[0]!.id, 'message.queued', res.body.id]],
            'the tenant sweep published it, once, under its stored id',
          );
          const after = await storedMessage(org.orgId, res.body.id);
          assert.equal(after?.outboxAt, undefined, 'and cleared it');
        } finally {
          refusal.restore();
        }
      });
    }

    test('every status and relay event is stored with its change: while the stream refuses they wait in their documents, then each is published once under its stored id', async () => {
      const org = await signup(t);
      const refusal = refuseAppends(t.app.events, org.orgId);
      const socket = await RelaySocket.open(t.base);
      try {
        const token = await t.request('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`, { token: org.ownerToken });
        socket.hello({ registrationToken: token.body.token });
        const welcome = await socket.next('welcome');
        socket.send({ type: 'ready', capacity: 1 });
        const res = await t.request('POST', '/api/v1/messages', {
          token: org.ownerToken,
          body: { to: '+14155550100', body: 'out' },
        });
        assert.equal(res.status, 201);
        const send = await socket.next('send', undefined, 10_000);
        socket.send({
          type: 'status',
          messageId: send.messageId,
          attempt: send.attempt,
          status: 'sent',
          at: new Date().toISOString(),
          guid: 'GUID-OUT',
        });
        await socket.next('ack', (a) => a.of === 'status');
        socket.send({
          type: 'inbound',
          rowId: 1,
          guid: 'GUID-IN',
          from: '+14155550199',
          isGroup: false,
          body: 'in',
          receivedAt: new Date().toISOString(),
        });
        await socket.next('ack', (a) => a.of === 'inbound');
        socket.close();
        // On the embedded default the message's events (queued, the hand-over's checkpoint, sent) are written with its changes, in their transactions: never held.
        const withMessage = queuedWithMessage ? ['message.checkpoint', 'message.queued', 'message.sent'] : [];
        const inDocuments = [
          'message.checkpoint',
          'message.queued',
          'message.received',
          'message.sent',
          'relay.offline',
          'relay.online',
        ].filter((e) => !withMessage.includes(e));
        const held = async (collection: string, filter: Record<string, unknown>) => {
          const docs = await t.app.store.collection(collection).find({ tenantId: org.orgId }, filter);
          return docs.flatMap((d) => Object.values((d.outbox ?? {}) as Record<string, DomainEvent>));
        };
        let waiting: DomainEvent[] = [];
        const deadline = Date.now() + 10_000;
        while (Date.now() < deadline) {
          waiting = [...(await held('relays', { id: welcome.relayId })), ...(await held('messages', {}))];
          if (waiting.length === inDocuments.length) break;
          await sleep(100);
        }
        assert.deepEqual(
          waiting.map((e) => e.event).sort(),
          inDocuments,
          'each waits in the document its change was written to',
        );
        const early = (await t.request('GET', '/api/v1/events', { token: org.ownerToken })).body.data;
        assert.deepEqual(
          early.map((e: any) => e.event).sort(),
          withMessage,
          'nothing published yet but what was written with its message',
        );
        waiting.push(...early);
        refusal.allow();
        let listed: any[] = [];
        const published = Date.now() + 30_000;
        while (Date.now() < published) {
          listed = (await t.request('GET', '/api/v1/events?limit=100', { token: org.ownerToken })).body.data;
          if (listed.length >= 6) break;
          await sleep(200);
        }
        await sleep(1_000);
        listed = (await t.request('GET', '/api/v1/events?limit=100', { token: org.ownerToken })).body.data;
        assert.deepEqual(
          listed.map((e) => e.id).sort(),
          waiting.map((e) => e.id).sort(),
          'published once each, under the ids they were stored with',
        );
        const sent = listed.find((e) => e.event === 'message.sent');
        assert.equal(sent.data.status, 'sent');
        assert.equal(sent.data.id, res.body.id);
        assert.deepEqual(listed.find((e) => e.event === 'relay.offline').data, {
          id: welcome.relayId,
          name: listed.find((e) => e.event === 'relay.online').data.name,
          status: 'offline',
        });
        assert.deepEqual(
          [...(await held('relays', {})), ...(await held('messages', {}))],
          [],
          'and cleared from the documents',
        );
      } finally {
        socket.close();
        refusal.restore();
      }
    });
  });
});
