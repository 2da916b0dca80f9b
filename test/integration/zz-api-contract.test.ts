/**
 * The contract test: every answer the integration suites got (recorded by
 * `request()` in test/support/test-app.ts) and every answer this file gets
 * itself must match the OpenAPI document: the status is documented for the
 * operation, the body matches its schema. Every operation must have at least
 * one successful answer. Named zz- so it runs after the other suites.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { recordAnswer, takeRecordedAnswers, type RecordedAnswer } from '../support/answer-recorder.ts';
import { newPlatformKey } from '../../src/identity/secrets.ts';
import { OpenApiContract } from '../support/openapi-contract.ts';
import { uploadingRelay } from '../support/relay-upload.ts';
import { routeFixtures } from '../support/route-fixtures.ts';
import { apiKey, signup, startTestApp, type Org, type TestApp } from '../support/test-app.ts';

const platform = newPlatformKey();
const fill = (path: string, params: Record<string, string>) =>
  path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => encodeURIComponent(params[name]!));

describe('API contract: recorded answers match the OpenAPI document', () => {
  let t: TestApp;
  let org: Org;
  let contract: OpenApiContract;
  const earlier: RecordedAnswer[] = takeRecordedAnswers();

  before(async () => {
    t = await startTestApp('embedded', { PLATFORM_ADMIN_KEY_HASHES: platform.hash });
    org = await signup(t, 'Contract Org');
    const doc = await t.request('GET', '/api/v1/openapi.json');
    contract = new OpenApiContract(doc.body);
  });
  after(() => t.stop());

  test('every operation is called here at least once with success', async () => {
    const token = org.ownerToken;
    const ok = async (method: string, path: string, body?: unknown, headers?: Record<string, string>) => {
      const res = await t.request(method, path, { token, body, headers });
      assert.ok(res.status < 400, `${method} ${path}: ${res.status} ${res.text.slice(0, 300)}`);
      return res;
    };
    // Operations without an id in the path.
    await ok('GET', '/api/v1/openapi.json');
    await ok('GET', '/api/v1/asyncapi.json');
    const other = await signup(t, 'Second Org');
    const session = await ok('POST', '/api/v1/auth/login', { email: other.email, password: other.password });
    await ok('POST', '/api/v1/auth/refresh', { refreshToken: other.refreshToken });
    await t
      .request('POST', '/api/v1/auth/logout', {
        token: session.body.accessToken,
        body: { refreshToken: session.body.refreshToken },
      })
      .then((r) => assert.equal(r.status, 204));
    // The dashboard's cookie sessions.
    const own = { 'x-relaybox-session': '1' };
    const cookieOf = (res: { headers: Headers }) => (res.headers.get('set-cookie') ?? '').split(';')[0]!;
    await ok(
      'POST',
      '/api/v1/auth/session/signup',
      { organizationName: 'Cookie Org', email: `cookie-${Date.now()}@example.com`, password: 'a long enough password' },
      own,
    );
    const cookieSession = await ok(
      'POST',
      '/api/v1/auth/session',
      { email: other.email, password: other.password },
      own,
    );
    const refreshed = await ok('POST', '/api/v1/auth/session/refresh', {}, { ...own, cookie: cookieOf(cookieSession) });
    await ok('POST', '/api/v1/auth/session/logout', {}, { ...own, cookie: cookieOf(refreshed) });
    await ok('GET', '/api/v1/me');
    await ok('GET', '/api/v1/me', undefined, { authorization: `Bearer ${await apiKey(t, org, 'viewer')}` });
    await ok('GET', '/api/v1/api-keys');
    await ok('POST', '/api/v1/members', {
      email: `member-${Date.now()}@example.com`,
      password: 'a long enough password',
      role: 'member',
    });
    await ok('GET', '/api/v1/members');
    await ok('POST', '/api/v1/teams', { name: `Contract team ${Date.now()}` });
    await ok('GET', '/api/v1/teams');
    await ok('GET', '/api/v1/relays');
    // The platform operators' route: a platform-admin key, no organization credential.
    const top = await t.request('GET', '/api/v1/admin/tenants/top?by=queued', { token: platform.raw });
    assert.equal(top.status, 200, top.text);
    await ok('POST', '/api/v1/webhooks', {
      url: 'https://93.184.216.34/hook',
      events: ['relay.offline'],
      secret: 'contract secret',
    });
    await ok('GET', '/api/v1/webhooks');
    await ok('GET', '/api/v1/events?type=message.queued&limit=5');
    const contact = await ok('POST', '/api/v1/contacts', {
      firstName: 'Ada',
      phoneNumbers: ['+1 415 555 0100'],
      tags: ['vip'],
    });
    await ok('GET', '/api/v1/contacts?tags=vip');
    await ok('GET', '/api/v1/contacts/export?format=json');
    await ok('GET', '/api/v1/contacts/export?format=csv');
    const form = new FormData();
    form.append(
      'file',
      new Blob(['firstName,phoneNumbers\r\nGrace,+14155550101\r\n'], { type: 'text/csv' }),
      'contacts.csv',
    );
    const imported = await fetch(`${t.base}/api/v1/contacts/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: form,
    });
    const importedText = await imported.text();
    recordAnswer({
      method: 'POST',
      path: '/api/v1/contacts/import',
      status: imported.status,
      contentType: imported.headers.get('content-type'),
      body: JSON.parse(importedText),
      text: importedText,
    });
    assert.equal(imported.status, 200, importedText);
    const group = await ok('POST', '/api/v1/contact-groups', { name: 'Contract group' });
    await ok('POST', `/api/v1/contact-groups/${group.body.id}/members`, { contactId: contact.body.id });
    await ok('GET', '/api/v1/contact-groups');
    await ok('GET', '/api/v1/phone-numbers');
    const sent = await ok(
      'POST',
      '/api/v1/messages',
      { to: '+14155550199', body: 'hello', attachments: ['https://cdn.example.com/a.png'] },
      { 'idempotency-key': 'contract-1' },
    );
    await ok(
      'POST',
      '/api/v1/messages',
      { to: '+14155550199', body: 'hello', attachments: ['https://cdn.example.com/a.png'] },
      { 'idempotency-key': 'contract-1' },
    );
    await ok('POST', '/api/v1/messages', { to: `group:${group.body.id}`, body: 'to the group' });
    await ok('GET', '/api/v1/messages?direction=sent&limit=5');
    await ok('GET', '/api/v1/messages/queue/stats');
    await ok('GET', '/api/v1/conversations');
    await ok('GET', '/api/v1/conversations/lookup?participant=%2B14155550199');
    // The signed download link answers a redirect, which is not followed here.
    const links = await ok('GET', `/api/v1/messages/${sent.body.id}/attachments`);
    const url = new URL(links.body.data[0].url);
    const download = await fetch(`${t.base}${url.pathname}`, { redirect: 'manual' });
    recordAnswer({
      method: 'GET',
      path: url.pathname,
      status: download.status,
      contentType: download.headers.get('content-type'),
      body: undefined,
      text: await download.text(),
    });
    assert.equal(download.status, 302);
    // A relay's upload takes its credential, not an API key: a relay registered here receives a file and uploads it.
    const relay = await uploadingRelay(t, org);
    await relay.receive(1, [{ guid: 'CONTRACT-FILE', name: 'contract.txt' }]);
    assert.equal((await relay.upload('CONTRACT-FILE', Buffer.from('contract'))).status, 200);
    relay.socket.close();
    // Operations with an id: the route matrices' fixtures make a real resource for each.
    const calledAbove = new Set(['/api/v1/attachments/{token}', '/api/v1/relay/attachments/{guid}']);
    for (const op of contract.operations.filter((o) => o.params > 0 && !calledAbove.has(o.path))) {
      const label = `${op.method} ${op.path.replace(/\{([^}]+)\}/g, ':$1')}`;
      const fixture = routeFixtures[label];
      assert.ok(fixture, `no fixture for ${label} in test/support/route-fixtures.ts`);
      const made = await fixture(t, org);
      await ok(op.method, fill(label.split(' ')[1]!, made.params), made.body);
    }
  });

  test('every error the pipeline gives is documented: no credential, a bad body, an unknown id', async () => {
    for (const op of contract.operations) {
      const path = op.path.replace(/\{[^}]+\}/g, 'nope');
      await t.request(op.method, path);
      if (op.method !== 'GET') {
        await t.request(op.method, path, { token: org.ownerToken, body: { unknownField: true } });
        await t.request(op.method, path, {
          token: org.ownerToken,
          body: 'not json',
          headers: { 'content-type': 'text/plain' },
        });
      }
    }
  });

  test('every recorded answer matches its operation in the document, and every operation has a successful answer', () => {
    const answers = [...earlier, ...takeRecordedAnswers()];
    const problems = new Map<string, Set<string>>();
    const succeeded = new Set<string>();
    let checked = 0;
    for (const answer of answers) {
      const result = contract.check(answer);
      if (!result) continue;
      checked++;
      if (answer.status < 400) succeeded.add(result.op.key);
      for (const p of result.problems) {
        const set = problems.get(result.op.key) ?? new Set();
        set.add(p);
        problems.set(result.op.key, set);
      }
    }
    console.log(
      `# ${checked} answers checked (${earlier.length} recorded by the earlier suites) over ${contract.operations.length} operations`,
    );
    assert.deepEqual(
      Object.fromEntries([...problems].map(([k, v]) => [k, [...v]])),
      {},
      'answers that break the document',
    );
    const silent = contract.operations.map((o) => o.key).filter((k) => !succeeded.has(k));
    assert.deepEqual(silent, [], 'operations with no successful answer recorded');
  });
});
