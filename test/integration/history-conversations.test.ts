import { relayProtocol } from '../../src/actors/relay/protocol.ts';
import { actorClient } from '../../src/runtime/actor.ts';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { StandInRelay } from '../support/stand-in-relay.ts';
import { waitFor } from './runtime-contract.ts';

eachBackend((backend) => {
  describe(`history, conversations and attachments (${backend})`, () => {
    let t: TestApp;
    const relays: StandInRelay[] = [];

    before(async () => {
      t = await startTestApp(backend);
    });
    after(async () => {
      for (const r of relays) r.close();
      await t.stop();
    });

    const send = (org: Org, body: Record<string, unknown>) =>
      t.request('POST', '/api/v1/messages', { token: org.ownerToken, body });
    /** A received message, as the gateway reports one. */
    const receive = async (org: Org, relay: StandInRelay, from: string, body: string, rowId: number) => {
      await actorClient(t.app.runtime, relayProtocol).send(relay.id, {
        kind: 'inbound',
        tenantId: org.orgId,
        session: relay.session,
        rowId,
        guid: `GUID-${org.orgId}-${rowId}`,
        from,
        isGroup: false,
        body,
        receivedAt: new Date().toISOString(),
      });
    };
    const connectedRelay = async (org: Org) => {
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 0 });
      relays.push(relay);
      await relay.connect();
      return relay;
    };

    test('GET /messages filters by direction and participant, newest first, paginated', async () => {
      const org = await signup(t);
      const relay = await connectedRelay(org);
      for (let i = 0; i < 3; i++) await send(org, { to: '+14155550101', body: `to one ${i}` });
      await send(org, { to: 'Two@Example.com', body: 'to two' });
      await receive(org, relay, '+14155550101', 'from one', 1);
      await waitFor(
        async () =>
          (await t.request('GET', '/api/v1/messages?direction=received', { token: org.ownerToken })).body.data
            .length === 1,
        5_000,
        'received',
      );
      const all = await t.request('GET', '/api/v1/messages?limit=2', { token: org.ownerToken });
      assert.equal(all.body.pagination.total, 5);
      assert.equal(all.body.pagination.totalPages, 3);
      assert.equal(all.body.data.length, 2);
      const sent = await t.request('GET', '/api/v1/messages?direction=sent', { token: org.ownerToken });
      assert.equal(sent.body.pagination.total, 4);
      assert.ok(sent.body.data.every((m: { direction: string }) => m.direction === 'sent'));
      const one = await t.request('GET', `/api/v1/messages?participant=${encodeURIComponent('+14155550101')}`, {
        token: org.ownerToken,
      });
      assert.equal(one.body.pagination.total, 4, 'three sent and one received');
      const two = await t.request('GET', '/api/v1/messages?participant=two%40example.com', { token: org.ownerToken });
      assert.deepEqual(
        two.body.data.map((m: { body: string }) => m.body),
        ['to two'],
        'emails match case-insensitively',
      );
      const times = all.body.data.map((m: { createdAt: string }) => m.createdAt);
      assert.deepEqual([...times].sort().reverse(), times, 'newest first');
      assert.equal(
        (await t.request('GET', '/api/v1/messages?direction=sideways', { token: org.ownerToken })).status,
        400,
      );
      assert.equal((await t.request('GET', '/api/v1/messages?limit=101', { token: org.ownerToken })).status, 400);
    });

    test('GET /messages filters by status, bulk job and creation time; a range that ends before it starts is a 400', async () => {
      const org = await signup(t);
      const list = async (query: string) => {
        const res = await t.request('GET', `/api/v1/messages?limit=100&${query}`, { token: org.ownerToken });
        assert.equal(res.status, 200, res.text);
        return res.body.data as Array<{ id: string; status: string; createdAt: string }>;
      };
      const early = (await send(org, { to: '+14155550111', body: 'early' })).body.id as string;
      await sleep(20);
      const cut = new Date().toISOString();
      await sleep(20);
      const late = (await send(org, { to: '+14155550112', body: 'late' })).body.id as string;
      const job = await t.request('POST', '/api/v1/messages/bulk', {
        token: org.ownerToken,
        body: {
          messages: [
            { to: '+14155550113', body: 'j1' },
            { to: '+14155550114', body: 'j2' },
          ],
        },
      });
      assert.equal(job.status, 201, job.text);
      const ids = (rows: Array<{ id: string }>) => rows.map((m) => m.id);

      assert.deepEqual(ids(await list(`until=${encodeURIComponent(cut)}`)), [early]);
      const since = await list(`since=${encodeURIComponent(cut)}`);
      assert.equal(since.length, 3);
      assert.ok(ids(since).includes(late) && !ids(since).includes(early));
      const inJob = await list(`jobId=${job.body.jobId}`);
      assert.equal(inJob.length, 2);
      const status = await t.request('GET', `/api/v1/messages/${inJob[0]!.id}/status`, { token: org.ownerToken });
      assert.equal(status.body.jobId, job.body.jobId);
      assert.deepEqual(await list('jobId=job_none'), []);

      // One message handed to a relay and delivered; the rest wait.
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 1 });
      relays.push(relay);
      await relay.connect();
      await waitFor(() => relay.sends.length === 1, 5_000, 'one handed to the relay');
      const handed = relay.sends[0]!.messageId;
      await relay.report(handed, 'delivered');
      await waitFor(async () => ids(await list('status=delivered')).length === 1, 5_000, 'delivered');
      assert.deepEqual(ids(await list('status=delivered')), [handed]);
      const queued = await list('status=queued');
      assert.ok(queued.every((m) => m.status === 'queued') && !ids(queued).includes(handed));
      assert.deepEqual(await list(`status=failed&since=${encodeURIComponent(cut)}`), []);

      const backwards = await t.request(
        'GET',
        `/api/v1/messages?since=${encodeURIComponent(cut)}&until=${encodeURIComponent(new Date(Date.parse(cut) - 1000).toISOString())}`,
        { token: org.ownerToken },
      );
      assert.equal(backwards.status, 400);
      assert.equal(backwards.body.details[0].path, '/until');
      assert.equal((await t.request('GET', '/api/v1/messages?since=yesterday', { token: org.ownerToken })).status, 400);
      assert.equal((await t.request('GET', '/api/v1/messages?status=lost', { token: org.ownerToken })).status, 400);
    });

    test('conversations: most recent activity first, unread counts, names from contacts, search, lookup 404', async () => {
      const org = await signup(t);
      const relay = await connectedRelay(org);
      await t.request('POST', '/api/v1/contacts', {
        token: org.ownerToken,
        body: { firstName: 'Ada', lastName: 'Lovelace', phoneNumbers: ['+14155550201'] },
      });
      await send(org, { to: '+14155550201', body: 'hello Ada' });
      await sleep(5);
      await send(org, { to: '+14155550202', body: 'hello Bob' });
      await sleep(5);
      await receive(org, relay, '+14155550201', 'hi back', 10);
      await sleep(5);
      await receive(org, relay, '+14155550201', 'are you there?', 11);
      await waitFor(
        async () =>
          (await t.request('GET', '/api/v1/conversations', { token: org.ownerToken })).body.data[0]?.unreadCount === 2,
        5_000,
        'unread counted',
      );
      const list = (await t.request('GET', '/api/v1/conversations', { token: org.ownerToken })).body;
      assert.deepEqual(
        list.data.map((c: { participant: string }) => c.participant),
        ['+14155550201', '+14155550202'],
        'most recent activity first',
      );
      const ada = list.data[0];
      assert.equal(ada.participantName, 'Ada Lovelace');
      assert.equal(ada.lastMessage, 'are you there?');
      assert.equal(ada.isGroup, false);
      assert.equal(list.data[1].participantName, null);
      assert.equal(list.data[1].unreadCount, 0, 'sent messages are never unread');
      const searched = await t.request('GET', '/api/v1/conversations?search=lovelace', { token: org.ownerToken });
      assert.deepEqual(
        searched.body.data.map((c: { id: string }) => c.id),
        [ada.id],
        'search matches the contact name',
      );
      const byPhone = await t.request('GET', '/api/v1/conversations?search=550202', { token: org.ownerToken });
      assert.equal(byPhone.body.data.length, 1);
      const literal = await t.request('GET', '/api/v1/conversations?search=.*', { token: org.ownerToken });
      assert.equal(literal.body.data.length, 0, 'search is literal');
      const opened = await t.request('GET', `/api/v1/conversations/${ada.id}?limit=2`, { token: org.ownerToken });
      assert.equal(opened.status, 200);
      assert.deepEqual(
        opened.body.messages.map((m: { body: string }) => m.body),
        ['are you there?', 'hi back'],
      );
      assert.equal(opened.body.pagination.total, 3);
      assert.equal(
        (
          await t.request('GET', `/api/v1/conversations/lookup?participant=${encodeURIComponent('+14155550201')}`, {
            token: org.ownerToken,
          })
        ).body.unreadCount,
        0,
        'reading it marks it read',
      );
      const missing = await t.request('GET', '/api/v1/conversations/lookup?participant=%2B14155559999', {
        token: org.ownerToken,
      });
      assert.equal(missing.status, 404);
      assert.equal(missing.body.error, 'not_found');
      assert.equal(
        (await t.request('GET', '/api/v1/conversations/lookup', { token: org.ownerToken })).status,
        400,
        'participant is required',
      );
      await send(org, { to: 'Carol@Example.com', body: 'hello Carol' });
      const email = await t.request('GET', '/api/v1/conversations/lookup?participant=carol%40EXAMPLE.com', {
        token: org.ownerToken,
      });
      assert.equal(email.status, 200, 'emails are normalized');
    });

    test('a send to group:<id> goes to each member; its status sums up theirs', async () => {
      const org = await signup(t);
      const contact = async (firstName: string, body: Record<string, unknown>) =>
        (await t.request('POST', '/api/v1/contacts', { token: org.ownerToken, body: { firstName, ...body } })).body.id;
      const group = (
        await t.request('POST', '/api/v1/contact-groups', { token: org.ownerToken, body: { name: 'VIP' } })
      ).body.id;
      for (const id of [
        await contact('A', { phoneNumbers: ['+14155550301'] }),
        await contact('B', { emailAddresses: ['b@example.com'] }),
        await contact('C', {}),
      ]) {
        await t.request('POST', `/api/v1/contact-groups/${group}/members`, {
          token: org.ownerToken,
          body: { contactId: id },
        });
      }
      const res = await send(org, { to: `group:${group}`, body: 'news for VIPs' });
      assert.equal(res.status, 201);
      assert.equal(res.body.status, 'queued');
      assert.equal(res.body.messageIds.length, 2, 'the member with no address is skipped');
      const relay = new StandInRelay(t, org.orgId, org.teamId, { capacity: 5 });
      relays.push(relay);
      await relay.connect();
      await waitFor(() => relay.sends.length === 2, 5_000, 'both members');
      assert.deepEqual(relay.sends.map((s) => s.to).sort(), ['+14155550301', 'b@example.com']);
      for (const s of relay.sends) await relay.report(s.messageId, 'delivered');
      await waitFor(
        async () =>
          (await t.request('GET', `/api/v1/messages/${res.body.id}/status`, { token: org.ownerToken })).body.status ===
          'delivered',
        5_000,
        'group delivered',
      );
      const empty = (
        await t.request('POST', '/api/v1/contact-groups', { token: org.ownerToken, body: { name: 'Empty' } })
      ).body.id;
      const none = await send(org, { to: `group:${empty}`, body: 'nobody' });
      assert.equal(none.status, 400);
      assert.equal(none.body.details[0].path, '/to');
    });

    test('attachments: signed download links that expire and cannot be forged', async () => {
      const org = await signup(t);
      const urls = ['https://cdn.example.com/a/photo.jpg', 'https://cdn.example.com/b/terms.pdf'];
      const id = (await send(org, { to: '+14155550100', attachments: urls })).body.id;
      const res = await t.request('GET', `/api/v1/messages/${id}/attachments`, { token: org.ownerToken });
      assert.equal(res.status, 200);
      const [photo, terms] = res.body.data;
      assert.deepEqual(
        [photo.filename, photo.mimeType, terms.filename, terms.mimeType],
        ['photo.jpg', 'image/jpeg', 'terms.pdf', 'application/pdf'],
      );
      const lifetime = Date.parse(photo.expiresAt) - Date.now();
      assert.ok(lifetime > 59 * 60_000 && lifetime <= 3600_000, 'valid one hour');
      const download = await fetch(photo.url, { redirect: 'manual' });
      assert.equal(download.status, 302);
      assert.equal(download.headers.get('location'), urls[0]);
      const forged = photo.url.replace(/\.([^.]+)$/, (_: string, mac: string) => `.${mac.slice(0, -2)}AA`);
      // A link not genuine or expired is 403 `forbidden` (list the attachments again for a new one): docs/attachments.md.
      assert.equal((await fetch(forged, { redirect: 'manual' })).status, 403);
      const [payload, mac] = photo.url.split('/attachments/')[1].split('.');
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
      const altered = Buffer.from(JSON.stringify({ ...claims, i: 1 })).toString('base64url');
      assert.equal(
        (await fetch(`${t.base}/api/v1/attachments/${altered}.${mac}`, { redirect: 'manual' })).status,
        403,
        'the claims are signed',
      );
    });
  });
});
