import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

type Detail = { path: string; message: string };

// Validation runs before any backend is touched, so the embedded default is enough here.
describe('a 400 lists every violation, each with its path', () => {
  let t: TestApp;
  let org: Org;

  before(async () => {
    t = await startTestApp('embedded');
    org = await signup(t, 'Validation Org');
  });
  after(() => t.stop());

  const details = async (method: string, path: string, body?: unknown): Promise<Detail[]> => {
    const res = await t.request(method, path, { token: org.ownerToken, body });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.error, 'validation_error');
    assert.ok(
      res.body.details.every((d: Detail) => typeof d.path === 'string' && d.message),
      res.text,
    );
    return res.body.details;
  };
  const paths = (ds: Detail[]) => [...new Set(ds.map((d) => d.path))].sort();

  test('a send with four problems names all four, the text-or-attachments rule among them', async () => {
    const ds = await details('POST', '/api/v1/messages', { to: 'nobody', priority: 500, extra: 1 });
    assert.deepEqual(paths(ds), ['/body', '/extra', '/priority', '/to']);
    assert.equal(ds.find((d) => d.path === '/body')!.message, 'is required unless attachments are given');
    assert.match(ds.find((d) => d.path === '/to')!.message, /email address/);
    assert.deepEqual(paths(await details('POST', '/api/v1/messages', {})), ['/body', '/to']);
    assert.deepEqual(paths(await details('POST', '/api/v1/messages', { to: '+14155550100', attachments: [] })), [
      '/body',
    ]);
  });

  test('query violations are listed together; a union says which values it allows', async () => {
    const ds = await details('GET', '/api/v1/messages?direction=bogus&limit=0&page=x');
    assert.deepEqual(paths(ds), ['/direction', '/limit', '/page']);
    assert.equal(ds.find((d) => d.path === '/direction')!.message, 'must be one of: sent, received');
  });

  test('every path is a JSON Pointer: "/" and "~" in a name are escaped; a header and the whole body are named too', async () => {
    const ds = await details('POST', '/api/v1/messages', { to: '+14155550100', body: 'x', 'a/b~c.d': 1 });
    assert.deepEqual(paths(ds), ['/a~1b~0c.d']);
    const keyed = await t.request('POST', '/api/v1/messages', {
      token: org.ownerToken,
      body: { to: '+14155550100', body: 'x' },
      headers: { 'idempotency-key': 'k'.repeat(256) },
    });
    assert.equal(keyed.status, 400);
    assert.deepEqual(
      keyed.body.details.map((d: Detail) => d.path),
      ['/Idempotency-Key'],
    );
    const broken = await t.request('POST', '/api/v1/messages', { token: org.ownerToken, body: '{"to": ' });
    assert.equal(broken.status, 400);
    assert.deepEqual(broken.body.details, [{ path: '', message: 'is not valid JSON' }]);
  });

  test('nested fields are named with their index', async () => {
    const ds = await details('POST', '/api/v1/contacts', {
      firstName: '',
      phoneNumbers: ['+14155550100', 'nope', '+19999999999'],
      tags: ['ok', 'a,b'],
      emailAddresses: ['x'],
    });
    assert.deepEqual(paths(ds), ['/emailAddresses/0', '/firstName', '/phoneNumbers/1', '/phoneNumbers/2', '/tags/1']);
    assert.equal(
      ds.find((d) => d.path === '/tags/1')!.message,
      'must be no commas or semicolons, no leading or trailing space',
    );
  });

  test('NUL and unpaired surrogates are listed with the other violations, in values and in field names; "\\u0000" written out is text', async () => {
    const ds = await details(
      'POST',
      '/api/v1/contacts',
      '{"firstName":"\\u0000","lastName":"a\\\\u0000b","tags":["ok","x\\udbff"],"phoneNumbers":["nope"],"n\\u0000":1}',
    );
    assert.deepEqual(paths(ds), ['/firstName', '/n\u0000', '/phoneNumbers/0', '/tags/1']);
    assert.match(ds.find((d) => d.path === '/firstName')!.message, /^must not contain NUL/);
    assert.deepEqual(
      ds
        .filter((d) => d.path === '/n\u0000')
        .map((d) => d.message)
        .sort(),
      ['is a field name holding NUL (U+0000) or an unpaired surrogate (U+D800 to U+DFFF)', 'is not a known field'],
    );
  });
});
