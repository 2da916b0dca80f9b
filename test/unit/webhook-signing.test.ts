import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { bodySignature, deliveryHeaders, standardSignature } from '../../src/webhooks/webhook-signing.ts';

const body = '{"event":"message.sent","timestamp":"2026-01-01T00:00:00.000Z","data":{"id":"msg_1"}}';
const secret = 'my secret';

test('X-Webhook-Signature: hex HMAC-SHA256 of the raw body (vector computed with openssl)', () => {
  assert.equal(bodySignature(secret, body), 'd1383dd33efea8cfbf998f768a4aced5c8c2d9d84e1da295aa8b3e64a4cf12cc');
});

test('webhook-signature: v1, base64 HMAC-SHA256 of id.timestamp.body (vector computed with openssl), as the reference library signs', () => {
  assert.equal(standardSignature(secret, 'evt_1', '1767225600', body), 'v1,o3YZhcwjmafA5YPpXwrCfpwUIJcBePIxYM1aKor3TQ0=');
  assert.equal(new Webhook(secret, { format: 'raw' }).sign('evt_1', new Date(1767225600_000), body), 'v1,o3YZhcwjmafA5YPpXwrCfpwUIJcBePIxYM1aKor3TQ0=');
});

test('the headers of a delivery verify with the reference library; a changed body or secret does not', () => {
  const headers = deliveryHeaders({ webhookId: 'evt_abc', body, secret });
  assert.equal(headers['webhook-id'], 'evt_abc');
  assert.match(headers['webhook-timestamp']!, /^\d{10}$/);
  assert.deepEqual(new Webhook(secret, { format: 'raw' }).verify(body, headers), JSON.parse(body));
  assert.throws(() => new Webhook(secret, { format: 'raw' }).verify(body.replace('msg_1', 'msg_2'), headers));
  assert.throws(() => new Webhook('other secret', { format: 'raw' }).verify(body, headers));
});

test('without a secret there is no signature, only webhook-id and webhook-timestamp', () => {
  const headers = deliveryHeaders({ webhookId: 'evt_abc', body, secret: null });
  assert.deepEqual(Object.keys(headers).sort(), ['content-type', 'webhook-id', 'webhook-timestamp']);
});
