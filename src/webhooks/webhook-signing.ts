import { createHmac } from 'node:crypto';

/**
 * The headers that let a receiver trust a delivery. `webhook-id` is the same
 * on every attempt of one event (deduplicate by it); `webhook-timestamp` is
 * the attempt's time in seconds. Both signatures key HMAC-SHA256 with the
 * secret's UTF-8 bytes: `X-Webhook-Signature` signs the raw body (hex), the
 * Standard Webhooks `webhook-signature` signs `id.timestamp.body` (base64).
 */
export function deliveryHeaders(opts: { webhookId: string; body: string; secret: string | null; now?: Date }): Record<string, string> {
  const timestamp = String(Math.floor((opts.now ?? new Date()).getTime() / 1000));
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'webhook-id': opts.webhookId,
    'webhook-timestamp': timestamp,
  };
  if (opts.secret !== null) {
    headers['x-webhook-signature'] = bodySignature(opts.secret, opts.body);
    headers['webhook-signature'] = standardSignature(opts.secret, opts.webhookId, timestamp, opts.body);
  }
  return headers;
}

/** Spec section 6: hex HMAC-SHA256 of the raw body. */
export function bodySignature(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/** Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`. */
export function standardSignature(secret: string, id: string, timestamp: string, body: string): string {
  return `v1,${createHmac('sha256', secret).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}
