import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { generateKeyPair, SignJWT, UnsecuredJWT } from 'jose';
import { loadAccessTokens, type JwtSettings } from '../../src/identity/jwt.ts';
import { VerifiedTokens } from '../../src/identity/verified-tokens.ts';

async function settings(
  t: { after(fn: () => Promise<void>): void },
  overrides: Partial<JwtSettings> = {},
): Promise<JwtSettings> {
  const dataDir = await mkdtemp(join(tmpdir(), 'relaybox-jwt-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  return {
    issuer: 'relaybox',
    audience: 'relaybox-api',
    accessTokenTtlSeconds: 900,
    privateKeyPem: undefined,
    publicKeyPem: undefined,
    dataDir,
    ...overrides,
  };
}

const claims = { sub: 'usr_1', org: 'org_1', role: 'admin' };

test('a signed access token verifies and carries its claims', async (t) => {
  const tokens = await loadAccessTokens(await settings(t));
  const { token, expiresIn } = await tokens.sign(claims);
  assert.equal(expiresIn, 900);
  assert.deepEqual(await tokens.verify(token), claims);
  const header = JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString());
  assert.equal(header.alg, 'EdDSA');
});

test('the signing key is generated into DATA_DIR once and reused by the next process', async (t) => {
  const s = await settings(t);
  const first = await loadAccessTokens(s);
  const stored = await readFile(join(s.dataDir, 'jwt-signing-key.json'), 'utf8');
  const second = await loadAccessTokens(s);
  assert.equal(await readFile(join(s.dataDir, 'jwt-signing-key.json'), 'utf8'), stored);
  const { token } = await first.sign(claims);
  assert.deepEqual(await second.verify(token), claims);
});

test('rejects alg none, another key, wrong audience, wrong issuer, expired and garbage', async (t) => {
  const s = await settings(t);
  const tokens = await loadAccessTokens(s);
  const none = new UnsecuredJWT({ org: 'org_1', role: 'owner' })
    .setSubject('usr_1')
    .setIssuer(s.issuer)
    .setAudience(s.audience)
    .setExpirationTime('5m')
    .encode();
  assert.equal(await tokens.verify(none), undefined, 'alg none');

  const other = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
  const forged = await new SignJWT({ org: 'org_1', role: 'owner' })
    .setProtectedHeader({ alg: 'EdDSA' })
    .setSubject('usr_1')
    .setIssuer(s.issuer)
    .setAudience(s.audience)
    .setExpirationTime('5m')
    .sign(other.privateKey);
  assert.equal(await tokens.verify(forged), undefined, 'signed with another key');

  const wrongAudience = await loadAccessTokens({ ...s, audience: 'someone-else' });
  assert.equal(await tokens.verify((await wrongAudience.sign(claims)).token), undefined, 'wrong audience');
  const wrongIssuer = await loadAccessTokens({ ...s, issuer: 'someone-else' });
  assert.equal(await tokens.verify((await wrongIssuer.sign(claims)).token), undefined, 'wrong issuer');

  const expired = await loadAccessTokens({ ...s, accessTokenTtlSeconds: 1 });
  const { token: soonExpired } = await expired.sign(claims);
  await new Promise((r) => setTimeout(r, 2100));
  assert.equal(await tokens.verify(soonExpired), undefined, 'expired');

  assert.equal(await tokens.verify('not.a.jwt'), undefined);
  assert.equal(await tokens.verify(''), undefined);
});

test('a verified token is known at once until its exp; one that did not verify never is', async (t) => {
  const s = await settings(t, { accessTokenTtlSeconds: 1 });
  const tokens = await loadAccessTokens(s);
  const { token } = await tokens.sign(claims);
  assert.equal(tokens.known(token), undefined, 'not verified yet');
  assert.deepEqual(await tokens.verify(token), claims);
  assert.deepEqual(tokens.known(token), claims);

  const wrongAudience = await loadAccessTokens({ ...s, audience: 'someone-else' });
  const { token: elsewhere } = await wrongAudience.sign(claims);
  assert.equal(await tokens.verify(elsewhere), undefined);
  assert.equal(tokens.known(elsewhere), undefined, 'a failed verification is not kept');
  assert.equal(tokens.known(`${token}x`), undefined, 'a token one character longer is another token');

  await new Promise((r) => setTimeout(r, 2100));
  assert.equal(tokens.known(token), undefined, 'expired');
  assert.equal(await tokens.verify(token), undefined);
});

test('verified tokens: the oldest is dropped past the bound; an entry answers until its exp, to the millisecond', () => {
  const verified = new VerifiedTokens<string>(2);
  const exp = 2_000_000_000;
  verified.keep('a', 'A', exp);
  verified.keep('b', 'B', exp);
  verified.keep('c', 'C', exp);
  assert.equal(verified.size, 2);
  const now = exp * 1000 - 1;
  assert.equal(verified.known('a', now), undefined);
  assert.equal(verified.known('b', now), 'B');
  assert.equal(verified.known('c', now), 'C');
  assert.equal(verified.known('c', exp * 1000), undefined, 'at its exp it verifies no more');
  assert.equal(verified.size, 1, 'an expired entry is dropped when met');
});
