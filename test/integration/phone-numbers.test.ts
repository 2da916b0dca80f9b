import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eachBackend, signup, startTestApp, teamHeader, type Org, type TestApp } from '../support/test-app.ts';

/** Numbers that look like E.164 but do not exist, and the same real number typed three ways. */
const nonexistent = ['+19999999999', '+12345678'];
const typed = ['+1 415 555 0100', '+1 (415) 555-0100', '+14155550100'];
const e164 = '+14155550100';

eachBackend((backend) => {
  describe(`phone numbers: one rule wherever a number is read (${backend})`, () => {
    let t: TestApp;
    let org: Org;

    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Phone Org');
    });
    after(() => t.stop());

    const call = async (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
      t.request(method, path, { token: org.ownerToken, body, headers });
    const refusedAt = (res: { status: number; body: any; text: string }, path: string) => {
      assert.equal(res.status, 400, res.text);
      assert.equal(res.body.error, 'validation_error');
      assert.ok(
        res.body.details.some(
          (d: { path: string; message: string }) => d.path === path && /valid phone number/.test(d.message),
        ),
        `${path} named: ${res.text}`,
      );
    };

    test('registered phone numbers: nonexistent numbers refused, formatted ones stored as E.164', async () => {
      for (const number of nonexistent) refusedAt(await call('POST', '/api/v1/phone-numbers', { number }), '/number');
      const created = await call('POST', '/api/v1/phone-numbers', { number: '+1 (415) 555-0100', label: 'main' });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.body.number, e164);
      const again = await call('POST', '/api/v1/phone-numbers', { number: '+1 415 555 0100' });
      assert.ok(again.status === 201 || again.status === 409, again.text);
      const list = await call('GET', '/api/v1/phone-numbers');
      assert.deepEqual(
        list.body.data.map((n: { number: string }) => n.number),
        [e164],
        'the same number twice is one number',
      );
    });

    test('messages: to and fromNumber follow the rule; the stored message and its conversation use E.164', async () => {
      const team = await teamHeader(t, org);
      for (const to of nonexistent) refusedAt(await call('POST', '/api/v1/messages', { to, body: 'hi' }, team), '/to');
      refusedAt(
        await call('POST', '/api/v1/messages', { to: e164, body: 'hi', fromNumber: '+19999999999' }, team),
        '/fromNumber',
      );
      const ids: string[] = [];
      for (const to of typed) {
        const sent = await call(
          'POST',
          '/api/v1/messages',
          { to, body: `to ${to}`, fromNumber: '+1 415 555 0100' },
          team,
        );
        assert.equal(sent.status, 201, sent.text);
        assert.equal(sent.body.to, e164);
        assert.equal(sent.body.fromNumber, e164);
        ids.push(sent.body.conversationId);
      }
      assert.equal(new Set(ids).size, 1, 'one conversation whatever the formatting');
      for (const participant of typed) {
        const found = await call(
          'GET',
          `/api/v1/conversations/lookup?participant=${encodeURIComponent(participant)}`,
          undefined,
          team,
        );
        assert.equal(found.status, 200, found.text);
        assert.equal(found.body.participant, e164);
        const history = await call(
          'GET',
          `/api/v1/messages?participant=${encodeURIComponent(participant)}`,
          undefined,
          team,
        );
        assert.equal(history.body.pagination.total, 3, `history filtered by ${participant}`);
      }
      refusedAt(
        await call(
          'GET',
          `/api/v1/conversations/lookup?participant=${encodeURIComponent('+19999999999')}`,
          undefined,
          team,
        ),
        '/participant',
      );
      refusedAt(
        await call('GET', `/api/v1/messages?participant=${encodeURIComponent('+12345678')}`, undefined, team),
        '/participant',
      );
    });

    test('contacts: every bad number is listed; formatted numbers are stored as E.164, once', async () => {
      const team = await teamHeader(t, org);
      const bad = await call(
        'POST',
        '/api/v1/contacts',
        { firstName: 'Bad', phoneNumbers: [e164, ...nonexistent] },
        team,
      );
      refusedAt(bad, '/phoneNumbers/1');
      refusedAt(bad, '/phoneNumbers/2');
      const created = await call('POST', '/api/v1/contacts', { firstName: 'Ada', phoneNumbers: typed }, team);
      assert.equal(created.status, 201, created.text);
      assert.deepEqual(created.body.phoneNumbers, [e164]);
      const updated = await call(
        'PUT',
        `/api/v1/contacts/${created.body.id}`,
        { phoneNumbers: ['+44 20 7123 4567', '+1 (415) 555-0100'] },
        team,
      );
      assert.deepEqual(updated.body.phoneNumbers, ['+442071234567', e164]);
      refusedAt(
        await call('PUT', `/api/v1/contacts/${created.body.id}`, { phoneNumbers: ['+19999999999'] }, team),
        '/phoneNumbers/0',
      );
    });

    test('contact import: a formatted number is stored as E.164, a nonexistent one fails its row', async () => {
      const team = await teamHeader(t, org);
      const csv =
        [
          'firstName,phoneNumbers',
          'Grace,+1 (415) 555-0100',
          'Nobody,+19999999999',
          'Short,+12345678',
          'Two,+1 415 555 0100;+44 20 7123 4567',
        ].join('\r\n') + '\r\n';
      const form = new FormData();
      form.append('file', new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
      const res = await fetch(`${t.base}/api/v1/contacts/import`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.ownerToken}`, ...team },
        body: form,
      });
      const body = (await res.json()) as {
        created: number;
        updated: number;
        failed: number;
        errors: Array<{ row: number; error: string }>;
      };
      assert.equal(res.status, 200);
      assert.deepEqual(
        body.errors.map((e) => e.row),
        [2, 3],
      );
      assert.ok(
        body.errors.every((e) => /valid phone number/.test(e.error)),
        JSON.stringify(body.errors),
      );
      // Grace and Two share +14155550100: the second row updates the contact the first created.
      assert.equal(body.created + body.updated, 2);
      const list = await call('GET', '/api/v1/contacts?limit=100', undefined, team);
      const numbers = list.body.data.flatMap((c: { phoneNumbers: string[] }) => c.phoneNumbers).sort();
      assert.deepEqual([...new Set(numbers)], ['+14155550100', '+442071234567']);
    });
  });
});
