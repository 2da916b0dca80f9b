import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { relayProtocol } from '../../src/actors/relay/protocol.ts';
import { AutomationRouter } from '../../src/automations/automation-router.ts';
import { automationCollections } from '../../src/automations/automation-store.ts';
import { domainEvent } from '../../src/events/event-stream.ts';
import { conversationIdOf } from '../../src/messages/recipients.ts';
import { actorClient } from '../../src/runtime/actor.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { sleep, until } from '../support/until.ts';
import { verifySignature as verify, WebhookReceivers } from '../support/webhook-receiver.ts';

const ourNumber = '+14155550000';
const replyCap = 2;

eachBackend((backend) => {
  describe(`automations (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];
    const receivers = new WebhookReceivers();
    let row = 0;

    before(async () => {
      t = await startTestApp(backend, {
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_RETRY_BASE_MS: '40',
        WEBHOOK_RETRY_CAP_MS: '400',
        AUTOMATION_REPLIES_PER_CONVERSATION_PER_HOUR: String(replyCap),
      });
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
      await receivers.stopAll();
    });

    const receiver = receivers.start;
    const call = (org: Org, method: string, path: string, body?: unknown, token = org.ownerToken) =>
      t.request(method, `/api/v1${path}`, { token, body });
    const automation = async (org: Org, body: Record<string, unknown>) => {
      const res = await call(org, 'POST', '/automations', body);
      assert.equal(res.status, 201, res.text);
      return res.body;
    };
    const relayOf = async (org: Org, capacity = 0) => {
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity, phoneNumbers: [ourNumber] });
      relays.push(relay);
      await relay.connect();
      return relay;
    };
    /** A received message, as the gateway reports one; answers its id once stored. */
    const receive = async (org: Org, relay: StandInRelay, from: string, body: string): Promise<string> => {
      row++;
      const guid = `GUID-${org.orgId}-${row}`;
      await actorClient(t.app.runtime, relayProtocol).send(relay.id, {
        kind: 'inbound',
        tenantId: org.orgId,
        session: relay.session,
        rowId: row,
        guid,
        from,
        isGroup: false,
        body,
        receivedAt: new Date().toISOString(),
      });
      const listed = await until('the received message', async () => {
        const res = await call(
          org,
          'GET',
          `/messages?direction=received&participant=${encodeURIComponent(from)}&limit=100`,
        );
        return res.body.data.find((m: any) => m.body === body);
      });
      return listed.id;
    };
    const executions = async (org: Org, id: string) =>
      (await call(org, 'GET', `/automations/${id}/executions?limit=100`)).body.data as any[];
    const settled = (org: Org, id: string, count: number) =>
      until(`${count} settled executions`, async () => {
        const list = await executions(org, id);
        return (
          list.length >= count &&
          list.every((e) => e.actions.every((a: any) => a.status !== 'pending' && a.status !== 'retrying')) &&
          list
        );
      });
    const sentTo = async (org: Org, participant: string) =>
      (await call(org, 'GET', `/messages?direction=sent&participant=${encodeURIComponent(participant)}&limit=100`)).body
        .data as any[];
    const contactsOf = async (org: Org) => (await call(org, 'GET', '/contacts?limit=100')).body.data as any[];

    test('routes: create, read, full replacement, toggle, delete with its log; secrets never returned; admins write, viewers read', async () => {
      const org = await signup(t, 'Rules');
      const made = await automation(org, {
        name: 'Forward',
        trigger: 'message_received',
        conditions: [{ field: 'body', operator: 'contains', value: 'order' }],
        actions: [
          { type: 'log_to_crm', config: { url: 'https://93.184.216.34/crm', apiKey: 'crm-key', secret: 'shh' } },
        ],
      });
      assert.deepEqual(Object.keys(made).sort(), [
        'actions',
        'conditions',
        'createdAt',
        'enabled',
        'executionCount',
        'id',
        'lastExecutedAt',
        'logic',
        'name',
        'trigger',
        'updatedAt',
      ]);
      assert.match(made.id, /^aut_/);
      assert.equal(made.logic, 'and');
      assert.equal(made.enabled, true);
      assert.equal(made.executionCount, 0);
      assert.equal(made.lastExecutedAt, null);
      assert.deepEqual(made.actions, [
        { type: 'log_to_crm', config: { url: 'https://93.184.216.34/crm', hasApiKey: true, hasSecret: true } },
      ]);
      assert.ok(!JSON.stringify(made).includes('crm-key'));
      const detail = await call(org, 'GET', `/automations/${made.id}`);
      assert.deepEqual(detail.body, { ...made, executions: [] });
      assert.deepEqual((await call(org, 'GET', '/automations')).body.data, [made]);

      const replaced = await call(org, 'PUT', `/automations/${made.id}`, {
        name: 'Reply',
        trigger: 'message_sent',
        actions: [{ type: 'send_reply', config: { body: 'hi' } }],
      });
      assert.equal(replaced.status, 200, replaced.text);
      assert.deepEqual(replaced.body.conditions, [], 'full replacement: absent conditions are none');
      assert.equal(replaced.body.trigger, 'message_sent');
      const noActions = await call(org, 'PUT', `/automations/${made.id}`, { name: 'Reply', trigger: 'message_sent' });
      assert.equal(noActions.status, 400);
      assert.equal(noActions.body.error, 'validation_error');
      assert.equal(noActions.body.details[0].path, '/actions');
      assert.equal(
        (await call(org, 'PUT', `/automations/${made.id}`, { trigger: 'message_sent', actions: [] })).status,
        400,
      );

      const off = await call(org, 'PATCH', `/automations/${made.id}/toggle`);
      assert.equal(off.status, 200);
      assert.equal(off.body.enabled, false);
      assert.equal((await call(org, 'PATCH', `/automations/${made.id}/toggle`)).body.enabled, true);

      const viewer = await apiKey(t, org, 'viewer');
      const member = await apiKey(t, org, 'member');
      const admin = await apiKey(t, org, 'admin');
      assert.equal((await call(org, 'GET', '/automations', undefined, viewer)).status, 200);
      assert.equal((await call(org, 'GET', `/automations/${made.id}/executions`, undefined, viewer)).status, 200);
      assert.equal(
        (await call(org, 'POST', `/automations/${made.id}/test`, { message: { body: 'x' } }, viewer)).status,
        200,
      );
      const body = { name: 'x', trigger: 'message_sent', actions: [{ type: 'send_reply', config: { body: 'hi' } }] };
      for (const token of [viewer, member]) {
        assert.equal((await call(org, 'POST', '/automations', body, token)).status, 403);
        assert.equal((await call(org, 'PUT', `/automations/${made.id}`, body, token)).status, 403);
        assert.equal((await call(org, 'PATCH', `/automations/${made.id}/toggle`, undefined, token)).status, 403);
        assert.equal((await call(org, 'DELETE', `/automations/${made.id}`, undefined, token)).status, 403);
      }
      assert.equal((await call(org, 'PUT', `/automations/${made.id}`, body, admin)).status, 200);
      assert.equal((await call(org, 'DELETE', `/automations/${made.id}`)).status, 204);
      for (const [method, path] of [
        ['GET', ''],
        ['GET', '/executions'],
        ['DELETE', ''],
        ['PATCH', '/toggle'],
      ] as const) {
        assert.equal((await call(org, method, `/automations/${made.id}${path}`)).status, 404, `${method} ${path}`);
      }
    });

    test('bodies are validated: fields, operators, limits, patterns that need backtracking, private URLs', async () => {
      const org = await signup(t, 'Strict');
      const reply = { type: 'send_reply', config: { body: 'hi' } };
      const base = { name: 'n', trigger: 'message_received', actions: [reply] };
      const cond = { field: 'body', operator: 'contains', value: 'x' };
      for (const [body, path] of [
        [{ trigger: 'message_received', actions: [reply] }, '/name'],
        [{ name: 'n', actions: [reply] }, '/trigger'],
        [{ ...base, trigger: 'message_failed' }, '/trigger'],
        [{ ...base, logic: 'xor' }, '/logic'],
        [{ ...base, conditions: [{ ...cond, field: 'subject' }] }, '/conditions/0/field'],
        [{ ...base, conditions: [{ ...cond, operator: 'like' }] }, '/conditions/0/operator'],
        [{ ...base, conditions: Array.from({ length: 21 }, () => cond) }, '/conditions'],
        [{ ...base, actions: Array.from({ length: 11 }, () => reply) }, '/actions'],
        [{ ...base, name: 'n'.repeat(201) }, '/name'],
        [{ ...base, conditions: [{ ...cond, operator: 'matches_regex', value: '(a)\\1' }] }, '/conditions/0/value'],
        [{ ...base, conditions: [{ ...cond, operator: 'matches_regex', value: 'x(?=y)' }] }, '/conditions/0/value'],
        [
          { ...base, conditions: [{ ...cond, operator: 'matches_regex', value: 'a'.repeat(501) }] },
          '/conditions/0/value',
        ],
        [{ ...base, unknown: 1 }, ''],
      ] as const) {
        const res = await call(org, 'POST', '/automations', body);
        assert.equal(res.status, 400, JSON.stringify(body).slice(0, 200));
        assert.equal(res.body.error, 'validation_error');
        if (path) assert.equal(res.body.details[0].path, path, JSON.stringify(body).slice(0, 200));
      }
      const lookahead = await call(org, 'POST', '/automations', {
        ...base,
        conditions: [{ ...cond, operator: 'matches_regex', value: 'x(?=y)' }],
      });
      assert.match(lookahead.body.message, /lookahead/);
      const strict = await startTestApp(backend);
      try {
        const o = await signup(strict, 'Guarded');
        const res = await strict.request('POST', '/api/v1/automations', {
          token: o.ownerToken,
          body: { ...base, actions: [{ type: 'call_webhook', config: { url: 'http://127.0.0.1:9/x' } }] },
        });
        assert.equal(res.status, 400);
        assert.equal(res.body.details[0].path, '/actions/0/config/url');
        assert.match(res.body.details[0].message, /WEBHOOK_ALLOW_PRIVATE=true/, 'the refusal names the setting');
      } finally {
        await strict.stop();
      }
      for (let i = 0; i < 100; i++) await automation(org, { ...base, name: `rule ${i}`, enabled: false });
      const over = await call(org, 'POST', '/automations', base);
      assert.equal(over.status, 400);
      assert.match(over.body.message, /at most 100/);
    });

    test('the dry run answers what the real run then does, for a table of cases; it sends, creates and calls nothing', async () => {
      const org = await signup(t, 'Dry');
      const relay = await relayOf(org);
      const hook = await receiver();
      const cases: Array<{ rule: Record<string, unknown>; from: string; body: string }> = [
        { rule: { conditions: [] }, from: '+14155550201', body: 'anything' },
        {
          rule: { conditions: [{ field: 'body', operator: 'equals', value: 'STOP' }] },
          from: '+14155550202',
          body: 'stop',
        },
        {
          rule: { conditions: [{ field: 'body', operator: 'equals', value: 'STOP' }] },
          from: '+14155550203',
          body: 'stop now',
        },
        {
          rule: {
            logic: 'or',
            conditions: [
              { field: 'from', operator: 'is_in', value: '+1 415 555 0204, +44 20 7946 0958' },
              { field: 'body', operator: 'contains', value: 'zzz' },
            ],
          },
          from: '+14155550204',
          body: 'hello',
        },
        {
          rule: {
            logic: 'and',
            conditions: [
              { field: 'from', operator: 'starts_with', value: '+1415' },
              { field: 'body', operator: 'matches_regex', value: '^order #\\d+$' },
            ],
          },
          from: '+14155550205',
          body: 'order #12',
        },
        {
          rule: {
            logic: 'and',
            conditions: [
              { field: 'to', operator: 'equals', value: ourNumber },
              { field: 'body', operator: 'ends_with', value: 'please' },
            ],
          },
          from: '+14155550206',
          body: 'help',
        },
      ];
      for (const c of cases) {
        const made = await automation(org, {
          name: 'case',
          trigger: 'message_received',
          ...c.rule,
          actions: [
            { type: 'create_contact', config: { tags: ['dry'] } },
            { type: 'call_webhook', config: { url: hook.url } },
          ],
        });
        const calledBefore = hook.received.length;
        const contactsBefore = (await contactsOf(org)).length;
        const dry = await call(org, 'POST', `/automations/${made.id}/test`, {
          message: { from: c.from, body: c.body, to: ourNumber },
        });
        assert.equal(dry.status, 200, dry.text);
        assert.deepEqual(Object.keys(dry.body).sort(), ['actionsWouldExecute', 'conditionsEvaluated', 'matched']);
        assert.equal(dry.body.conditionsEvaluated.length, (c.rule.conditions as unknown[]).length);
        await sleep(200);
        assert.equal(hook.received.length, calledBefore, 'the dry run calls nothing');
        assert.equal((await contactsOf(org)).length, contactsBefore, 'the dry run creates nothing');
        const messageId = await receive(org, relay, c.from, c.body);
        const [exec] = await settled(org, made.id, 1);
        assert.equal(exec.messageId, messageId);
        assert.equal(exec.trigger, 'message_received');
        assert.equal(exec.matched, dry.body.matched, JSON.stringify(c));
        assert.deepEqual(
          exec.actions.map((a: any) => a.type),
          dry.body.actionsWouldExecute,
          JSON.stringify(c),
        );
        assert.ok(
          exec.actions.every((a: any) => a.status === 'succeeded' && a.error === null),
          JSON.stringify(exec),
        );
        assert.equal(hook.received.length, calledBefore + (dry.body.matched ? 1 : 0));
        assert.equal((await contactsOf(org)).length, contactsBefore + (dry.body.matched ? 1 : 0));
        // The count moves when the execution is done, just after its last action settled; the rule is turned off
        // only then, since FerretDB 1.x applies two updates of one document at once as read-modify-write, losing one.
        const detail = await until('the execution counted', async () => {
          const body = (await call(org, 'GET', `/automations/${made.id}`)).body;
          return body.executionCount === (dry.body.matched ? 1 : 0) && body;
        });
        await call(org, 'PATCH', `/automations/${made.id}/toggle`);
        assert.equal(detail.executions[0].id, exec.id);
        assert.equal(detail.lastExecutedAt !== null, dry.body.matched);
      }
      assert.equal(hook.received.length, 4, 'the table has four matching and two not matching cases');
      const metrics = await t.request('GET', '/metrics');
      assert.match(metrics.text, /relaybox_automation_executions_total\{outcome="succeeded"\} [1-9]/);
      assert.match(metrics.text, /relaybox_automation_executions_total\{outcome="not_matched"\} [1-9]/);
      assert.match(metrics.text, /relaybox_automation_actions_total\{type="call_webhook",status="succeeded"\} [1-9]/);
    });

    test('send_reply goes through the send path to the sender, same team and conversation; create_contact creates, then only adds tags', async () => {
      const org = await signup(t, 'Reply');
      const relay = await relayOf(org);
      const made = await automation(org, {
        name: 'STOP',
        trigger: 'message_received',
        conditions: [{ field: 'body', operator: 'equals', value: 'stop' }],
        actions: [
          { type: 'send_reply', config: { body: 'You are unsubscribed.' } },
          { type: 'create_contact', config: { firstName: 'Opted out', tags: ['unsubscribed'] } },
        ],
      });
      const sender = '+14155550301';
      const first = await receive(org, relay, sender, 'STOP');
      await settled(org, made.id, 1);
      const replies = await sentTo(org, sender);
      assert.equal(replies.length, 1);
      assert.equal(replies[0].body, 'You are unsubscribed.');
      assert.equal(replies[0].to, sender);
      assert.equal(replies[0].conversationId, conversationIdOf(org.orgId, org.teamId, sender));
      let contacts = await contactsOf(org);
      assert.equal(contacts.length, 1);
      assert.equal(contacts[0].firstName, 'Opted out');
      assert.deepEqual(contacts[0].phoneNumbers, [sender]);
      assert.deepEqual(contacts[0].tags, ['unsubscribed']);
      assert.notEqual(first, undefined);

      // An existing contact with that phone: tags added, nothing created.
      const other = '+14155550302';
      const existing = await call(org, 'POST', '/contacts', {
        firstName: 'Known',
        phoneNumbers: [other],
        tags: ['vip'],
      });
      assert.equal(existing.status, 201);
      await receive(org, relay, other, 'stop');
      await settled(org, made.id, 2);
      contacts = await contactsOf(org);
      assert.equal(contacts.length, 2);
      const known = contacts.find((c) => c.id === existing.body.id);
      assert.deepEqual(known.tags, ['vip', 'unsubscribed']);
      assert.equal(known.firstName, 'Known');
    });

    test('call_webhook and log_to_crm: signed, retried, with the message (and for CRM the contact and the API key)', async () => {
      const org = await signup(t, 'Hooks');
      const relay = await relayOf(org);
      const hook = await receiver();
      const crm = await receiver();
      let failures = 1;
      hook.respond = (_req, res) => void (failures-- > 0 ? res.writeHead(500).end('busy') : res.writeHead(204).end());
      await call(org, 'POST', '/contacts', { firstName: 'Ada', phoneNumbers: ['+14155550401'] });
      const made = await automation(org, {
        name: 'Tell everyone',
        trigger: 'message_received',
        actions: [
          { type: 'call_webhook', config: { url: hook.url, secret: 'hook-secret' } },
          { type: 'log_to_crm', config: { url: crm.url, apiKey: 'crm-api-key', secret: 'crm-secret' } },
        ],
      });
      const messageId = await receive(org, relay, '+14155550401', 'hello there');
      const [exec] = await settled(org, made.id, 1);
      assert.deepEqual(exec.actions, [
        { type: 'call_webhook', status: 'succeeded', error: null },
        { type: 'log_to_crm', status: 'succeeded', error: null },
      ]);
      assert.equal(hook.received.length, 2, 'one failed attempt, one retry');
      assert.equal(hook.received[0]!.headers['webhook-id'], hook.received[1]!.headers['webhook-id']);
      const payload = verify(hook.received[1]!, 'hook-secret');
      assert.equal(payload.event, 'message.received');
      assert.equal(payload.automationId, made.id);
      assert.deepEqual(Object.keys(payload.data).sort(), ['body', 'conversationId', 'from', 'id', 'status', 'to']);
      assert.equal(payload.data.id, messageId);
      assert.equal(payload.data.body, 'hello there');
      assert.equal(crm.received.length, 1);
      const crmPayload = verify(crm.received[0]!, 'crm-secret');
      assert.equal(crm.received[0]!.headers.authorization, 'Bearer crm-api-key');
      assert.equal(crmPayload.data.from, '+14155550401');
      assert.equal(crmPayload.contact.firstName, 'Ada');
    });

    test('message_delivered and message_read run once on the first delivered and read of a sent message, with deliveredAt and readAt', async () => {
      const org = await signup(t, 'Receipts');
      const relay = await relayOf(org, 5);
      const hook = await receiver();
      const onDelivered = await automation(org, {
        name: 'Delivered',
        trigger: 'message_delivered',
        actions: [{ type: 'call_webhook', config: { url: hook.url, secret: 's' } }],
      });
      const onRead = await automation(org, {
        name: 'Read',
        trigger: 'message_read',
        actions: [{ type: 'call_webhook', config: { url: hook.url, secret: 's' } }],
      });
      const out = await call(org, 'POST', '/messages', { to: '+14155550701', body: 'did it arrive?' });
      assert.equal(out.status, 201);
      await until('dispatched', async () => relay.sends.some((f) => f.messageId === out.body.id));
      for (const status of ['sent', 'delivered', 'delivered', 'read', 'read'] as const)
        await relay.report(out.body.id, status);
      const [delivered] = await settled(org, onDelivered.id, 1);
      const [read] = await settled(org, onRead.id, 1);
      assert.deepEqual(
        [delivered.trigger, delivered.messageId, delivered.matched],
        ['message_delivered', out.body.id, true],
      );
      assert.deepEqual([read.trigger, read.messageId, read.matched], ['message_read', out.body.id, true]);
      const calls = (await hook.waitFor(2))
        .map((d) => verify(d, 's'))
        .sort((a: any, b: any) => a.event.localeCompare(b.event));
      const status = (await call(org, 'GET', `/messages/${out.body.id}/status`)).body;
      assert.deepEqual(
        calls.map((p: any) => [p.event, p.automationId, p.data.id]),
        [
          ['message.delivered', onDelivered.id, out.body.id],
          ['message.read', onRead.id, out.body.id],
        ],
      );
      assert.equal(calls[0].data.deliveredAt, status.deliveredAt);
      assert.equal(calls[1].data.readAt, status.readAt);
      await sleep(500);
      assert.equal(
        (await executions(org, onDelivered.id)).length + (await executions(org, onRead.id)).length,
        2,
        'the repeated reports trigger nothing',
      );
      assert.equal(hook.received.length, 2);
    });

    test('loop guard: a reply never triggers automations; at most the hourly cap of replies per conversation, the rest skipped with the reason', async () => {
      const org = await signup(t, 'Loops');
      const relay = await relayOf(org, 50);
      const echo = await automation(org, {
        name: 'Echo',
        trigger: 'message_sent',
        actions: [{ type: 'send_reply', config: { body: 'and another thing' } }],
      });
      const out = await call(org, 'POST', '/messages', { to: '+14155550501', body: 'first' });
      assert.equal(out.status, 201);
      const reportSent = async (count: number) => {
        const frames = await until(`${count} send frames`, async () => relay.sends.length >= count && relay.sends);
        for (const f of frames) await relay.report(f.messageId, 'sent');
      };
      await reportSent(1);
      await settled(org, echo.id, 1);
      await reportSent(2);
      await sleep(1_500);
      assert.equal((await executions(org, echo.id)).length, 1, 'the reply did not trigger the automation');
      assert.equal((await sentTo(org, '+14155550501')).length, 2);
      await call(org, 'PATCH', `/automations/${echo.id}/toggle`);

      const responder = await automation(org, {
        name: 'Auto-answer',
        trigger: 'message_received',
        actions: [{ type: 'send_reply', config: { body: 'We will get back to you' } }],
      });
      for (let i = 0; i < replyCap + 2; i++) await receive(org, relay, '+14155550502', `question ${i}`);
      const list = await settled(org, responder.id, replyCap + 2);
      const statuses = list.map((e) => e.actions[0].status).sort();
      assert.deepEqual(statuses, [...Array(replyCap).fill('succeeded'), 'skipped', 'skipped'].sort());
      for (const e of list.filter((x) => x.actions[0].status === 'skipped'))
        assert.match(e.actions[0].error, /loop guard/);
      assert.equal((await sentTo(org, '+14155550502')).length, replyCap);
      const metrics = await t.request('GET', '/metrics');
      assert.match(metrics.text, /relaybox_automation_actions_total\{type="send_reply",status="skipped"\} [1-9]/);
    });

    test('a message whose event is read again makes one execution and one call', async () => {
      const org = await signup(t, 'Once');
      const hook = await receiver();
      const made = await automation(org, {
        name: 'Once',
        trigger: 'message_received',
        actions: [{ type: 'call_webhook', config: { url: hook.url } }],
      });
      const data = {
        id: 'msg_in_redelivered',
        to: ourNumber,
        from: '+14155550601',
        body: 'again',
        status: 'delivered',
        conversationId: conversationIdOf(org.orgId, org.teamId, '+14155550601'),
      };
      // The stream holds an event id once; the same message under three event ids is what a consumer reading it again sees.
      const event = (n: number) =>
        domainEvent('message.received', { tenantId: org.orgId, teamId: org.teamId }, data, `evt_${org.orgId}_${n}`);
      await t.app.events.append([event(1), event(2)]);
      await settled(org, made.id, 1);
      await t.app.events.append([event(3)]);
      await sleep(1_000);
      assert.equal((await executions(org, made.id)).length, 1);
      assert.equal(hook.received.length, 1);
      assert.equal((await call(org, 'GET', `/automations/${made.id}`)).body.executionCount, 1);

      // The very same stream entry handed to the router again (a consumer that died before acknowledging it).
      const router = new AutomationRouter({
        db: automationCollections(t.app.store),
        messages: t.app.store.collection('messages'),
        runtime: t.app.runtime,
      });
      const again = domainEvent(
        'message.received',
        { tenantId: org.orgId, teamId: org.teamId },
        { ...data, id: 'msg_in_read_twice' },
        `evt_${org.orgId}_twice`,
      );
      await router.route([{ position: '1-0', event: again }]);
      await router.route([{ position: '1-0', event: again }]);
      await until('two executions', async () => (await executions(org, made.id)).length === 2);
      await settled(org, made.id, 2);
      await sleep(500);
      assert.equal((await executions(org, made.id)).length, 2);
      assert.equal(hook.received.length, 2);
    });

    test('a disabled automation is silent, and toggling takes effect for the next message', async () => {
      const org = await signup(t, 'Quiet');
      const relay = await relayOf(org);
      const hook = await receiver();
      const made = await automation(org, {
        name: 'Off',
        trigger: 'message_received',
        enabled: false,
        actions: [{ type: 'call_webhook', config: { url: hook.url } }],
      });
      const witness = await automation(org, {
        name: 'Witness',
        trigger: 'message_received',
        actions: [{ type: 'create_contact', config: {} }],
      });
      await receive(org, relay, '+14155550701', 'one');
      await settled(org, witness.id, 1);
      assert.equal((await executions(org, made.id)).length, 0);
      assert.equal(hook.received.length, 0);
      await call(org, 'PATCH', `/automations/${made.id}/toggle`);
      await receive(org, relay, '+14155550702', 'two');
      await settled(org, made.id, 1);
      assert.equal(hook.received.length, 1);
    });

    test("organizations are apart: org B gets 404 on org A's automations, and A's rules never run on B's messages", async () => {
      const a = await signup(t, 'A');
      const b = await signup(t, 'B');
      const relayB = await relayOf(b);
      const made = await automation(a, {
        name: 'A only',
        trigger: 'message_received',
        actions: [{ type: 'create_contact', config: { tags: ['a'] } }],
      });
      const bWitness = await automation(b, {
        name: 'B',
        trigger: 'message_received',
        actions: [{ type: 'create_contact', config: { tags: ['b'] } }],
      });
      for (const [method, path, body] of [
        ['GET', '', undefined],
        ['GET', '/executions', undefined],
        ['PUT', '', { name: 'x', trigger: 'message_sent', actions: [{ type: 'send_reply', config: { body: 'x' } }] }],
        ['PATCH', '/toggle', undefined],
        ['POST', '/test', { message: { body: 'x' } }],
        ['DELETE', '', undefined],
      ] as const) {
        assert.equal((await call(b, method, `/automations/${made.id}${path}`, body)).status, 404, `${method} ${path}`);
      }
      assert.deepEqual(
        (await call(b, 'GET', '/automations')).body.data.map((x: any) => x.id),
        [bWitness.id],
      );
      await receive(b, relayB, '+14155550801', 'hello B');
      await settled(b, bWitness.id, 1);
      await sleep(500);
      assert.equal((await executions(a, made.id)).length, 0);
      assert.deepEqual(
        (await contactsOf(b)).map((c) => c.tags),
        [['b']],
      );
      assert.deepEqual(await contactsOf(a), []);
    });
  });
});
