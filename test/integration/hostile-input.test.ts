import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { httpRequest, rawExchange } from '../support/raw-http.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

eachBackend((backend) => {
  describe(`hostile input is a 400, the same on every backend (${backend})`, () => {
    let app: TestApp;
    let org: Org;
    before(async () => {
      app = await startTestApp(backend);
      org = await signup(app);
    });
    after(() => app.stop());

    let numbersMade = 0;
    /** A number of its own in the organization (555-0100 to 555-0199 are valid fictional numbers). */
    async function phoneNumber(): Promise<string> {
      const res = await app.request('POST', '/api/v1/phone-numbers', { token: org.ownerToken, body: { number: `+1415555${String(100 + numbersMade++).padStart(4, '0')}` } });
      assert.equal(res.status, 201, res.text);
      return res.body.id;
    }

    test('metadata keys outside the safe set, too long or too many are 400 naming metadata; nothing is stored', async () => {
      const id = await phoneNumber();
      const refused: [string, string][] = [
        ['a dot', '{"metadata":{"a.b":"x"}}'],
        ['an operator', '{"metadata":{"$gt":"x"}}'],
        ['a space', '{"metadata":{"a b":"x"}}'],
        ['empty', '{"metadata":{"":"x"}}'],
        ['101 characters', JSON.stringify({ metadata: { ['k'.repeat(101)]: 'x' } })],
        ['100,000 characters', JSON.stringify({ metadata: { ['k'.repeat(100_000)]: 'x' } })],
        ['__proto__', '{"metadata":{"__proto__":"x"}}'],
        ['constructor', '{"metadata":{"constructor":"x"}}'],
        ['prototype', '{"metadata":{"prototype":"x"}}'],
        ['non-ASCII', '{"metadata":{"caf\u00e9":"x"}}'],
        ['51 keys', JSON.stringify({ metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) })],
      ];
      for (const [what, body] of refused) {
        const res = await app.request('PUT', `/api/v1/phone-numbers/${id}`, { token: org.ownerToken, body });
        assert.equal(res.status, 400, `${what}: ${res.text.slice(0, 200)}`);
        assert.equal(res.body.error, 'validation_error', what);
        assert.match(res.body.details[0].path, /^\/metadata/, what);
      }
      const listed = await app.request('GET', '/api/v1/phone-numbers', { token: org.ownerToken });
      assert.deepEqual(listed.body.data.find((n: { id: string }) => n.id === id).metadata, {});
    });

    test('keys of letters, digits, "_" and "-" up to 100 characters, up to 50 of them, are stored and read back as sent', async () => {
      const id = await phoneNumber();
      const metadata = { plan: 'pro', tier_2: 'b', 'crm-id': '42', ['k'.repeat(100)]: 'long', ...Object.fromEntries(Array.from({ length: 46 }, (_, i) => [`f${i}`, String(i)])) };
      const res = await app.request('PUT', `/api/v1/phone-numbers/${id}`, { token: org.ownerToken, body: { metadata } });
      assert.equal(res.status, 200, res.text.slice(0, 300));
      assert.deepEqual(res.body.metadata, metadata);
      const listed = await app.request('GET', '/api/v1/phone-numbers', { token: org.ownerToken });
      assert.deepEqual(listed.body.data.find((n: { id: string }) => n.id === id).metadata, metadata);
    });

    test('an X-Team-Id that is not exactly a team id is 400, never the default team', async () => {
      const me = (value: string | Buffer) => rawExchange(app.base, Buffer.concat([
        Buffer.from(httpRequest('GET', '/api/v1/me', [['Host', 'relaybox.test'], ['Authorization', `Bearer ${org.ownerToken}`]]).slice(0, -2)),
        Buffer.from('X-Team-Id: '), Buffer.isBuffer(value) ? value : Buffer.from(value), Buffer.from('\r\n\r\n'),
      ]), 2_000);
      const half = org.teamId.length >> 1;
      const refused: [string, string | Buffer][] = [
        ['empty', ''],
        ['only a non-ASCII character (UTF-8)', Buffer.from('\u00e9')],
        ['only a non-ASCII byte (Latin-1)', Buffer.from([0xe9])],
        ['a non-ASCII character inside the id', Buffer.from(`${org.teamId.slice(0, half)}\u00e9${org.teamId.slice(half)}`)],
        ['a space inside', `${org.teamId.slice(0, half)} ${org.teamId.slice(half)}`],
        ['another kind of id', org.orgId],
        ['a truncated id', org.teamId.slice(0, -1)],
        ['an id with a character more', `${org.teamId}A`],
        ['garbage', 'default'],
      ];
      for (const [what, value] of refused) {
        const res = await me(value);
        assert.deepEqual(res.statuses, [400], `${what}: ${res.text.slice(0, 300)}`);
        assert.match(res.text, /"error":"bad_request"/, what);
      }
      assert.deepEqual((await me(org.teamId)).statuses, [200], 'the exact id picks the team');
      assert.deepEqual((await me(`team_${'A'.repeat(22)}`)).statuses, [404], 'a well-formed id of no team of the caller is 404');
      const none = await app.request('GET', '/api/v1/me', { token: org.ownerToken });
      assert.equal(none.status, 200, 'no header: the default team');
    });
  });
});
