import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { httpRequest, rawExchange } from '../support/raw-http.ts';
import { eachBackend, signup, startTestApp, teamHeader, type Org, type TestApp } from '../support/test-app.ts';

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
      const res = await app.request('POST', '/api/v1/phone-numbers', {
        token: org.ownerToken,
        body: { number: `+1415555${String(100 + numbersMade++).padStart(4, '0')}` },
      });
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
        [
          '51 keys',
          JSON.stringify({ metadata: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v'])) }),
        ],
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
      const metadata = {
        plan: 'pro',
        tier_2: 'b',
        'crm-id': '42',
        ['k'.repeat(100)]: 'long',
        ...Object.fromEntries(Array.from({ length: 46 }, (_, i) => [`f${i}`, String(i)])),
      };
      const res = await app.request('PUT', `/api/v1/phone-numbers/${id}`, {
        token: org.ownerToken,
        body: { metadata },
      });
      assert.equal(res.status, 200, res.text.slice(0, 300));
      assert.deepEqual(res.body.metadata, metadata);
      const listed = await app.request('GET', '/api/v1/phone-numbers', { token: org.ownerToken });
      assert.deepEqual(listed.body.data.find((n: { id: string }) => n.id === id).metadata, metadata);
    });

    /** A contact import of one file into a team, as the dashboard uploads it: its status and the answer's text. */
    async function uploadContacts(
      team: Record<string, string>,
      name: string,
      content: string,
    ): Promise<{ status: number; text: string }> {
      const form = new FormData();
      form.append('file', new Blob([content]), name);
      const res = await fetch(`${app.base}/api/v1/contacts/import`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.ownerToken}`, ...team },
        body: form,
      });
      return { status: res.status, text: await res.text() };
    }

    /** The text rule's 400: a validation_error whose details name `path`. */
    const assertTextRefused = (res: { status: number; text: string; body: any }, path: string, what: string) => {
      assert.equal(res.status, 400, `${what}: ${res.text.slice(0, 300)}`);
      assert.equal(res.body.error, 'validation_error', what);
      assert.ok(
        res.body.details.some(
          (d: { path: string; message: string }) =>
            d.path === path && /NUL \(U\+0000\) or an unpaired surrogate/.test(d.message),
        ),
        `${what}: ${res.text.slice(0, 300)}`,
      );
    };

    test('NUL or an unpaired surrogate in a body, a bulk row, a path id or a query value is a 400 naming the field; nothing is stored', async () => {
      const team = await teamHeader(app, org);
      const send = (text: string) => `{"to":"+14155550100","body":"${text}"}`;
      const refused: [string, string, string, string | undefined, string][] = [
        ['NUL in a message', 'POST', '/api/v1/messages', send('a\\u0000b'), '/body'],
        ['a lone high surrogate in a message', 'POST', '/api/v1/messages', send('a\\ud800b'), '/body'],
        ['a lone low surrogate at the end of a message', 'POST', '/api/v1/messages', send('ab\\udc00'), '/body'],
        ['a surrogate pair in the wrong order', 'POST', '/api/v1/messages', send('\\ude00\\ud83d'), '/body'],
        [
          'NUL in a bulk row',
          'POST',
          '/api/v1/messages/bulk',
          `{"messages":[${send('fine')},${send('a\\u0000b')}]}`,
          '/messages/1/body',
        ],
        ['a lone surrogate in a contact name', 'POST', '/api/v1/contacts', '{"firstName":"Ada\\ud800"}', '/firstName'],
        ['NUL in a path id', 'GET', '/api/v1/messages/msg_a%00b/status', undefined, '/id'],
        ['NUL in a query value', 'GET', '/api/v1/contacts?search=a%00b', undefined, '/search'],
      ];
      for (const [what, method, path, body, field] of refused) {
        assertTextRefused(await app.request(method, path, { token: org.ownerToken, headers: team, body }), field, what);
      }
      for (const list of ['/api/v1/messages', '/api/v1/messages/bulk', '/api/v1/contacts']) {
        const res = await app.request('GET', list, { token: org.ownerToken, headers: team });
        assert.deepEqual(res.body.data, [], list);
      }
    });

    test('a surrogate pair (an emoji) is text: stored and read back as sent', async () => {
      const team = await teamHeader(app, org);
      const sent = await app.request('POST', '/api/v1/messages', {
        token: org.ownerToken,
        headers: team,
        body: '{"to":"+14155550100","body":"a\\ud83d\\ude00b"}',
      });
      assert.equal(sent.status, 201, sent.text.slice(0, 300));
      const listed = await app.request('GET', '/api/v1/messages', { token: org.ownerToken, headers: team });
      assert.equal(listed.body.data[0].body, 'a\u{1F600}b');
    });

    test('a contact import row with NUL or an unpaired surrogate fails naming the field; the other rows are imported', async () => {
      const team = await teamHeader(app, org);
      const importFile = async (name: string, content: string) => {
        const { status, text } = await uploadContacts(team, name, content);
        assert.equal(status, 200, `${name}: ${text.slice(0, 300)}`);
        return JSON.parse(text);
      };
      const csv = await importFile('contacts.csv', 'firstName,notes\r\nAda,fine\r\nGrace,a\u0000b\r\n');
      assert.deepEqual([csv.created, csv.failed], [1, 1], JSON.stringify(csv));
      assert.equal(csv.errors[0].row, 2);
      assert.match(csv.errors[0].error, /^\/notes: must not contain NUL/);
      const json = await importFile('contacts.json', '[{"firstName":"Alan"},{"firstName":"Kat\\udfffe"}]');
      assert.deepEqual([json.created, json.failed], [1, 1], JSON.stringify(json));
      assert.match(json.errors[0].error, /^\/firstName: must not contain NUL/);
      const listed = await app.request('GET', '/api/v1/contacts', { token: org.ownerToken, headers: team });
      assert.deepEqual(listed.body.data.map((c: { firstName: string }) => c.firstName).sort(), ['Ada', 'Alan']);
    });

    test('a body or an imported JSON file nested 100,000 levels deep is a 400 naming the limit, on every route that reads JSON', async () => {
      const team = await teamHeader(app, org);
      const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
      const bodyRoutes = app.app.routes.filter((r) => r.schema?.body && r.path.startsWith('/api/v1/'));
      assert.ok(bodyRoutes.length >= 20, `the routes that read a JSON body are found (${bodyRoutes.length})`);
      for (const route of bodyRoutes) {
        const path = route.path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => `x_${name}`);
        for (const body of [deep, `{"a":${deep}}`]) {
          const res = await app.request(route.method, path, { token: org.ownerToken, headers: team, body });
          const what = `${route.method} ${route.path}`;
          assert.ok(res.status < 500, `${what}: ${res.status} ${res.text.slice(0, 200)}`);
          if (res.status !== 400) continue; // a route limited per address may answer 429 first
          assert.equal(res.body.error, 'validation_error', what);
          assert.ok(
            res.body.details.some((d: { message: string }) => d.message === 'is JSON nested deeper than 64 levels'),
            `${what}: ${res.text.slice(0, 300)}`,
          );
        }
      }
      const imported = await uploadContacts(team, 'contacts.json', deep);
      assert.equal(imported.status, 400, imported.text.slice(0, 300));
      const problem = JSON.parse(imported.text);
      assert.equal(problem.error, 'validation_error');
      assert.deepEqual(problem.details, [{ path: '/file', message: 'JSON nested deeper than 64 levels' }]);
      const rows = `[${Array.from({ length: 3 }, (_, i) => `{"firstName":"Deep${i}","x":${'['.repeat(70)}${']'.repeat(70)}}`).join(',')}]`;
      assert.equal(
        (await uploadContacts(team, 'contacts.json', rows)).status,
        400,
        'a row nested deeper than the limit refuses the file before any row is imported',
      );
      const listed = await app.request('GET', '/api/v1/contacts?search=Deep', { token: org.ownerToken, headers: team });
      assert.deepEqual(listed.body.data, []);
    });

    test('an X-Team-Id that is not exactly a team id is 400, never the default team', async () => {
      const me = (value: string | Buffer) =>
        rawExchange(
          app.base,
          Buffer.concat([
            Buffer.from(
              httpRequest('GET', '/api/v1/me', [
                ['Host', 'relaybox.test'],
                ['Authorization', `Bearer ${org.ownerToken}`],
              ]).slice(0, -2),
            ),
            Buffer.from('X-Team-Id: '),
            Buffer.isBuffer(value) ? value : Buffer.from(value),
            Buffer.from('\r\n\r\n'),
          ]),
          2_000,
        );
      const half = org.teamId.length >> 1;
      const refused: [string, string | Buffer][] = [
        ['empty', ''],
        ['only a non-ASCII character (UTF-8)', Buffer.from('\u00e9')],
        ['only a non-ASCII byte (Latin-1)', Buffer.from([0xe9])],
        [
          'a non-ASCII character inside the id',
          Buffer.from(`${org.teamId.slice(0, half)}\u00e9${org.teamId.slice(half)}`),
        ],
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
      assert.deepEqual(
        (await me(`team_${'A'.repeat(22)}`)).statuses,
        [404],
        'a well-formed id of no team of the caller is 404',
      );
      const none = await app.request('GET', '/api/v1/me', { token: org.ownerToken });
      assert.equal(none.status, 200, 'no header: the default team');
    });
  });
});
