/**
 * A relay's tapbacks, replies and edits reach only its own organization's
 * messages: a frame naming another organization's message id (a forged or
 * buggy agent) changes nothing there and makes no event, while the same
 * frame naming the relay's own message does.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RelaySocket } from '../support/relay-socket.ts';
import { eachBackend, signup, startTestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';

eachBackend((backend) => {
  describe(`inbound scope (${backend})`, () => {
    test("a relay's reaction, reply or edit never touches another organization's message", async (t) => {
      const app = await startTestApp(backend);
      t.after(() => app.stop());
      const [mine, theirs] = [await signup(app, 'Mine'), await signup(app, 'Theirs')];
      const as = (org: typeof mine) => (method: string, path: string, body?: unknown) =>
        app.request(method, path, { token: org.ownerToken, body });
      const [callMine, callTheirs] = [as(mine), as(theirs)];
      const own = await callMine('POST', '/api/v1/messages', { to: '+14155550170', body: 'ours' });
      const other = await callTheirs('POST', '/api/v1/messages', { to: '+14155550171', body: 'not yours' });
      assert.equal(own.status, 201, own.text);
      assert.equal(other.status, 201, other.text);

      const token = await callMine('POST', `/api/v1/tenants/${mine.orgId}/relay-tokens`);
      const relay = await RelaySocket.open(app.base);
      t.after(() => relay.close());
      relay.hello({ registrationToken: token.body.token });
      await relay.next('welcome', undefined, 15_000);
      const row = (rowId: number, extra: Record<string, unknown>) => ({
        type: 'inbound',
        rowId,
        guid: `ROW-${rowId}`,
        from: '+14155550170',
        isGroup: false,
        body: '',
        receivedAt: new Date().toISOString(),
        ...extra,
      });
      relay.send(row(1, { reaction: { kind: 'love', guid: 'G-THEIRS', messageId: other.body.id, removed: false } }));
      relay.send(row(2, { body: 'a reply', replyTo: { guid: 'G-THEIRS', messageId: other.body.id } }));
      relay.send(row(3, { reaction: { kind: 'like', guid: 'G-OURS', messageId: own.body.id, removed: false } }));
      await relay.next('ack', (a) => a.of === 'inbound' && a.cursor === 3, 15_000);
      // An edit names a received message by its guid: the id it derives is of the relay's organization only.
      relay.send({
        type: 'change',
        rowId: 2,
        guid: 'ROW-2',
        change: 'edited',
        at: new Date().toISOString(),
        body: 'x',
      });
      await relay.next('ack', (a) => a.of === 'change', 15_000);

      const reactions = async (call: typeof callMine) =>
        (await call('GET', '/api/v1/events?type=message.reaction')).body.data as any[];
      const mineReactions = await until('our reaction', async () => {
        const list = await reactions(callMine);
        return list.length > 0 && list;
      });
      assert.deepEqual(
        mineReactions.map((e) => [e.data.messageId, e.data.reaction]),
        [[own.body.id, 'like']],
        'the reaction on our message only',
      );
      assert.deepEqual(await reactions(callTheirs), []);
      const theirMessage = (await callTheirs('GET', `/api/v1/messages/${other.body.id}`)).body;
      assert.equal(theirMessage.reactions, undefined);
      assert.equal((await callMine('GET', `/api/v1/messages/${other.body.id}`)).status, 404);
      const reply = ((await callMine('GET', '/api/v1/messages?direction=received')).body.data as any[]).find(
        (m) => m.body === 'x' || m.body === 'a reply',
      );
      assert.equal(reply.replyTo, undefined, 'a reply to a message of another organization names none');
      assert.equal(reply.body, 'x', 'the edit reached the relay its own received message');
      const conversation = (await callMine('GET', `/api/v1/conversations/${reply.conversationId}`)).body;
      assert.equal(conversation.lastMessage, 'x', 'its conversation shows the edited text of its last message');
      assert.deepEqual(((await callTheirs('GET', '/api/v1/events?type=message.edited')).body.data as any[]).length, 0);
    });
  });
});
