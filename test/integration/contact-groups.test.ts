import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AppError } from '../../src/errors.ts';
import { eachBackend, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

eachBackend((backend) => {
  describe(`contact groups (${backend})`, () => {
    let t: TestApp;
    let org: Org;

    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Groupies');
    });
    after(() => t.stop());

    const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      t.request(method, `/api/v1${path}`, { token: org.ownerToken, body, headers });
    const newTeam = async () => {
      const res = await call('POST', '/teams', { name: `team ${Math.random()}` });
      assert.equal(res.status, 201);
      return res.body.id as string;
    };
    const contact = async (body: Record<string, unknown>, headers: Record<string, string> = {}) => {
      const res = await call('POST', '/contacts', body, headers);
      assert.equal(res.status, 201, res.text);
      return res.body.id as string;
    };
    const group = async (name: string, headers: Record<string, string> = {}) => {
      const res = await call('POST', '/contact-groups', { name }, headers);
      assert.equal(res.status, 201, res.text);
      return res.body;
    };

    test('create answers 201 with id, name, memberCount, createdAt, updatedAt; the list has every group', async () => {
      const teamId = await newTeam();
      const team = { 'x-team-id': teamId };
      const made = await group('Customers', team);
      assert.deepEqual(Object.keys(made).sort(), ['createdAt', 'id', 'memberCount', 'name', 'updatedAt']);
      assert.match(made.id, /^grp_/);
      assert.equal(made.name, 'Customers');
      assert.equal(made.memberCount, 0);
      await group('Suppliers', team);
      const listed = await call('GET', '/contact-groups', undefined, team);
      assert.equal(listed.status, 200);
      assert.deepEqual(
        listed.body.data.map((g: { name: string }) => g.name),
        ['Customers', 'Suppliers'],
      );
      assert.deepEqual(listed.body.data[0], made);
      assert.deepEqual(
        (await call('GET', '/contact-groups')).body.data.filter((g: { name: string }) => g.name === 'Suppliers'),
        [],
        'another team does not see them',
      );
    });

    test('group names are validated', async () => {
      for (const [body, path] of [
        [{}, '/name'],
        [{ name: '' }, '/name'],
        [{ name: '  ' }, '/name'],
        [{ name: 'x'.repeat(101) }, '/name'],
        [{ name: 5 }, '/name'],
        [{ name: 'ok', color: 'red' }, '/color'],
      ] as const) {
        const res = await call('POST', '/contact-groups', body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.error, 'validation_error');
        assert.equal(res.body.details[0].path, path, JSON.stringify(body));
      }
      const member = await call('POST', `/contact-groups/${(await group('V')).id}/members`, {
        contactId: 'ct_x',
        extra: 1,
      });
      assert.equal(member.status, 400);
      assert.equal(member.body.details[0].path, '/extra');
      assert.equal(
        (await call('POST', `/contact-groups/${(await group('V')).id}/members`, {})).body.details[0].path,
        '/contactId',
      );
    });

    test('members: adding is idempotent, GET lists them, removing answers 204 then 404', async () => {
      const g = await group('Team A');
      const ada = await contact({ firstName: 'Ada', phoneNumbers: ['+4915150001000'] });
      const bob = await contact({ firstName: 'Bob', emailAddresses: ['bob@example.com'] });
      const added = await call('POST', `/contact-groups/${g.id}/members`, { contactId: ada });
      assert.equal(added.status, 201);
      assert.equal(added.body.memberCount, 1);
      assert.equal(added.body.id, g.id);
      const again = await call('POST', `/contact-groups/${g.id}/members`, { contactId: ada });
      assert.equal(again.status, 200, 'adding twice is no error');
      assert.equal(again.body.memberCount, 1, 'and no second membership');
      assert.equal((await call('POST', `/contact-groups/${g.id}/members`, { contactId: bob })).body.memberCount, 2);
      const got = await call('GET', `/contact-groups/${g.id}`);
      assert.equal(got.status, 200);
      assert.equal(got.body.memberCount, 2);
      assert.deepEqual(
        got.body.members.map((c: { firstName: string }) => c.firstName),
        ['Ada', 'Bob'],
      );
      assert.deepEqual(got.body.members[0], (await call('GET', `/contacts/${ada}`)).body, 'members are the contacts');
      const removed = await call('DELETE', `/contact-groups/${g.id}/members/${ada}`);
      assert.equal(removed.status, 204);
      const gone = await call('DELETE', `/contact-groups/${g.id}/members/${ada}`);
      assert.equal(gone.status, 404, 'no longer a member');
      assert.equal(gone.body.error, 'not_found');
      assert.equal((await call('DELETE', `/contact-groups/${g.id}/members/ct_unknown`)).status, 404);
      const after = await call('GET', `/contact-groups/${g.id}`);
      assert.equal(after.body.memberCount, 1);
      assert.deepEqual(
        after.body.members.map((c: { firstName: string }) => c.firstName),
        ['Bob'],
      );
      assert.equal((await call('GET', '/contacts/' + ada)).status, 200, 'removing a member keeps the contact');
    });

    test('unknown groups and contacts are 404', async () => {
      const g = await group('Known');
      const c = await contact({ firstName: 'C' });
      assert.equal((await call('GET', '/contact-groups/grp_nope')).status, 404);
      assert.equal((await call('POST', '/contact-groups/grp_nope/members', { contactId: c })).status, 404);
      assert.equal((await call('DELETE', `/contact-groups/grp_nope/members/${c}`)).status, 404);
      const unknownContact = await call('POST', `/contact-groups/${g.id}/members`, { contactId: 'ct_nope' });
      assert.equal(unknownContact.status, 404);
      assert.equal(unknownContact.body.error, 'not_found');
    });

    test("another team's or organization's group or contact is a 404", async () => {
      const otherTeam = { 'x-team-id': await newTeam() };
      const mine = await group('Mine');
      const myContact = await contact({ firstName: 'Mine' });
      const theirContact = await contact({ firstName: 'Theirs' }, otherTeam);
      const theirGroup = await group('Theirs', otherTeam);
      const crossContact = await call('POST', `/contact-groups/${mine.id}/members`, { contactId: theirContact });
      assert.equal(crossContact.status, 404, "a contact of another team can't join");
      assert.equal(crossContact.body.error, 'not_found');
      assert.equal(
        (await call('POST', `/contact-groups/${theirGroup.id}/members`, { contactId: myContact })).status,
        404,
        "nor can one join another team's group",
      );
      assert.equal((await call('GET', `/contact-groups/${theirGroup.id}`)).status, 404);
      assert.equal((await call('GET', `/contact-groups/${mine.id}`)).body.memberCount, 0);
      const stranger = await signup(t, 'Stranger');
      const strangerContact = (
        await t.request('POST', '/api/v1/contacts', { token: stranger.ownerToken, body: { firstName: 'S' } })
      ).body.id;
      assert.equal(
        (await call('POST', `/contact-groups/${mine.id}/members`, { contactId: strangerContact })).status,
        404,
      );
      const res = await t.request('GET', `/api/v1/contact-groups/${mine.id}`, { token: stranger.ownerToken });
      assert.equal(res.status, 404);
      assert.equal(res.body.error, 'not_found');
      assert.equal(
        (await call('POST', `/contact-groups/${mine.id}/members`, { contactId: myContact })).status,
        201,
        'the control',
      );
    });

    test('deleting a contact removes it from its groups', async () => {
      const one = await group('One');
      const two = await group('Two');
      const leaving = await contact({ firstName: 'Leaving' });
      const staying = await contact({ firstName: 'Staying' });
      for (const g of [one, two]) {
        await call('POST', `/contact-groups/${g.id}/members`, { contactId: leaving });
        await call('POST', `/contact-groups/${g.id}/members`, { contactId: staying });
      }
      assert.equal((await call('GET', `/contact-groups/${one.id}`)).body.memberCount, 2);
      assert.equal((await call('DELETE', `/contacts/${leaving}`)).status, 204);
      for (const g of [one, two]) {
        const got = await call('GET', `/contact-groups/${g.id}`);
        assert.equal(got.body.memberCount, 1, g.name);
        assert.deepEqual(
          got.body.members.map((c: { firstName: string }) => c.firstName),
          ['Staying'],
        );
      }
      const listed = await call('GET', '/contact-groups');
      assert.equal(listed.body.data.find((g: { id: string }) => g.id === one.id).memberCount, 1);
    });

    test('directory: group recipients are the first phone, else the first email; names by phone or email', async () => {
      const teamId = await newTeam();
      const team = { 'x-team-id': teamId };
      const scope = { tenantId: org.orgId, teamId };
      const g = await group('Broadcast', team);
      const members = [
        await contact(
          {
            firstName: 'Phone',
            lastName: 'First',
            phoneNumbers: ['+4915150003001', '+4915150003002'],
            emailAddresses: ['phone@example.com'],
          },
          team,
        ),
        await contact(
          { firstName: 'Email', lastName: 'Only', emailAddresses: ['Email.Only@Example.com', 'second@example.com'] },
          team,
        ),
        await contact({ firstName: 'Nobody' }, team),
        await contact({ firstName: 'Same', phoneNumbers: ['+4915150003001'] }, team),
      ];
      for (const id of members) await call('POST', `/contact-groups/${g.id}/members`, { contactId: id }, team);
      assert.deepEqual(await t.app.contacts.groupRecipients(scope, g.id), ['+4915150003001', 'Email.Only@Example.com']);
      assert.deepEqual(await t.app.contacts.groupRecipients(scope, (await group('Empty', team)).id), []);
      await assert.rejects(
        t.app.contacts.groupRecipients(scope, 'grp_unknown'),
        (err) => err instanceof AppError && err.code === 'not_found',
      );
      await assert.rejects(
        t.app.contacts.groupRecipients({ tenantId: org.orgId, teamId: org.teamId }, g.id),
        (err) => err instanceof AppError && err.code === 'not_found',
        "another team's group",
      );

      const names = await t.app.contacts.namesFor(scope, [
        '+4915150003002',
        'email.only@EXAMPLE.com',
        'second@example.com',
        '+19999999999',
        'nobody@example.com',
      ]);
      assert.deepEqual(Object.fromEntries(names), {
        '+4915150003002': 'Phone First',
        'email.only@EXAMPLE.com': 'Email Only',
        'second@example.com': 'Email Only',
      });
      assert.equal(
        (await t.app.contacts.namesFor(scope, ['+4915150003001'])).get('+4915150003001'),
        'Phone First',
        'the oldest contact wins',
      );
      assert.equal(
        (await t.app.contacts.namesFor({ tenantId: org.orgId, teamId: org.teamId }, ['+4915150003002'])).size,
        0,
        'names come from the same team only',
      );
      assert.equal((await t.app.contacts.namesFor(scope, [])).size, 0);
    });
  });
});
