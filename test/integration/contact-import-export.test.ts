import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eachBackend, signup, startTestApp, type Org, type TestApp, type TestResponse } from '../support/test-app.ts';
import { teamHeader } from '../support/test-app.ts';

const MiB = 1024 * 1024;
const csvHeader = 'firstName,lastName,phoneNumbers,emailAddresses,tags,organization,jobTitle,notes,platformId';

interface Upload {
  name: string;
  type?: string;
  content: string | Buffer;
}

eachBackend((backend) => {
  describe(`contact import and export (${backend})`, () => {
    let t: TestApp;
    let org: Org;

    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Importers');
    });
    after(() => t.stop());

    const newTeam = () => teamHeader(t, org);

    const parsed = async (res: Response): Promise<TestResponse> => {
      const text = await res.text();
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON
      }
      return { status: res.status, body, headers: res.headers, text };
    };

    /** POST /contacts/import with one multipart file field (named `file` unless said otherwise). */
    const upload = async (
      file: Upload,
      headers: Record<string, string> = {},
      field = 'file',
    ): Promise<TestResponse> => {
      const form = new FormData();
      form.append(field, new Blob([file.content], file.type ? { type: file.type } : {}), file.name);
      const res = await fetch(`${t.base}/api/v1/contacts/import`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.ownerToken}`, ...headers },
        body: form,
      });
      return parsed(res);
    };
    const csv = (...rows: string[]) => [csvHeader, ...rows].join('\r\n') + '\r\n';
    const exportAs = async (format: string, headers: Record<string, string>, query = '') => {
      const res = await fetch(`${t.base}/api/v1/contacts/export?format=${format}${query}`, {
        headers: { authorization: `Bearer ${org.ownerToken}`, ...headers },
      });
      return parsed(res);
    };
    const allContacts = async (headers: Record<string, string>) => {
      const res = await t.request('GET', '/api/v1/contacts?limit=100', { token: org.ownerToken, headers });
      assert.equal(res.status, 200);
      return res.body.data as Array<Record<string, unknown>>;
    };
    /** The writable fields of each contact, in a stable order: what a round trip must keep. */
    const fieldsOf = (contacts: Array<Record<string, unknown>>) =>
      contacts
        .map(({ id: _id, createdAt: _c, updatedAt: _u, ...fields }) => fields)
        .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

    test('CSV import: created, failed with data-row numbers, lists split on ";"', async () => {
      const team = await newTeam();
      const res = await upload(
        {
          name: 'contacts.csv',
          type: 'text/csv',
          content: csv(
            'Ada,Lovelace,+442071234567;+4915151234567,ada@example.com,vip; math ,Engines,Programmer,"First, of her kind",ada-id',
            ',NoFirstName,,,,,,,',
            'Bad,Phone,555-1234,,,,,,',
            '',
            'Alan,Turing,,alan@example.com,,,,,',
            'Too,Many,,,,,,,,extra',
            'Bad,Email,,not-an-email,,,,,',
            'Grace,,,,,,,,',
          ),
        },
        team,
      );
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.created, 3);
      assert.equal(res.body.updated, 0);
      assert.equal(res.body.failed, 4);
      assert.deepEqual(
        res.body.errors.map((e: { row: number }) => e.row),
        [2, 3, 5, 6],
        'data rows counted from 1; the empty line is no row',
      );
      assert.match(res.body.errors[0].error, /firstName/);
      assert.match(res.body.errors[1].error, /\/phoneNumbers\/0/);
      assert.match(res.body.errors[2].error, /10 cells/);
      assert.match(res.body.errors[3].error, /\/emailAddresses\/0/);
      const stored = await allContacts(team);
      const ada = stored.find((c) => c.firstName === 'Ada')!;
      assert.deepEqual(ada.phoneNumbers, ['+442071234567', '+4915151234567']);
      assert.deepEqual(ada.emailAddresses, ['ada@example.com']);
      assert.deepEqual(ada.tags, ['vip', 'math']);
      assert.equal(ada.notes, 'First, of her kind');
      assert.equal(ada.platformId, 'ada-id');
      assert.equal(ada.organization, 'Engines');
      assert.equal(ada.jobTitle, 'Programmer');
      const grace = stored.find((c) => c.firstName === 'Grace')!;
      assert.equal('lastName' in grace, false, 'an empty cell is no value');
      assert.deepEqual(grace.phoneNumbers, []);
    });

    test('importing the same file twice creates nothing new the second time', async () => {
      const team = await newTeam();
      const file = {
        name: 'same.csv',
        content: csv(
          'One,A,+4915150000001,,,,,,',
          'Two,B,,two@example.com,,,,,',
          'Three,C,+4915150000003,three@example.com,,,,,',
          'Broken,,bad,,,,,,',
        ),
      };
      const first = await upload(file, team);
      assert.deepEqual([first.body.created, first.body.updated, first.body.failed], [3, 0, 1]);
      const second = await upload(file, team);
      assert.equal(second.status, 200);
      assert.deepEqual([second.body.created, second.body.updated, second.body.failed], [0, 3, 1]);
      assert.equal((await allContacts(team)).length, 3);
    });

    test('a row matching a phone or email (any case) updates that contact with the given fields only', async () => {
      const team = await newTeam();
      const existing = await t.request('POST', '/api/v1/contacts', {
        token: org.ownerToken,
        headers: team,
        body: {
          firstName: 'Old',
          lastName: 'Name',
          emailAddresses: ['Person@Example.com'],
          notes: 'keep me',
          tags: ['old'],
        },
      });
      const byPhone = await t.request('POST', '/api/v1/contacts', {
        token: org.ownerToken,
        headers: team,
        body: { firstName: 'Phone', phoneNumbers: ['+4915159990000'] },
      });
      const res = await upload(
        {
          name: 'merge.csv',
          content: csv(
            'New,,,person@example.COM,new,,,,',
            'Phoned,Person,+4915159990000,,,,,,',
            'Later,Row,+4915159990000,,,,CTO,,',
          ),
        },
        team,
      );
      assert.deepEqual([res.body.created, res.body.updated, res.body.failed], [0, 3, 0], JSON.stringify(res.body));
      const merged = (
        await t.request('GET', `/api/v1/contacts/${existing.body.id}`, { token: org.ownerToken, headers: team })
      ).body;
      assert.equal(merged.firstName, 'New');
      assert.equal(merged.lastName, 'Name', 'an empty cell leaves the field');
      assert.equal(merged.notes, 'keep me');
      assert.deepEqual(merged.tags, ['new']);
      assert.deepEqual(merged.emailAddresses, ['person@example.COM'], 'a given list replaces the stored one');
      const phoned = (
        await t.request('GET', `/api/v1/contacts/${byPhone.body.id}`, { token: org.ownerToken, headers: team })
      ).body;
      assert.equal(phoned.firstName, 'Later', 'rows apply in file order');
      assert.equal(phoned.lastName, 'Row');
      assert.equal(phoned.jobTitle, 'CTO');
      assert.equal((await allContacts(team)).length, 2);
    });

    test('rows in one file that share an address merge into one contact', async () => {
      const team = await newTeam();
      const res = await upload(
        {
          name: 'dupes.json',
          content: JSON.stringify([
            { firstName: 'First', phoneNumbers: ['+4915151110000'] },
            { firstName: 'Second', phoneNumbers: ['+4915151110000'], emailAddresses: ['x@example.com'] },
            { firstName: 'Third', emailAddresses: ['X@EXAMPLE.COM'], tags: ['t'] },
          ]),
        },
        team,
      );
      assert.deepEqual([res.body.created, res.body.updated, res.body.failed], [1, 2, 0]);
      const [only, ...rest] = await allContacts(team);
      assert.equal(rest.length, 0);
      assert.equal(only!.firstName, 'Third');
      assert.deepEqual(only!.phoneNumbers, ['+4915151110000']);
      assert.deepEqual(only!.tags, ['t']);
    });

    test('JSON import: an array of contacts validated like a create, rows counted from 1', async () => {
      const team = await newTeam();
      const res = await upload(
        {
          name: 'contacts.json',
          type: 'application/json',
          content: JSON.stringify([
            { firstName: 'Json', lastName: 'One', phoneNumbers: ['+4915152220001'], tags: ['a'] },
            { lastName: 'no first name' },
            { firstName: 'Unknown', nickname: 'x' },
            'not an object',
            { firstName: 'Json', lastName: 'Two', emailAddresses: ['two@example.com'] },
            { firstName: 'BadPhone', phoneNumbers: ['12'] },
          ]),
        },
        team,
      );
      assert.equal(res.status, 200, res.text);
      assert.deepEqual([res.body.created, res.body.updated, res.body.failed], [2, 0, 4]);
      assert.deepEqual(
        res.body.errors.map((e: { row: number }) => e.row),
        [2, 3, 4, 6],
      );
      assert.match(res.body.errors[0].error, /\/firstName: is required/);
      assert.match(res.body.errors[1].error, /\/nickname: is not a known field/);
      assert.match(res.body.errors[2].error, /row: must be object/);
      assert.match(res.body.errors[3].error, /\/phoneNumbers\/0/);
    });

    test('failed counts every broken row; errors lists the first 1,000', async () => {
      const team = await newTeam();
      const rows = [...Array.from({ length: 1_005 }, (_, i) => ({ lastName: `broken ${i}` })), { firstName: 'Last' }];
      const res = await upload({ name: 'many.json', content: JSON.stringify(rows) }, team);
      assert.equal(res.status, 200);
      assert.deepEqual([res.body.created, res.body.failed, res.body.errors.length], [1, 1_005, 1_000]);
      assert.equal(res.body.errors[999].row, 1_000);
    });

    test('a JSON file that is not an array, or not JSON, is a 400 and imports nothing', async () => {
      const team = await newTeam();
      for (const content of ['{"firstName":"Object"}', '[{"firstName":"Cut', '']) {
        const res = await upload({ name: 'bad.json', content }, team);
        assert.equal(res.status, 400, content);
        assert.equal(res.body.error, 'validation_error');
      }
      assert.equal((await allContacts(team)).length, 0);
    });

    test('CSV header problems are a 400 before any row is imported', async () => {
      const team = await newTeam();
      const cases: Array<[string, RegExp]> = [
        ['firstName,nickname\r\nA,B\r\n', /unknown column "nickname"/],
        ['lastName,phoneNumbers\r\nA,+4915151234567\r\n', /firstName column/],
        ['firstName,firstName\r\nA,B\r\n', /twice/],
        ['', /empty/],
      ];
      for (const [content, message] of cases) {
        const res = await upload({ name: 'h.csv', content }, team);
        assert.equal(res.status, 400, content);
        assert.equal(res.body.error, 'validation_error');
        assert.match(res.body.message, message);
      }
      const relaxed = await upload(
        { name: 'h.csv', content: '\uFEFF FIRSTNAME ,Phonenumbers\r\nCased,+4915153330000\r\n' },
        team,
      );
      assert.equal(relaxed.status, 200, 'header names match case-insensitively, a BOM is skipped');
      assert.equal(relaxed.body.created, 1);
      assert.equal((await allContacts(team)).length, 1);
    });

    test('an unreadable CSV row is reported; the rows before it are imported', async () => {
      const team = await newTeam();
      const res = await upload(
        { name: 'quotes.csv', content: csv('Good,One,,,,,,,', 'Also,Good,,,,,,,', 'Stray,"unclosed quote,,,,,,,') },
        team,
      );
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.created, 2);
      assert.equal(res.body.failed, 1);
      assert.equal(res.body.errors[0].row, 3);
      assert.match(res.body.errors[0].error, /unreadable CSV/);
    });

    test('the format comes from the extension, then the content type, then the first bytes', async () => {
      const team = await newTeam();
      const row = (name: string) => `${csvHeader}\n${name},,,,,,,,\n`;
      const accepted: Upload[] = [
        { name: 'upper.CSV', type: 'application/octet-stream', content: row('ByExtension') },
        { name: 'export', type: 'text/csv', content: row('ByCsvType') },
        { name: 'export', type: 'application/json', content: '[{"firstName":"ByJsonType"}]' },
        { name: 'blob', content: '  \n [{"firstName":"BySniffJson"}]' },
        { name: 'contacts.txt', type: 'text/plain', content: row('BySniffCsv') },
      ];
      for (const file of accepted) {
        const res = await upload(file, team);
        assert.equal(res.status, 200, `${file.name} ${file.type}: ${res.text}`);
        assert.equal(res.body.created, 1, file.name);
      }
      const refused: Upload[] = [
        {
          name: 'photo.png',
          type: 'image/png',
          content: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]),
        },
        { name: 'photo.png', type: 'image/png', content: row('PngNamedCsv') },
        { name: 'notes.txt', type: 'text/plain', content: 'just some words, not contacts' },
        { name: 'data.bin', content: Buffer.from([0, 1, 2, 3, 255]) },
        {
          name: 'sheet.xlsx',
          type: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
          content: 'PK\u0003\u0004',
        },
      ];
      for (const file of refused) {
        const res = await upload(file, team);
        assert.equal(res.status, 415, `${file.name} ${file.type}`);
        assert.equal(res.body.error, 'unsupported_media_type');
      }
      assert.equal((await allContacts(team)).length, accepted.length);
    });

    test('a request that is not multipart or has no file field is refused with a clear message', async () => {
      const asJson = await t.request('POST', '/api/v1/contacts/import', {
        token: org.ownerToken,
        body: [{ firstName: 'X' }],
      });
      assert.equal(asJson.status, 415);
      assert.equal(asJson.body.error, 'unsupported_media_type');
      assert.match(asJson.body.message, /multipart\/form-data/);
      const noBody = await t.request('POST', '/api/v1/contacts/import', { token: org.ownerToken });
      assert.equal(noBody.status, 415);
      const wrongField = await upload({ name: 'c.csv', content: csv('A,,,,,,,,') }, {}, 'upload');
      assert.equal(wrongField.status, 400);
      assert.equal(wrongField.body.error, 'validation_error');
      assert.equal(wrongField.body.details[0].path, '/file');
      const textField = new FormData();
      textField.append('file', 'firstName\nA\n');
      const asText = await parsed(
        await fetch(`${t.base}/api/v1/contacts/import`, {
          method: 'POST',
          headers: { authorization: `Bearer ${org.ownerToken}` },
          body: textField,
        }),
      );
      assert.equal(asText.status, 400, 'a text field is not a file');
      const truncated = await t.request('POST', '/api/v1/contacts/import', {
        token: org.ownerToken,
        headers: { 'content-type': 'multipart/form-data; boundary=XYZ' },
        body: '--XYZ\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nfirstName\r\nA\r\n',
      });
      assert.equal(truncated.status, 400);
      assert.match(truncated.body.message, /malformed/);
      const noBoundary = await t.request('POST', '/api/v1/contacts/import', {
        token: org.ownerToken,
        headers: { 'content-type': 'multipart/form-data' },
        body: 'x',
      });
      assert.equal(noBoundary.status, 400);
      assert.match(noBoundary.body.message, /malformed.*[Bb]oundary/);
    });

    test('a file over 10 MiB is a 413 and imports nothing; exactly 10 MiB is read', async () => {
      const team = await newTeam();
      /** A valid first row, then one row padded to make the file `size` bytes. */
      const fileOf = (size: number) => {
        const head = `${csvHeader}\r\nEarly,,+4915156660000,,,,,,\r\nBig,,,,,,,"`;
        const tail = '",\r\n';
        return head + 'x'.repeat(size - head.length - tail.length) + tail;
      };
      const over = await upload({ name: 'big.csv', content: fileOf(10 * MiB + 1) }, team);
      assert.equal(over.status, 413);
      assert.equal(over.body.error, 'payload_too_large');
      const wayOver = await upload({ name: 'huge.csv', content: fileOf(11 * MiB) }, team);
      assert.equal(wayOver.status, 413, 'the body limit refuses it before the handler');
      assert.equal(wayOver.body.error, 'payload_too_large');
      assert.equal((await allContacts(team)).length, 0, 'not even the rows before the limit');
      const exact = await upload({ name: 'big.csv', content: fileOf(10 * MiB) }, team);
      assert.equal(exact.status, 200, 'a file of exactly 10 MiB is within the limit');
      assert.deepEqual(
        [exact.body.created, exact.body.failed],
        [1, 1],
        'its second row has notes over 5,000 characters',
      );
      assert.deepEqual(
        exact.body.errors.map((e: { row: number }) => e.row),
        [2],
      );
      assert.match(exact.body.errors[0].error, /notes/);
    });

    test('CSV export: the import header, ";" lists, RFC 4180 quoting, formula cells escaped, E.164 untouched', async () => {
      const team = await newTeam();
      const body = {
        firstName: '=HYPERLINK("http://evil.example","x")',
        lastName: '+SUM(A1:A2)',
        phoneNumbers: ['+4915151234567', '+442071234567'],
        emailAddresses: ['a@example.com', 'b@example.com'],
        tags: ['-minus', 'plain'],
        organization: '@cmd',
        jobTitle: '\tTabbed',
        notes: "'=already quoted",
        platformId: '-1+2',
      };
      assert.equal(
        (await t.request('POST', '/api/v1/contacts', { token: org.ownerToken, headers: team, body })).status,
        201,
      );
      await t.request('POST', '/api/v1/contacts', {
        token: org.ownerToken,
        headers: team,
        body: {
          firstName: 'Quote "me"',
          lastName: 'Comma, Inc',
          notes: 'line one\nline two',
          organization: '+4915151234567',
        },
      });
      const res = await exportAs('csv', team);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'text/csv; charset=utf-8');
      assert.match(res.headers.get('content-disposition')!, /^attachment; filename="contacts-\d{4}-\d{2}-\d{2}\.csv"$/);
      const lines = res.text.split('\r\n');
      assert.equal(lines[0], csvHeader);
      assert.equal(
        lines[1],
        `"'=HYPERLINK(""http://evil.example"",""x"")",'+SUM(A1:A2),+4915151234567;+442071234567,a@example.com;b@example.com,'-minus;plain,'@cmd,'\tTabbed,''=already quoted,'-1+2`,
      );
      assert.equal(lines[2], '"Quote ""me""","Comma, Inc",,,,+4915151234567,,"line one\nline two",');
      assert.equal(lines[3], '', 'the file ends with CRLF');
      assert.equal(lines.length, 4);
    });

    test('round trip: a CSV export imports back to the same contacts, and again into an update', async () => {
      const source = await newTeam();
      const contacts = [
        {
          firstName: '=Formula',
          lastName: 'Person',
          phoneNumbers: ['+4915150100001'],
          tags: ['-dash', '@at', 'multi word'],
          notes: '+plus\r\nand lines',
        },
        {
          firstName: 'Zoë',
          lastName: 'Ünïcode',
          emailAddresses: ['zoe@example.com', 'Zoe.Work@Example.com'],
          organization: 'Caf\u00e9; "Quoted", Ltd',
          jobTitle: "'leading quote",
        },
        { firstName: 'Only' },
        {
          firstName: 'Tabs',
          notes: '\tstarts with a tab',
          platformId: "''=two quotes",
          phoneNumbers: ['+442071230000', '+33140000000'],
        },
      ];
      for (const body of contacts)
        assert.equal(
          (await t.request('POST', '/api/v1/contacts', { token: org.ownerToken, headers: source, body })).status,
          201,
        );
      const exported = await exportAs('csv', source);
      const target = await newTeam();
      const imported = await upload({ name: 'contacts.csv', content: exported.text }, target);
      assert.deepEqual(
        [imported.body.created, imported.body.updated, imported.body.failed],
        [4, 0, 0],
        JSON.stringify(imported.body.errors),
      );
      assert.deepEqual(fieldsOf(await allContacts(target)), fieldsOf(await allContacts(source)));
      const again = await upload({ name: 'contacts.csv', content: exported.text }, source);
      assert.deepEqual(
        [again.body.created, again.body.updated],
        [1, 3],
        'the three with an address update; "Only" has none to match',
      );
    });

    test('round trip: a JSON export imports back to the same contacts', async () => {
      const source = await newTeam();
      for (const body of [
        { firstName: 'J1', phoneNumbers: ['+4915150200001'], tags: ['x'], notes: '=not escaped in JSON' },
        {
          firstName: 'J2',
          lastName: 'Two',
          emailAddresses: ['j2@example.com'],
          organization: 'Org',
          jobTitle: 'Job',
          platformId: 'pid',
        },
      ])
        await t.request('POST', '/api/v1/contacts', { token: org.ownerToken, headers: source, body });
      const exported = await exportAs('json', source);
      assert.equal(exported.status, 200);
      assert.equal(exported.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.match(exported.headers.get('content-disposition')!, /filename="contacts-\d{4}-\d{2}-\d{2}\.json"/);
      assert.equal(exported.body.length, 2);
      assert.equal(exported.body[0].id, undefined, 'the export holds the import fields only');
      assert.equal(
        exported.body.find((c: { firstName: string }) => c.firstName === 'J1').notes,
        '=not escaped in JSON',
      );
      const target = await newTeam();
      const imported = await upload({ name: 'contacts.json', content: exported.text }, target);
      assert.deepEqual([imported.body.created, imported.body.failed], [2, 0]);
      assert.deepEqual(fieldsOf(await allContacts(target)), fieldsOf(await allContacts(source)));
    });

    test('export: json by default, filtered by search and tags, every page streamed once', async () => {
      const team = await newTeam();
      const rows = Array.from(
        { length: 1_200 },
        (_, i) => `Bulk${i},,+491515${String(i).padStart(7, '0')},,${i % 3 === 0 ? 'third;all' : 'all'},,,,`,
      );
      const imported = await upload({ name: 'bulk.csv', content: csv(...rows) }, team);
      assert.deepEqual([imported.body.created, imported.body.failed], [1_200, 0]);
      const all = await fetch(`${t.base}/api/v1/contacts/export`, {
        headers: { authorization: `Bearer ${org.ownerToken}`, ...team },
      });
      assert.equal(all.headers.get('content-type'), 'application/json; charset=utf-8');
      const everything = (await all.json()) as Array<{ firstName: string }>;
      assert.equal(everything.length, 1_200);
      assert.equal(new Set(everything.map((c) => c.firstName)).size, 1_200, 'no contact twice across pages');
      const thirds = await exportAs('csv', team, '&tags=THIRD');
      assert.equal(thirds.text.trim().split('\r\n').length, 1 + 400);
      const searched = await exportAs('json', team, '&search=Bulk119');
      assert.deepEqual(searched.body.map((c: { firstName: string }) => c.firstName).sort(), [
        'Bulk119',
        'Bulk1190',
        'Bulk1191',
        'Bulk1192',
        'Bulk1193',
        'Bulk1194',
        'Bulk1195',
        'Bulk1196',
        'Bulk1197',
        'Bulk1198',
        'Bulk1199',
      ]);
      const empty = await newTeam();
      assert.deepEqual((await exportAs('json', empty)).body, []);
      assert.equal((await exportAs('csv', empty)).text, `${csvHeader}\r\n`);
      const bad = await exportAs('xml', team);
      assert.equal(bad.status, 400);
      assert.equal(bad.body.details[0].path, '/format');
    });

    test("export and import act in the caller's team only", async () => {
      const team = await newTeam();
      await t.request('POST', '/api/v1/contacts', {
        token: org.ownerToken,
        headers: team,
        body: { firstName: 'Secret', phoneNumbers: ['+4915158880000'] },
      });
      const other = await newTeam();
      assert.deepEqual((await exportAs('json', other)).body, []);
      const imported = await upload({ name: 'c.csv', content: csv('Mine,,+4915158880000,,,,,,') }, other);
      assert.deepEqual([imported.body.created, imported.body.updated], [1, 0], "another team's contact is not matched");
      const stranger = await signup(t, 'Stranger');
      const res = await fetch(`${t.base}/api/v1/contacts/export`, {
        headers: { authorization: `Bearer ${stranger.ownerToken}` },
      });
      assert.deepEqual(await res.json(), []);
    });
  });
});
