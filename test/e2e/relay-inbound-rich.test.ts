/**
 * Inbound beyond plain text, through the real relay agent in simulator mode
 * over the WebSocket: a tapback on a message we sent, an emoji tapback on a
 * received message and its removal, a reply, an edit and an unsend each
 * reach the API, the events API and a webhook exactly once; an agent
 * restarted with its change cursor lost (a crash before it was stored) reads
 * them all again and adds nothing.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  readSendLog,
  simulateEdit,
  simulateGroupEvent,
  simulateInbound,
  simulateReaction,
  simulateReply,
  simulateUnsend,
} from '../../packages/relay-agent/src/simulated-messages-app.ts';
import { simulatorArgs, startAgent } from '../support/fake-relay-server.ts';
import { eachBackend, signup, startTestApp } from '../support/test-app.ts';
import { until } from '../support/until.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

const richEvents = ['message.received', 'message.reaction', 'message.edited', 'message.unsent', 'conversation.updated'];

eachBackend((backend) => {
  describe(`inbound reactions, replies, edits and unsends (${backend})`, { timeout: 300_000 }, () => {
    test('each reaches the API, the events API and a webhook once, and a restarted agent adds none', async (t) => {
      const app = await startTestApp(backend, { WEBHOOK_ALLOW_PRIVATE: 'true' });
      const receiver = await WebhookReceiver.start();
      const dir = await mkdtemp(join(tmpdir(), 'relaybox-rich-'));
      const org = await signup(app);
      const call = (method: string, path: string, body?: unknown) =>
        app.request(method, path, { token: org.ownerToken, body });
      const token = await call('POST', `/api/v1/tenants/${org.orgId}/relay-tokens`);
      assert.equal(token.status, 201, token.text);
      const ws = `${app.base.replace('http', 'ws')}/api/v1/relays/connect`;
      const { args, chatDb } = simulatorArgs(ws, dir, token.body.token);
      let agent = startAgent(args);
      t.after(async () => {
        if (process.env.SHOW_AGENT) console.log(agent.output());
        agent.child.kill('SIGKILL');
        await app.stop();
        await receiver.stop();
        await rm(dir, { recursive: true, force: true });
      });
      const hook = await call('POST', '/api/v1/webhooks', { url: receiver.url, events: richEvents });
      assert.equal(hook.status, 201, hook.text);
      await until('the agent past its inbound floor', async () => agent.output().includes('credential-stored'), 30_000);

      const events = async (type: string) =>
        (await call('GET', `/api/v1/events?type=${type}&limit=100`)).body.data as any[];
      const message = async (id: string) => (await call('GET', `/api/v1/messages/${id}`)).body;
      const friend = '+14155550160';

      // An automation on reactions: a love tapback gets a thank-you (the emoji one and the removal do not match).
      const automation = await call('POST', '/api/v1/automations', {
        name: 'Thank a love',
        trigger: 'message_reaction',
        conditions: [{ field: 'body', operator: 'equals', value: 'love' }],
        actions: [{ type: 'send_reply', config: { body: 'glad you like it' } }],
      });
      assert.equal(automation.status, 201, automation.text);
      const thanks = async () =>
        ((await call('GET', '/api/v1/messages?direction=sent')).body.data as any[]).filter(
          (m) => m.body === 'glad you like it',
        );

      // A message we send, delivered: the agent knows its chat.db guid.
      const sent = await call('POST', '/api/v1/messages', { to: friend, body: 'dinner at 8?' });
      assert.equal(sent.status, 201, sent.text);
      await until('our message delivered', async () => (await message(sent.body.id)).status === 'delivered', 30_000);
      const sentGuid = (await readSendLog(chatDb)).find((e) => e.messageId === sent.body.id)!.guid;
      const hello = await simulateInbound(chatDb, { from: friend, body: 'hi there' });

      await simulateReaction(chatDb, { from: friend, targetGuid: sentGuid, tapback: 'love' });
      await simulateReaction(chatDb, { from: friend, targetGuid: hello.guid, tapback: 'emoji', emoji: '🌮' });
      await simulateReaction(chatDb, {
        from: friend,
        targetGuid: hello.guid,
        tapback: 'emoji',
        emoji: '🌮',
        removed: true,
      });
      const reply = await simulateReply(chatDb, { from: friend, body: 'yes!', replyToGuid: sentGuid });
      const reactions = await until(
        'three message.reaction events',
        async () => ((await events('message.reaction')).length === 3 ? events('message.reaction') : undefined),
        30_000,
      );
      // The reply's row comes after the tapbacks': it may be stored a moment after their events.
      const received = await until(
        'the received message and the reply stored',
        async () => {
          const data = (await call('GET', '/api/v1/messages?direction=received')).body.data as any[];
          return data.some((m) => m.body === 'hi there') && data.some((m) => m.body === 'yes!') ? data : undefined;
        },
        30_000,
      );
      const helloMessage = received.find((m) => m.body === 'hi there');
      const replyMessage = received.find((m) => m.body === 'yes!');
      assert.ok(helloMessage && replyMessage, JSON.stringify(received));
      assert.deepEqual(
        reactions.reverse().map((e) => e.data),
        [
          {
            messageId: sent.body.id,
            reaction: 'love',
            from: friend,
            removed: false,
            conversationId: sent.body.conversationId,
            at: reactions[0].data.at,
          },
          {
            messageId: helloMessage.id,
            reaction: 'emoji',
            emoji: '🌮',
            from: friend,
            removed: false,
            conversationId: helloMessage.conversationId,
            at: reactions[1].data.at,
          },
          {
            messageId: helloMessage.id,
            reaction: 'emoji',
            emoji: '🌮',
            from: friend,
            removed: true,
            conversationId: helloMessage.conversationId,
            at: reactions[2].data.at,
          },
        ],
      );
      const [thank] = await until(
        'the automated thank-you',
        async () => ((await thanks()).length > 0 ? thanks() : undefined),
        30_000,
      );
      assert.equal(thank.to, friend);
      const runs = await until(
        'both tapbacks given evaluated (the removal runs nothing)',
        async () => {
          const list = (await call('GET', `/api/v1/automations/${automation.body.id}`)).body.executions as any[];
          return list.length >= 2 && list;
        },
        30_000,
      );
      assert.deepEqual(
        runs.map((r: any) => [r.trigger, r.messageId, r.matched]).sort(),
        [
          ['message_reaction', helloMessage.id, false],
          ['message_reaction', sent.body.id, true],
        ].sort(),
      );
      // A tapback is not a received message; the reply is one, answering ours.
      assert.equal(received.length, 2);
      assert.equal(replyMessage.replyTo, sent.body.id);
      const replyEvent = (await events('message.received')).find((e) => e.data.id === replyMessage.id);
      assert.equal(replyEvent.data.replyTo, sent.body.id);
      const ours = await message(sent.body.id);
      assert.deepEqual(
        ours.reactions.map((r: any) => [r.reaction, r.from]),
        [['love', friend]],
      );
      assert.equal((await message(helloMessage.id)).reactions, undefined, 'the emoji tapback was removed');

      assert.ok(await simulateEdit(chatDb, { guid: hello.guid, body: 'hi there, friend' }));
      assert.ok(await simulateUnsend(chatDb, reply.guid));
      await until(
        'message.edited and message.unsent',
        async () => (await events('message.edited')).length === 1 && (await events('message.unsent')).length === 1,
        30_000,
      );
      const edited = await message(helloMessage.id);
      assert.equal(edited.body, 'hi there, friend');
      assert.equal(edited.edited, true);
      const [editEvent] = await events('message.edited');
      assert.equal(editEvent.data.id, helloMessage.id);
      assert.equal(editEvent.data.body, 'hi there, friend');
      assert.equal(editEvent.data.editedAt, edited.editedAt);
      const unsent = await message(replyMessage.id);
      assert.equal(unsent.unsent, true);
      assert.equal(unsent.body, '');
      assert.equal((await events('message.unsent'))[0].data.id, replyMessage.id);
      // The conversation's history shows the latest text, the flags and the reactions too.
      const history = (await call('GET', `/api/v1/conversations/${helloMessage.conversationId}`)).body
        .messages as any[];
      const byId = new Map(history.map((m) => [m.id, m]));
      assert.equal(byId.get(helloMessage.id).body, 'hi there, friend');
      assert.equal(byId.get(helloMessage.id).edited, true);
      assert.equal(byId.get(replyMessage.id).unsent, true);
      assert.deepEqual(
        byId.get(sent.body.id).reactions.map((r: any) => r.reaction),
        ['love'],
      );

      // A group chat renamed, a member added, and that member leaving: its conversation follows, one event each.
      const group = 'dinner-crew';
      const newcomer = '+14155550161';
      await simulateGroupEvent(chatDb, { group, from: friend, change: 'renamed', name: 'Dinner crew' });
      // Each event carries the members as the agent reads them: the next change waits for this one to be read.
      await until('the rename', async () => (await events('conversation.updated')).length === 1, 30_000);
      await simulateGroupEvent(chatDb, { group, from: friend, change: 'participant_added', handle: newcomer });
      const updates = await until(
        'two conversation.updated events',
        async () =>
          (await events('conversation.updated')).length === 2
            ? (await events('conversation.updated')).reverse()
            : undefined,
        30_000,
      );
      assert.deepEqual(
        updates.map((e) => [e.data.change, e.data.name, e.data.handle, e.data.by, e.data.participants]),
        [
          ['renamed', 'Dinner crew', undefined, friend, [friend]],
          ['participant_added', undefined, newcomer, friend, [friend, newcomer]],
        ],
      );
      const conversationId = updates[0].data.conversationId;
      await simulateGroupEvent(chatDb, { group, from: newcomer, change: 'participant_left' });
      const left = await until(
        'the member gone from the conversation',
        async () => {
          const c = (await call('GET', `/api/v1/conversations/${conversationId}`)).body;
          return c.participants?.length === 1 && c;
        },
        30_000,
      );
      assert.equal(left.name, 'Dinner crew');
      assert.equal(left.isGroup, true);
      assert.deepEqual(left.participants, [friend]);
      const [gone] = await events('conversation.updated');
      assert.deepEqual([gone.data.change, gone.data.handle, gone.data.by], ['participant_left', newcomer, newcomer]);

      // A crash before the change cursor was stored: the restarted agent reads every change again.
      agent.child.kill('SIGKILL');
      await agent.exited;
      const statePath = join(dir, 'state', 'relay.json');
      const state = JSON.parse(await readFile(statePath, 'utf8'));
      await writeFile(statePath, JSON.stringify({ ...state, changesCursorMs: 0 }));
      agent = startAgent(args);
      await until(
        'the restarted agent forwards',
        async () => agent.output().includes('"event":"online"') || agent.output().includes('online'),
        30_000,
      );
      await simulateInbound(chatDb, { from: friend, body: 'still there?' });
      await until(
        'the message after the restart',
        async () => (await call('GET', '/api/v1/messages?direction=received')).body.data.length === 3,
        30_000,
      );
      await until(
        'the restarted agent acknowledged the changes again',
        async () => JSON.parse(await readFile(statePath, 'utf8')).changesCursorMs > 0,
        30_000,
      );
      assert.equal((await events('message.reaction')).length, 3);
      assert.equal((await events('message.edited')).length, 1);
      assert.equal((await events('message.unsent')).length, 1);
      assert.equal((await events('message.received')).length, 3);
      assert.equal((await events('conversation.updated')).length, 3);
      assert.equal((await thanks()).length, 1, 'the automation ran once on the love tapback');
      assert.equal(
        ((await call('GET', `/api/v1/automations/${automation.body.id}`)).body.executions as any[]).length,
        2,
      );

      // The webhook got each event, and each once (by its webhook-id), however often it was published.
      await until(
        'every event delivered',
        async () => new Set(receiver.received.map((d) => d.headers['webhook-id'])).size === 11,
        30_000,
      );
      const delivered = receiver.received.map((d) => d.json.event as string);
      assert.equal(delivered.filter((e) => e === 'message.reaction').length, 3);
      assert.equal(delivered.filter((e) => e === 'message.received').length, 3);
      assert.equal(delivered.filter((e) => e === 'message.edited').length, 1);
      assert.equal(delivered.filter((e) => e === 'message.unsent').length, 1);
      assert.equal(delivered.filter((e) => e === 'conversation.updated').length, 3);
    });
  });
});
