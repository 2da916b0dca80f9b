import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { apiKey, eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';
import { teamHeader } from '../support/test-app.ts';

eachBackend((backend) => {
  describe(`contacts (${backend})`, () => {
    let t: TestApp;
    let org: Org;

    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Contacts Inc');
    });
    after(() => t.stop());

    const newTeam = () => teamHeader(t, org);
    const create = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
      const res = await t.request('POST', '/api/v1/contacts', { token: org.ownerToken, body, headers });
      assert.equal(res.status, 201, res.text);
      return res.body;
    };
    const list = (query: string, headers: Record<string, string>) =>
      t.request('GET', `/api/v1/contacts?${query}`, { token: org.ownerToken, headers });
    const names = (res: { body: { data: Array<{ firstName: string }> } }) =>
      res.body.data.map((c) => c.firstName).sort();

    test('create answers 201 with the stored contact; GET answers the same', async () => {
      const body = {
        firstName: 'Ada',
        lastName: 'Lovelace',
        phoneNumbers: ['+442071234567', '+4915151234567'],
        emailAddresses: ['ada@example.com'],
        platformId: 'ada@icloud.example',
        organization: 'Analytical Engines',
        jobTitle: 'Programmer',
        tags: ['vip', '/math'],
        notes: 'First of her kind',
      };
      const created = await create(body);
      assert.match(created.id, /^ct_/);
      assert.deepEqual(Object.keys(created).sort(), [...Object.keys(body), 'id', 'createdAt', 'updatedAt'].sort());
      for (const [key, value] of Object.entries(body)) assert.deepEqual(created[key], value, key);
      assert.ok(!Number.isNaN(Date.parse(created.createdAt)));
      assert.equal(created.createdAt, created.updatedAt);
      const got = await t.request('GET', `/api/v1/contacts/${created.id}`, { token: org.ownerToken });
      assert.equal(got.status, 200);
      assert.deepEqual(got.body, created);
      assert.equal(got.body.tenantId, undefined, 'no storage fields leak');
      assert.equal(got.body.emailKeys, undefined);
    });

    test('only firstName is required; lists default to empty and empty text fields stay unset', async () => {
      const created = await create({
        firstName: 'Solo',
        lastName: '',
        phoneNumbers: ['+4915150001111', '+4915150001111'],
      });
      assert.deepEqual(created.phoneNumbers, ['+4915150001111'], 'duplicates dropped');
      assert.deepEqual(created.emailAddresses, []);
      assert.deepEqual(created.tags, []);
      assert.equal('lastName' in created, false);
    });

    test('every field rule is a 400 validation_error naming the field', async () => {
      const long = (n: number) => 'x'.repeat(n);
      const cases: Array<[string, Record<string, unknown>, string]> = [
        ['missing firstName', { lastName: 'X' }, '/firstName'],
        ['empty firstName', { firstName: '' }, '/firstName'],
        ['blank firstName', { firstName: '   ' }, '/firstName'],
        ['firstName too long', { firstName: long(101) }, '/firstName'],
        ['firstName not a string', { firstName: 42 }, '/firstName'],
        ['lastName too long', { firstName: 'A', lastName: long(101) }, '/lastName'],
        ['phone without +', { firstName: 'A', phoneNumbers: ['15551234567'] }, '/phoneNumbers/0'],
        ['phone starting with 0', { firstName: 'A', phoneNumbers: ['+05551234567'] }, '/phoneNumbers/0'],
        ['phone with 7 digits', { firstName: 'A', phoneNumbers: ['+1234567'] }, '/phoneNumbers/0'],
        ['phone with 16 digits', { firstName: 'A', phoneNumbers: ['+1234567890123456'] }, '/phoneNumbers/0'],
        ['phone with spaces', { firstName: 'A', phoneNumbers: ['+1 555 123 4567'] }, '/phoneNumbers/0'],
        ['phoneNumbers not an array', { firstName: 'A', phoneNumbers: '+4915151234567' }, '/phoneNumbers'],
        [
          '21 phone numbers',
          {
            firstName: 'A',
            phoneNumbers: Array.from({ length: 21 }, (_, i) => `+491515000${String(i).padStart(4, '0')}`),
          },
          '/phoneNumbers',
        ],
        ['bad email', { firstName: 'A', emailAddresses: ['not-an-email'] }, '/emailAddresses/0'],
        ['email too long', { firstName: 'A', emailAddresses: [`${long(250)}@example.com`] }, '/emailAddresses/0'],
        [
          '21 emails',
          { firstName: 'A', emailAddresses: Array.from({ length: 21 }, (_, i) => `a${i}@example.com`) },
          '/emailAddresses',
        ],
        ['tag with a comma', { firstName: 'A', tags: ['a,b'] }, '/tags/0'],
        ['tag with a semicolon', { firstName: 'A', tags: ['a;b'] }, '/tags/0'],
        ['tag with surrounding space', { firstName: 'A', tags: [' vip'] }, '/tags/0'],
        ['empty tag', { firstName: 'A', tags: [''] }, '/tags/0'],
        ['tag too long', { firstName: 'A', tags: [long(51)] }, '/tags/0'],
        ['51 tags', { firstName: 'A', tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, '/tags'],
        ['organization too long', { firstName: 'A', organization: long(201) }, '/organization'],
        ['jobTitle too long', { firstName: 'A', jobTitle: long(201) }, '/jobTitle'],
        ['notes too long', { firstName: 'A', notes: long(5001) }, '/notes'],
        ['platformId too long', { firstName: 'A', platformId: long(255) }, '/platformId'],
        ['unknown field', { firstName: 'A', nickname: 'Al' }, '/nickname'],
        ['storage field', { firstName: 'A', tenantId: 'org_other' }, '/tenantId'],
      ];
      for (const [name, body, path] of cases) {
        const res = await t.request('POST', '/api/v1/contacts', { token: org.ownerToken, body });
        assert.equal(res.status, 400, name);
        assert.equal(res.body.error, 'validation_error', name);
        assert.ok(
          res.body.details.some((d: { path: string }) => d.path === path),
          `${name}: ${JSON.stringify(res.body.details)}`,
        );
      }
      const edges = await t.request('POST', '/api/v1/contacts', {
        token: org.ownerToken,
        body: {
          firstName: 'x'.repeat(100),
          phoneNumbers: ['+1 (415) 555-0100', '+4915112345678'],
          notes: long(5000),
          tags: [long(50), 'a b'],
        },
      });
      assert.equal(edges.status, 201, `the limits themselves are allowed: ${edges.text}`);
    });

    test('an unknown or malformed id is a 404 not_found', async () => {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const res = await t.request(method, '/api/v1/contacts/ct_nope', {
          token: org.ownerToken,
          body: method === 'PUT' ? { notes: 'x' } : undefined,
        });
        assert.equal(res.status, 404, method);
        assert.equal(res.body.error, 'not_found', method);
      }
    });

    test('PUT changes only the given fields; an empty text clears it; at least one field', async () => {
      const made = await create({
        firstName: 'Grace',
        lastName: 'Hopper',
        emailAddresses: ['grace@example.com'],
        tags: ['navy'],
        notes: 'COBOL',
      });
      await new Promise((r) => setTimeout(r, 5));
      const res = await t.request('PUT', `/api/v1/contacts/${made.id}`, {
        token: org.ownerToken,
        body: { lastName: 'Murray Hopper', tags: ['navy', 'admiral'], notes: '' },
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.firstName, 'Grace');
      assert.equal(res.body.lastName, 'Murray Hopper');
      assert.deepEqual(res.body.emailAddresses, ['grace@example.com']);
      assert.deepEqual(res.body.tags, ['navy', 'admiral']);
      assert.equal('notes' in res.body, false, 'notes cleared');
      assert.equal(res.body.createdAt, made.createdAt);
      assert.ok(res.body.updatedAt > made.updatedAt, 'updatedAt moves');
      assert.deepEqual(
        (await t.request('GET', `/api/v1/contacts/${made.id}`, { token: org.ownerToken })).body,
        res.body,
      );

      for (const [body, path] of [
        [{}, ''],
        [{ nickname: 'G' }, '/nickname'],
        [{ phoneNumbers: ['555'] }, '/phoneNumbers/0'],
        [{ firstName: '' }, '/firstName'],
        [{ emailAddresses: ['nope'] }, '/emailAddresses/0'],
      ] as const) {
        const bad = await t.request('PUT', `/api/v1/contacts/${made.id}`, { token: org.ownerToken, body });
        assert.equal(bad.status, 400, JSON.stringify(body));
        assert.ok(
          bad.body.details.some((d: { path: string }) => d.path === path),
          JSON.stringify(bad.body),
        );
      }
      const unchanged = await t.request('GET', `/api/v1/contacts/${made.id}`, { token: org.ownerToken });
      assert.deepEqual(unchanged.body, res.body, 'a refused update changes nothing');
    });

    test('DELETE answers 204, then the contact is gone', async () => {
      const made = await create({ firstName: 'Temp' });
      const del = await t.request('DELETE', `/api/v1/contacts/${made.id}`, { token: org.ownerToken });
      assert.equal(del.status, 204);
      assert.equal(del.text, '');
      assert.equal((await t.request('GET', `/api/v1/contacts/${made.id}`, { token: org.ownerToken })).status, 404);
      assert.equal((await t.request('DELETE', `/api/v1/contacts/${made.id}`, { token: org.ownerToken })).status, 404);
    });

    test('search matches name, phone, email and tag, case-insensitively', async () => {
      const team = await newTeam();
      await create(
        {
          firstName: 'Marie',
          lastName: 'Curie',
          phoneNumbers: ['+33140000001'],
          emailAddresses: ['Marie@Radium.example'],
          tags: ['Nobel'],
        },
        team,
      );
      await create({ firstName: 'Pierre', lastName: 'Curie', phoneNumbers: ['+33140000002'], tags: ['physics'] }, team);
      await create(
        {
          firstName: 'Niels',
          lastName: 'Bohr',
          emailAddresses: ['niels@copenhagen.example'],
          notes: 'curie in the notes does not count',
        },
        team,
      );
      const cases: Array<[string, string[]]> = [
        ['marie', ['Marie']],
        ['CURIE', ['Marie', 'Pierre']],
        ['+3314000000', ['Marie', 'Pierre']],
        ['0002', ['Pierre']],
        ['radium.EXAMPLE', ['Marie']],
        ['copenhagen', ['Niels']],
        ['nobel', ['Marie']],
        ['PHYS', ['Pierre']],
        ['nobody', []],
      ];
      for (const [search, expected] of cases) {
        const res = await list(`search=${encodeURIComponent(search)}`, team);
        assert.equal(res.status, 200, search);
        assert.deepEqual(names(res), expected, `search=${search}`);
        assert.equal(res.body.pagination.total, expected.length, search);
      }
    });

    test('search is literal: regex characters match themselves and never error', async () => {
      const team = await newTeam();
      await create({ firstName: 'Dot.*Star' }, team);
      await create({ firstName: 'Paren(open' }, team);
      await create({ firstName: 'Plain', lastName: 'Name' }, team);
      await create({ firstName: 'Back\\slash', tags: ['a+b'] }, team);
      const cases: Array<[string, string[]]> = [
        ['.*', ['Dot.*Star']],
        ['(', ['Paren(open']],
        ['o.*r', []],
        ['^Plain', []],
        ['[', []],
        ['\\', ['Back\\slash']],
        ['a+b', ['Back\\slash']],
        ['Plain|Dot', []],
      ];
      for (const [search, expected] of cases) {
        const res = await list(`search=${encodeURIComponent(search)}`, team);
        assert.equal(res.status, 200, `${search}: ${res.text}`);
        assert.deepEqual(names(res), expected, `search=${search}`);
      }
    });

    test('tags filter: every listed tag must be present (case-insensitive), combinable with search', async () => {
      const team = await newTeam();
      await create({ firstName: 'Both', tags: ['vip', 'Beta'] }, team);
      await create({ firstName: 'VipOnly', tags: ['VIP'] }, team);
      await create({ firstName: 'BetaOnly', tags: ['beta'] }, team);
      await create({ firstName: 'None' }, team);
      assert.deepEqual(names(await list('tags=vip', team)), ['Both', 'VipOnly']);
      assert.deepEqual(names(await list('tags=vip,beta', team)), ['Both']);
      assert.deepEqual(names(await list('tags=BETA,%20vip%20,', team)), ['Both']);
      assert.deepEqual(names(await list('tags=vip,beta,gamma', team)), []);
      assert.deepEqual(names(await list('tags=beta&search=only', team)), ['BetaOnly']);
      assert.deepEqual(names(await list('tags=', team)), ['BetaOnly', 'Both', 'None', 'VipOnly']);
      const tooMany = await list(`tags=${Array.from({ length: 21 }, (_, i) => `t${i}`).join(',')}`, team);
      assert.equal(tooMany.status, 400);
      assert.equal(tooMany.body.details[0].path, '/tags');
    });

    test('the list is paginated with the pagination envelope, newest first', async () => {
      const team = await newTeam();
      for (let i = 0; i < 25; i++) await create({ firstName: `P${String(i).padStart(2, '0')}` }, team);
      const first = await list('limit=10', team);
      assert.equal(first.status, 200);
      assert.deepEqual(first.body.pagination, { page: 1, limit: 10, total: 25, totalPages: 3 });
      assert.equal(first.body.data[0].firstName, 'P24');
      const seen = new Set<string>();
      for (let page = 1; page <= 3; page++) {
        const res = await list(`limit=10&page=${page}`, team);
        assert.equal(res.body.data.length, page === 3 ? 5 : 10);
        for (const c of res.body.data) seen.add(c.id);
      }
      assert.equal(seen.size, 25, 'the pages cover every contact once');
      const beyond = await list('limit=10&page=4', team);
      assert.deepEqual(beyond.body.data, []);
      const defaults = await list('', team);
      assert.deepEqual(defaults.body.pagination, { page: 1, limit: 20, total: 25, totalPages: 2 });
      for (const bad of ['limit=0', 'limit=101', 'page=0', 'page=x', 'color=red', `search=${'s'.repeat(201)}`]) {
        const res = await list(bad, team);
        assert.equal(res.status, 400, bad);
        assert.equal(res.body.error, 'validation_error', bad);
      }
      assert.equal((await list('limit=100', team)).status, 200);
    });

    test("a team sees only its contacts; another team's or organization's id is a 404", async () => {
      const team = await newTeam();
      const mine = await create({ firstName: 'Teamed', phoneNumbers: ['+4915157770000'] }, team);
      assert.deepEqual(names(await list('search=Teamed', {})), [], 'the default team does not see it');
      assert.deepEqual(names(await list('search=Teamed', team)), ['Teamed']);
      assert.equal((await t.request('GET', `/api/v1/contacts/${mine.id}`, { token: org.ownerToken })).status, 404);
      assert.equal(
        (await t.request('PUT', `/api/v1/contacts/${mine.id}`, { token: org.ownerToken, body: { notes: 'x' } })).status,
        404,
      );
      assert.equal((await t.request('DELETE', `/api/v1/contacts/${mine.id}`, { token: org.ownerToken })).status, 404);
      const other = await signup(t, 'Other Org');
      const res = await t.request('GET', `/api/v1/contacts/${mine.id}`, { token: other.ownerToken });
      assert.equal(res.status, 404);
      assert.equal(res.body.error, 'not_found');
      assert.equal(
        (await t.request('GET', `/api/v1/contacts/${mine.id}`, { token: org.ownerToken, headers: team })).status,
        200,
        'the control',
      );
    });

    test('a viewer reads contacts but cannot write them', async () => {
      const viewer = await apiKey(t, org, 'viewer');
      const made = await create({ firstName: 'Viewed' });
      assert.equal((await t.request('GET', `/api/v1/contacts/${made.id}`, { token: viewer })).status, 200);
      assert.equal((await t.request('GET', '/api/v1/contacts', { token: viewer })).status, 200);
      const refused = await t.request('POST', '/api/v1/contacts', { token: viewer, body: { firstName: 'No' } });
      assert.equal(refused.status, 403);
      assert.equal(refused.body.error, 'forbidden');
      const member = await apiKey(t, org, 'member');
      assert.equal(
        (await t.request('POST', '/api/v1/contacts', { token: member, body: { firstName: 'Yes' } })).status,
        201,
      );
    });
  });
});
