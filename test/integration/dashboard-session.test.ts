import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { eachBackend, signup, startTestApp, type Org, type TestApp, type TestResponse } from '../support/test-app.ts';

const own = { 'x-relaybox-session': '1' };

/** The refresh cookie from a Set-Cookie answer, as the browser would send it back. */
function cookieOf(res: TestResponse): { header: string; value: string; attributes: string } {
  const set = res.headers.get('set-cookie') ?? '';
  const [pair = '', ...attributes] = set.split(';');
  return { header: pair.trim(), value: pair.split('=')[1] ?? '', attributes: attributes.join(';') };
}

eachBackend((backend) => {
  describe(`dashboard sessions (${backend})`, () => {
    let t: TestApp;
    let org: Org;

    before(async () => {
      t = await startTestApp(backend);
      org = await signup(t, 'Cookie Co');
    });
    after(() => t.stop());

    test('sign-in answers the access token in the body and the refresh token only in an HttpOnly SameSite=Strict cookie', async () => {
      const res = await t.request('POST', '/api/v1/auth/session', {
        body: { email: org.email, password: org.password },
        headers: own,
      });
      assert.equal(res.status, 200, res.text);
      assert.ok(res.body.accessToken);
      assert.equal(res.body.refreshToken, undefined);
      const cookie = cookieOf(res);
      assert.match(cookie.header, /^relaybox_refresh=.{20,}/);
      assert.match(cookie.attributes, /HttpOnly/);
      assert.match(cookie.attributes, /SameSite=Strict/);
      assert.match(cookie.attributes, /Path=\/api\/v1\/auth\/session/);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      const me = await t.request('GET', '/api/v1/me', { token: res.body.accessToken });
      assert.equal(me.status, 200);
    });

    test('the cookie is Secure on any host but a loopback one', async () => {
      // fetch will not send another Host: node:http does.
      const signIn = (host: string) =>
        new Promise<{ status: number; cookie: string }>((resolve, reject) => {
          const req = httpRequest(
            `${t.base}/api/v1/auth/session`,
            {
              method: 'POST',
              headers: { ...own, host, origin: `https://${host}`, 'content-type': 'application/json' },
            },
            (res) => {
              res.resume();
              res.on('end', () =>
                resolve({ status: res.statusCode ?? 0, cookie: String(res.headers['set-cookie'] ?? '') }),
              );
            },
          );
          req.on('error', reject);
          req.end(JSON.stringify({ email: org.email, password: org.password }));
        });
      const local = await signIn('localhost:3000');
      assert.equal(local.status, 200);
      assert.doesNotMatch(local.cookie, /Secure/);
      const remote = await signIn('relaybox.example.com');
      assert.equal(remote.status, 200);
      assert.match(remote.cookie, /; Secure/);
    });

    test('refresh rotates the cookie; the old one then ends the session; sign-out clears it', async () => {
      const signedIn = await t.request('POST', '/api/v1/auth/session', {
        body: { email: org.email, password: org.password },
        headers: own,
      });
      const first = cookieOf(signedIn).header;
      const refreshed = await t.request('POST', '/api/v1/auth/session/refresh', {
        body: {},
        headers: { ...own, cookie: first },
      });
      assert.equal(refreshed.status, 200, refreshed.text);
      const second = cookieOf(refreshed).header;
      assert.notEqual(second, first);
      const reused = await t.request('POST', '/api/v1/auth/session/refresh', {
        body: {},
        headers: { ...own, cookie: first },
      });
      assert.equal(reused.status, 401, 'a rotated token is refused');
      const afterReuse = await t.request('POST', '/api/v1/auth/session/refresh', {
        body: {},
        headers: { ...own, cookie: second },
      });
      assert.equal(afterReuse.status, 401, 'reuse ended the whole session');

      const again = await t.request('POST', '/api/v1/auth/session', {
        body: { email: org.email, password: org.password },
        headers: own,
      });
      const out = await t.request('POST', '/api/v1/auth/session/logout', {
        body: {},
        headers: { ...own, cookie: cookieOf(again).header },
      });
      assert.equal(out.status, 204);
      assert.match(out.headers.get('set-cookie') ?? '', /^relaybox_refresh=; .*Max-Age=0/);
      const gone = await t.request('POST', '/api/v1/auth/session/refresh', {
        body: {},
        headers: { ...own, cookie: cookieOf(again).header },
      });
      assert.equal(gone.status, 401);
      const none = await t.request('POST', '/api/v1/auth/session/refresh', { body: {}, headers: own });
      assert.equal(none.status, 401);
    });

    test('requests another site could forge are refused: no session header, another Origin, a cross-site fetch', async () => {
      const body = { email: org.email, password: org.password };
      const signedIn = await t.request('POST', '/api/v1/auth/session', { body, headers: own });
      const cookie = cookieOf(signedIn).header;
      const tries: Array<Record<string, string>> = [
        { cookie },
        { ...own, cookie, origin: 'https://evil.example' },
        { ...own, cookie, 'sec-fetch-site': 'cross-site' },
        { ...own, cookie, 'sec-fetch-site': 'same-site' },
      ];
      for (const headers of tries) {
        const refresh = await t.request('POST', '/api/v1/auth/session/refresh', { body: {}, headers });
        assert.equal(refresh.status, 403, JSON.stringify(headers));
        const out = await t.request('POST', '/api/v1/auth/session/logout', { body: {}, headers });
        assert.equal(out.status, 403, JSON.stringify(headers));
      }
      const login = await t.request('POST', '/api/v1/auth/session', {
        body,
        headers: { origin: 'https://evil.example', ...own },
      });
      assert.equal(login.status, 403);
      const still = await t.request('POST', '/api/v1/auth/session/refresh', {
        body: {},
        headers: { ...own, cookie, 'sec-fetch-site': 'same-origin' },
      });
      assert.equal(still.status, 200, 'the refused requests changed nothing');
    });

    test('sign-up through the session route creates the organization and signs in', async () => {
      const res = await t.request('POST', '/api/v1/auth/session/signup', {
        body: { organizationName: 'Fresh', email: `fresh-${Date.now()}@example.com`, password: 'long enough password' },
        headers: own,
      });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.refreshToken, undefined);
      assert.match(cookieOf(res).header, /^relaybox_refresh=/);
      const me = await t.request('GET', '/api/v1/me', { token: res.body.accessToken });
      assert.equal(me.body.organization.name, 'Fresh');
    });
  });
});
