import { createHmac, randomBytes } from 'node:crypto';

/**
 * How a secret keys the HMAC. `whsec`: a Standard Webhooks key, `whsec_` and
 * the base64 of the key bytes, signing with the decoded bytes (what the
 * reference libraries do by default). `raw`: the secret's UTF-8 bytes, as
 * every secret signed before `whsec_` keys existed.
 */
export type SecretFormat = 'whsec' | 'raw';

const whsecPrefix = 'whsec_';
/** Key lengths the Standard Webhooks specification allows. */
const minKeyBytes = 24;
const maxKeyBytes = 64;
/** A new secret's key: as long as the SHA-256 block it keys is wide. */
const newKeyBytes = 32;

/** A new Standard Webhooks secret: `whsec_` and the base64 of 32 random bytes. */
export function newSecret(): string {
  return `${whsecPrefix}${randomBytes(newKeyBytes).toString('base64')}`;
}

/** The format a secret set now signs in: `whsec_` is a Standard Webhooks key, anything else signs with its UTF-8 bytes. */
export function secretFormat(secret: string): SecretFormat {
  return secret.startsWith(whsecPrefix) ? 'whsec' : 'raw';
}

/** Why a `whsec_` secret is not a Standard Webhooks key, or null when it is one (or is not `whsec_` at all). */
export function secretProblem(secret: string): string | null {
  if (secretFormat(secret) === 'raw') return null;
  const encoded = secret.slice(whsecPrefix.length);
  const key = Buffer.from(encoded, 'base64');
  // Canonical base64 only: Node's decoder skips what it cannot read, the reference libraries refuse it.
  if (encoded.length === 0 || key.toString('base64') !== encoded)
    return 'whsec_ must be followed by standard base64 (A-Z a-z 0-9 + /, padded with =)';
  if (key.length < minKeyBytes || key.length > maxKeyBytes)
    return `a whsec_ key must be ${minKeyBytes} to ${maxKeyBytes} bytes, got ${key.length}`;
  return null;
}

/** The HMAC key of a stored secret (checked by `secretProblem` when it was set). */
export function signingKey(secret: string, format: SecretFormat): Buffer {
  return format === 'whsec' ? Buffer.from(secret.slice(whsecPrefix.length), 'base64') : Buffer.from(secret, 'utf8');
}

/**
 * The headers that let a receiver trust a delivery. `webhook-id` is the same
 * on every attempt of one event (deduplicate by it); `webhook-timestamp` is
 * the attempt's time in seconds. `keys` are the HMAC keys, the current one
 * first (none: the delivery is unsigned). The Standard Webhooks
 * `webhook-signature` signs `id.timestamp.body` (base64) once per key,
 * space-separated, so a receiver holding either key of a rotation verifies;
 * `X-Webhook-Signature` signs the raw body (hex) with the current key only.
 */
export function deliveryHeaders(opts: {
  webhookId: string;
  body: string;
  keys: readonly Buffer[];
  now?: Date;
}): Record<string, string> {
  const timestamp = String(Math.floor((opts.now ?? new Date()).getTime() / 1000));
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'webhook-id': opts.webhookId,
    'webhook-timestamp': timestamp,
  };
  const [current] = opts.keys;
  if (current) {
    headers['x-webhook-signature'] = bodySignature(current, opts.body);
    headers['webhook-signature'] = opts.keys
      .map((key) => standardSignature(key, opts.webhookId, timestamp, opts.body))
      .join(' ');
  }
  return headers;
}

/** Spec section 6: hex HMAC-SHA256 of the raw body (a string key is its UTF-8 bytes). */
export function bodySignature(key: Buffer | string, body: string): string {
  return createHmac('sha256', key).update(body).digest('hex');
}

/** Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`. */
export function standardSignature(key: Buffer | string, id: string, timestamp: string, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}
