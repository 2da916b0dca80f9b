import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { newOrderedId } from '../../src/ids.ts';
import type { ExecutionDoc } from '../../src/automations/automation-store.ts';
import type { MessageDoc } from '../../src/messages/message-store.ts';
import type { DeliveryDoc } from '../../src/webhooks/webhook-store.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

/** The six long lists, as the API description names them: each takes `after` and answers `nextCursor` and `Link`. */
const keysetLists = [
  '/api/v1/messages',
  '/api/v1/conversations',
  '/api/v1/contacts',
  '/api/v1/messages/bulk/{jobId}/results',
  '/api/v1/webhooks/{id}/deliveries',
  '/api/v1/automations/{id}/executions',
];

/** The Link a page of `path` must carry to the page after `cursor`: the same query but `page`, and `after`. */
function nextLink(path: string, cursor: string): string {
  const url = new URL(path, 'http://list');
  url.searchParams.delete('page');
  url.searchParams.delete('after');
  url.searchParams.append('after', cursor);
  return `<${url.pathname}${url.search}>; rel="next"`;
}

const time = (ms: number) => new Date(Date.parse('2026-03-01T00:00:00.000Z') + ms).toISOString();

eachBackend((backend) => {
  describe(`keyset cursors on the long lists (${backend})`, () => {
    let t: TestApp;
    before(async () => {
      t = await startTestApp(backend);
    });
    after(() => t.stop());

    const get = (org: Org, path: string) => t.request('GET', path, { token: org.ownerToken });
    const send = async (org: Org, to: string, body = 'hello') => {
      const res = await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: { to, body } });
      assert.equal(res.status, 201, res.text);
      return res.body.id as string;
    };

    /**
     * Every page of a list from `path` (its first page, asked for without
     * `after`), following each page's Link and checking it and `nextCursor`;
     * `between` runs before each next page is read.
     */
    async function walk(org: Org, path: string, between?: () => Promise<void>) {
      const items: any[] = [];
      const cursors: string[] = [];
      for (let url = path; ;) {
        const res = await get(org, url);
        assert.equal(res.status, 200, res.text);
        items.push(...res.body.data);
        if (url === path)
          assert.equal(typeof res.body.pagination?.total, 'number', 'the first page, by offset, counts');
        else
          assert.deepEqual(
            res.body.pagination,
            {
              page: null,
              limit: Number(new URL(url, 'http://x').searchParams.get('limit') ?? 20),
              total: null,
              totalPages: null,
            },
            'a page read by cursor has the same shape as the first, and counts nothing',
          );
        if (res.body.nextCursor === null) {
          assert.equal(res.headers.get('link'), null, 'no Link on the last page');
          return { items, cursors };
        }
        assert.ok(res.body.data.length > 0, 'a page with a next one is not empty');
        assert.equal(res.headers.get('link'), nextLink(path, res.body.nextCursor));
        cursors.push(res.body.nextCursor);
        await between?.();
        url = res.headers.get('link')!.slice(1, res.headers.get('link')!.indexOf('>'));
      }
    }

    test('GET /messages by cursor: each message once, in order, while new ones arrive; ties in createdAt broken by id; filters kept', async () => {
      const org = await signup(t);
      for (let i = 0; i < 16; i++) await send(org, i % 2 === 0 ? '+14155550101' : '+14155550102', `seed ${i}`);
      // A dozen more stored at the very same millisecond as one of them: only the id orders them.
      const store = t.app.store.collection<MessageDoc>('messages');
      const {
        outbox: _o,
        outboxAt: _a,
        ...template
      } = (await store.findOne({ tenantId: org.orgId }, { body: 'seed 5' }))!;
      await store.insertMany(
        { tenantId: org.orgId, teamId: org.teamId },
        Array.from({ length: 12 }, (_, i) => ({
          ...template,
          id: newOrderedId('msg'),
          body: `tied ${i}`,
          status: 'delivered' as const,
        })),
      );

      const listed = (await get(org, '/api/v1/messages?limit=100')).body;
      assert.equal(listed.pagination.total, 28);
      assert.equal(listed.nextCursor, null);
      const order = listed.data.map((m: MessageDoc) => m.id);
      const sorted = [...listed.data].sort((a: MessageDoc, b: MessageDoc) =>
        a.createdAt === b.createdAt ? (a.id < b.id ? 1 : -1) : a.createdAt < b.createdAt ? 1 : -1,
      );
      assert.deepEqual(
        order,
        sorted.map((m: MessageDoc) => m.id),
        'newest first, the greater id first within a millisecond',
      );

      let arrived = 0;
      const { items, cursors } = await walk(org, '/api/v1/messages?limit=5', async () => {
        for (let i = 0; i < 3; i++, arrived++) await send(org, '+14155550101', `arrived ${arrived}`);
      });
      assert.equal(cursors.length, 5, 'pages of 5, 5, 5, 5, 5, 3');
      assert.deepEqual(
        items.map((m) => m.id),
        order,
        'every message that was there once, in order; the ones that arrived are newer, before the cursor',
      );
      assert.ok(arrived >= 15);

      // A filter stays with the cursor (the Link keeps it): one participant's messages (8 sent, 12 stored), each once.
      const one = '+14155550102';
      const expected = (
        await get(org, `/api/v1/messages?participant=${encodeURIComponent(one)}&limit=100`)
      ).body.data.map((m: MessageDoc) => m.id);
      assert.equal(expected.length, 20);
      const filtered = await walk(
        org,
        `/api/v1/messages?${new URLSearchParams({ participant: one, limit: '3' })}`,
        () => send(org, one, 'more').then(() => undefined),
      );
      assert.deepEqual(
        filtered.items.map((m) => m.id),
        expected,
      );
    });

    test('page and limit work as before; a page by offset leads on by cursor', async () => {
      const org = await signup(t);
      for (let i = 0; i < 12; i++) await send(org, '+14155550103', `m ${i}`);
      const all = (await get(org, '/api/v1/messages?limit=100')).body.data.map((m: MessageDoc) => m.id);
      const second = await get(org, '/api/v1/messages?page=2&limit=5');
      assert.equal(second.status, 200);
      assert.deepEqual(second.body.pagination, { page: 2, limit: 5, total: 12, totalPages: 3 });
      assert.deepEqual(
        second.body.data.map((m: MessageDoc) => m.id),
        all.slice(5, 10),
      );
      assert.equal(
        second.headers.get('link'),
        nextLink('/api/v1/messages?limit=5', second.body.nextCursor),
        'page is left out of the Link',
      );
      const third = await get(org, `/api/v1/messages?limit=5&after=${second.body.nextCursor}`);
      assert.deepEqual(
        third.body.data.map((m: MessageDoc) => m.id),
        all.slice(10),
      );
      assert.equal(third.body.nextCursor, null);
      const last = await get(org, '/api/v1/messages?page=3&limit=5');
      assert.deepEqual([last.body.data.length, last.body.nextCursor, last.headers.get('link')], [2, null, null]);
      const exact = await get(org, '/api/v1/messages?page=2&limit=6');
      assert.deepEqual([exact.body.data.length, exact.body.nextCursor], [6, null], 'a full last page has no next one');
      const beyond = await get(org, '/api/v1/messages?page=9&limit=5');
      assert.deepEqual([beyond.body.data, beyond.body.pagination.total, beyond.body.nextCursor], [[], 12, null]);
    });

    test('a malformed, altered or foreign cursor is a 400 validation_error, never a read; so is after with page', async () => {
      const org = await signup(t);
      const other = await signup(t, 'Other');
      for (let i = 0; i < 3; i++) await send(org, '+14155550104', `a ${i}`);
      await send(other, '+14155550104', 'b');
      const cursor = (await get(org, '/api/v1/messages?limit=1')).body.nextCursor as string;
      assert.equal((await get(org, `/api/v1/messages?limit=1&after=${cursor}`)).status, 200);
      const flipped = cursor.slice(0, 30) + (cursor[30] === 'A' ? 'B' : 'A') + cursor.slice(31);
      const refused: Array<[Org, string, string]> = [
        [org, '/api/v1/messages?after=not%20a%20cursor', '/after'],
        [org, `/api/v1/messages?after=${'A'.repeat(40)}`, '/after'],
        [org, `/api/v1/messages?after=${flipped}`, '/after'],
        [org, `/api/v1/messages?after=${cursor}x`, '/after'],
        [org, `/api/v1/messages?after=${'A'.repeat(513)}`, '/after'],
        [other, `/api/v1/messages?after=${cursor}`, '/after'],
        [org, `/api/v1/conversations?after=${cursor}`, '/after'],
        [org, `/api/v1/contacts?after=${cursor}`, '/after'],
        [org, `/api/v1/messages?page=1&after=${cursor}`, '/page'],
        [org, `/api/v1/messages?page=2&after=${cursor}`, '/page'],
      ];
      for (const [who, path, pointer] of refused) {
        const res = await get(who, path);
        assert.equal(res.status, 400, `${path}: ${res.text}`);
        assert.equal(res.body.error, 'validation_error', path);
        assert.equal(res.body.details[0].path, pointer, path);
      }
    });

    /** The other long lists: each seeded with `n` items, read `limit` a page, more arriving between pages. */
    const lists: Array<{
      name: string;
      limit: number;
      seed(org: Org): Promise<{ path: string; arrive(): Promise<void> }>;
      id(item: any): string;
    }> = [
      {
        name: 'conversations, latest activity first',
        limit: 4,
        id: (c) => c.id,
        async seed(org) {
          for (let i = 0; i < 9; i++) await send(org, `+1415555020${i}`);
          let next = 0;
          return {
            path: '/api/v1/conversations?limit=4',
            arrive: async () => void (await send(org, `+1415555${String(300 + next++).padStart(4, '0')}`)),
          };
        },
      },
      {
        name: 'contacts, newest first, with a tag filter',
        limit: 2,
        id: (c) => c.id,
        async seed(org) {
          const create = async (i: number, tags: string[]) => {
            const res = await t.request('POST', '/api/v1/contacts', {
              token: org.ownerToken,
              body: { firstName: `C${i}`, phoneNumbers: [`+1415555${String(400 + i).padStart(4, '0')}`], tags },
            });
            assert.equal(res.status, 201, res.text);
          };
          for (let i = 0; i < 9; i++) await create(i, i % 2 === 0 ? ['VIP'] : []);
          let next = 0;
          return { path: '/api/v1/contacts?tags=vip&limit=2', arrive: () => create(10 + next++, ['vip']) };
        },
      },
      {
        name: 'bulk job results, in request order, with a status filter',
        limit: 3,
        id: (r) => r.messageId,
        async seed(org) {
          const messages = Array.from({ length: 9 }, (_, i) => ({ to: `+1415555050${i}`, body: `bulk ${i}` }));
          const res = await t.request('POST', '/api/v1/messages/bulk', { token: org.ownerToken, body: { messages } });
          assert.equal(res.status, 201, res.text);
          return {
            path: `/api/v1/messages/bulk/${res.body.jobId}/results?status=queued&limit=3`,
            arrive: async () => void (await send(org, '+14155550599')),
          };
        },
      },
      {
        name: 'webhook deliveries, newest first (ties by id, ascending), with a status filter',
        limit: 3,
        id: (d) => d.id,
        async seed(org) {
          const hook = await t.request('POST', '/api/v1/webhooks', {
            token: org.ownerToken,
            body: { url: 'https://93.184.216.34/hook', events: ['message.sent'] },
          });
          assert.equal(hook.status, 201, hook.text);
          const deliveries = t.app.store.collection<DeliveryDoc>('webhook_deliveries');
          const delivery = (i: number, at: string): DeliveryDoc => ({
            id: newOrderedId('whd'),
            tenantId: org.orgId,
            webhookId: hook.body.id,
            event: 'message.sent',
            eventId: `evt_${i}`,
            status: i % 3 === 0 ? 'succeeded' : 'failed',
            attempts: 1,
            responseStatus: 500,
            lastError: null,
            nextAttemptAt: null,
            payload: '{}',
            createdAt: at,
            updatedAt: at,
          });
          // Three at each millisecond.
          await deliveries.insertMany(
            { tenantId: org.orgId },
            Array.from({ length: 12 }, (_, i) => delivery(i, time(Math.floor(i / 3)))),
          );
          let next = 100;
          return {
            path: `/api/v1/webhooks/${hook.body.id}/deliveries?limit=3&status=failed`,
            arrive: () =>
              deliveries.insertOne({ tenantId: org.orgId }, delivery(next++ * 3 + 1, new Date().toISOString())),
          };
        },
      },
      {
        name: 'automation executions, newest first (ties by id, ascending)',
        limit: 3,
        id: (e) => e.id,
        async seed(org) {
          const automation = await t.request('POST', '/api/v1/automations', {
            token: org.ownerToken,
            body: { name: 'n', trigger: 'message_received', actions: [{ type: 'send_reply', config: { body: 'hi' } }] },
          });
          assert.equal(automation.status, 201, automation.text);
          const executions = t.app.store.collection<ExecutionDoc>('automation_executions');
          const execution = (i: number, at: string): ExecutionDoc => ({
            id: newOrderedId('exe'),
            tenantId: org.orgId,
            automationId: automation.body.id,
            messageId: `msg_${i}`,
            trigger: 'message_received',
            matched: true,
            state: 'done',
            actions: [],
            message: {
              id: `msg_${i}`,
              teamId: org.teamId,
              conversationId: 'conv',
              from: '+14155550601',
              to: '+14155550602',
              body: 'x',
              status: 'received',
              participant: '+14155550601',
            },
            createdAt: at,
            updatedAt: at,
          });
          await executions.insertMany(
            { tenantId: org.orgId },
            Array.from({ length: 9 }, (_, i) => execution(i, time(Math.floor(i / 2)))),
          );
          let next = 100;
          return {
            path: `/api/v1/automations/${automation.body.id}/executions?limit=3`,
            arrive: () => executions.insertOne({ tenantId: org.orgId }, execution(next++, new Date().toISOString())),
          };
        },
      },
    ];

    for (const list of lists) {
      test(`${list.name}: each item once, in the offset order, while new ones arrive; foreign and malformed cursors refused`, async () => {
        const org = await signup(t);
        const { path, arrive } = await list.seed(org);
        const everything = new URL(path, 'http://list');
        everything.searchParams.set('limit', '100');
        const listed = (await get(org, everything.pathname + everything.search)).body;
        assert.equal(listed.nextCursor, null);
        assert.ok(listed.data.length > list.limit * 2, `${listed.data.length} items to page through`);
        const { items, cursors } = await walk(org, path, arrive);
        assert.deepEqual(items.map(list.id), listed.data.map(list.id));
        assert.equal(cursors.length, Math.ceil(listed.data.length / list.limit) - 1);

        const cursor = cursors[0]!;
        const other = await signup(t, 'Other');
        const listPath = new URL(path, 'http://list').pathname;
        // Another organization's request is refused for the cursor before anything is read (even the job, webhook or automation in the path).
        const refused: Array<[Org, string]> = [
          [other, `${listPath}?after=${cursor}`],
          [org, `${listPath}?after=${cursor.slice(0, -2)}`],
          [org, `${listPath}?page=1&after=${cursor}`],
          [org, `/api/v1/messages?after=${cursor}`],
        ];
        for (const [who, bad] of refused) {
          const res = await get(who, bad);
          assert.deepEqual([res.status, res.body.error], [400, 'validation_error'], `${bad}: ${res.text}`);
        }
      });
    }

    test('the API description shows after, nextCursor and Link on each long list', async () => {
      const doc = (await t.request('GET', '/api/v1/openapi.json')).body;
      for (const path of keysetLists) {
        const op = doc.paths[path].get;
        // A parameter several operations declare alike is a reference to components.parameters.
        const parameters = op.parameters.map((p: { $ref?: string }) =>
          p.$ref ? doc.components.parameters[p.$ref.split('/').pop()!] : p,
        );
        const after = parameters.find((p: { name: string; in: string }) => p.name === 'after' && p.in === 'query');
        assert.ok(after, `${path}: after`);
        assert.equal(after.schema.type, 'string');
        const ok = op.responses['200'];
        assert.ok(ok.headers.Link, `${path}: Link`);
        const schema = ok.content['application/json'].schema;
        assert.deepEqual(
          schema.properties.nextCursor.anyOf.map((s: { type: string }) => s.type),
          ['string', 'null'],
          path,
        );
        assert.ok(schema.required.includes('nextCursor') && schema.required.includes('pagination'), path);
      }
    });
  });
});
