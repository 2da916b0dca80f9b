import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { randomBytes } from 'node:crypto';
import {
  bodySignature,
  deliveryHeaders,
  newSecret,
  secretFormat,
  secretProblem,
  signingKey,
  standardSignature,
} from '../../src/webhooks/webhook-signing.ts';

const body = '{"event":"message.sent","timestamp":"2026-01-01T00:00:00.000Z","data":{"id":"msg_1"}}';
const secret = 'my secret';

test('X-Webhook-Signature: hex HMAC-SHA256 of the raw body (vector computed with openssl)', () => {
  assert.equal(bodySignature(secret, body), 'd1383dd33efea8cfbf998f768a4aced5c8c2d9d84e1da295aa8b3e64a4cf12cc');
});

test('webhook-signature: v1, base64 HMAC-SHA256 of id.timestamp.body (vector computed with openssl), as the reference library signs', () => {
  assert.equal(
    standardSignature(secret, 'evt_1', '1767225600', body),
    'v1,o3YZhcwjmafA5YPpXwrCfpwUIJcBePIxYM1aKor3TQ0=',
  );
  assert.equal(
    new Webhook(secret, { format: 'raw' }).sign('evt_1', new Date(1767225600_000), body),
    'v1,o3YZhcwjmafA5YPpXwrCfpwUIJcBePIxYM1aKor3TQ0=',
  );
});

test('the headers of a delivery verify with the reference library; a changed body or secret does not', () => {
  const headers = deliveryHeaders({ webhookId: 'evt_abc', body, keys: [signingKey(secret, secretFormat(secret))] });
  assert.equal(headers['webhook-id'], 'evt_abc');
  assert.match(headers['webhook-timestamp']!, /^\d{10}$/);
  assert.deepEqual(new Webhook(secret, { format: 'raw' }).verify(body, headers), JSON.parse(body));
  assert.throws(() => new Webhook(secret, { format: 'raw' }).verify(body.replace('msg_1', 'msg_2'), headers));
  assert.throws(() => new Webhook('other secret', { format: 'raw' }).verify(body, headers));
});

test('without a secret there is no signature, only webhook-id and webhook-timestamp', () => {
  const headers = deliveryHeaders({ webhookId: 'evt_abc', body, keys: [] });
  assert.deepEqual(Object.keys(headers).sort(), ['content-type', 'webhook-id', 'webhook-timestamp']);
});

test('a secret not starting with whsec_ signs with its UTF-8 bytes, as before: the vectors above, through the signing key', () => {
  assert.equal(secretFormat(secret), 'raw');
  assert.equal(secretProblem(secret), null);
  assert.equal(
    standardSignature(signingKey(secret, 'raw'), 'evt_1', '1767225600', body),
    'v1,o3YZhcwjmafA5YPpXwrCfpwUIJcBePIxYM1aKor3TQ0=',
  );
  assert.equal(bodySignature(signingKey('clé', 'raw'), body), bodySignature(Buffer.from('clé', 'utf8'), body));
});

test('a new secret is whsec_ and the base64 of 32 random bytes; the reference library verifies it with its default options', () => {
  const made = newSecret();
  assert.match(made, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.notEqual(newSecret(), made);
  assert.equal(secretFormat(made), 'whsec');
  assert.equal(secretProblem(made), null);
  const key = signingKey(made, 'whsec');
  assert.deepEqual(key, Buffer.from(made.slice('whsec_'.length), 'base64'));
  assert.equal(key.length, 32);
  const headers = deliveryHeaders({ webhookId: 'evt_abc', body, keys: [key] });
  assert.deepEqual(new Webhook(made).verify(body, headers), JSON.parse(body));
  assert.equal(headers['x-webhook-signature'], bodySignature(key, body));
  assert.throws(() => new Webhook(made, { format: 'raw' }).verify(body, headers), 'the whole string is not the key');
  assert.equal(
    new Webhook(made).sign('evt_1', new Date(1767225600_000), body),
    standardSignature(key, 'evt_1', '1767225600', body),
  );
});

test('a whsec_ value that is not base64 of 24 to 64 bytes is refused with the reason', () => {
  const b64 = (n: number) => randomBytes(n).toString('base64');
  assert.equal(secretProblem(`whsec_${b64(24)}`), null);
  assert.equal(secretProblem(`whsec_${b64(64)}`), null);
  for (const [value, reason] of [
    ['whsec_', /base64/],
    ['whsec_not base64!', /base64/],
    [`whsec_${b64(32).replace(/=+$/, '')}`, /base64/],
    [`whsec_${b64(32).replace(/\+|\//g, '-')}x`, /base64/],
    [`whsec_${b64(16)}`, /24 to 64 bytes, got 16/],
    [`whsec_${b64(65)}`, /24 to 64 bytes, got 65/],
  ] as const) {
    assert.match(secretProblem(value) ?? 'accepted', reason, value);
  }
});

test('during a rotation webhook-signature carries one v1 signature per key, each verifying; X-Webhook-Signature signs with the current key only', () => {
  const previous = 'the raw secret before';
  const current = newSecret();
  const headers = deliveryHeaders({
    webhookId: 'evt_abc',
    body,
    keys: [signingKey(current, 'whsec'), signingKey(previous, 'raw')],
  });
  const signatures = headers['webhook-signature']!.split(' ');
  assert.equal(signatures.length, 2);
  for (const s of signatures) assert.match(s, /^v1,[A-Za-z0-9+/]{43}=$/);
  assert.deepEqual(new Webhook(current).verify(body, headers), JSON.parse(body));
  assert.deepEqual(new Webhook(previous, { format: 'raw' }).verify(body, headers), JSON.parse(body));
  assert.throws(() => new Webhook(newSecret()).verify(body, headers));
  assert.equal(headers['x-webhook-signature'], bodySignature(signingKey(current, 'whsec'), body));
});
