import { Type, type Static } from '@sinclair/typebox';
import { eventNames } from '../events/event-stream.ts';
import { keysetPaginationQuery, pageOrAfter } from '../http/pagination.ts';
import { named } from '../http/route.ts';
import { strictObject } from '../http/validation.ts';
import { deliveryStatuses } from './webhook-store.ts';

export const testEventName = 'webhook.test';

const eventName = Type.Union(eventNames.map((n) => Type.Literal(n)));
const url = Type.String({ minLength: 1, maxLength: 2048, description: 'http(s) URL of a public address' });
const events = Type.Array(eventName, { minItems: 1, maxItems: eventNames.length, uniqueItems: true });
const secret = Type.String({
  minLength: 1,
  maxLength: 256,
  description:
    'Shared secret for the signatures; stored encrypted, never returned. `whsec_` and the base64 of 24 to 64 bytes is a Standard Webhooks key and signs with the decoded bytes; any other value signs with its UTF-8 bytes',
});

export const webhookCreateBody = strictObject({ url, events, secret: Type.Optional(secret) });
export const webhookUpdateBody = strictObject(
  {
    url: Type.Optional(url),
    events: Type.Optional(events),
    secret: Type.Optional(Type.Union([secret, Type.Null()], { description: 'null removes the secret' })),
  },
  { minProperties: 1 },
);
export type WebhookCreate = Static<typeof webhookCreateBody>;
export type WebhookUpdate = Static<typeof webhookUpdateBody>;

export const webhookIdParams = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const deliveryParams = strictObject({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  deliveryId: Type.String({ minLength: 1, maxLength: 64 }),
});

export const deliveryListQuery = strictObject(
  {
    ...keysetPaginationQuery,
    status: Type.Optional(Type.Union(deliveryStatuses.map((s) => Type.Literal(s)))),
    event: Type.Optional(Type.Union([eventName, Type.Literal(testEventName)])),
    eventId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: "one event's deliveries: its id, as `GET /api/v1/events` lists it and `webhook-id` carries it",
      }),
    ),
  },
  pageOrAfter,
);

export const retryPolicySchema = named(
  'WebhookRetryPolicy',
  Type.Object({
    maxAttempts: Type.Integer({ description: 'attempts in all, the first included' }),
    firstRetryMs: Type.Integer({ description: 'the wait after the first failed attempt' }),
    factor: Type.Number({ description: 'each wait is this many times the one before' }),
    maxDelayMs: Type.Integer({ description: 'no wait is longer (Retry-After included)' }),
    jitter: Type.Number({ description: 'each wait varies by up to this share, either way' }),
  }),
);

export const webhookSchema = named(
  'Webhook',
  Type.Object({
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(Type.String()),
    enabled: Type.Boolean(),
    hasSecret: Type.Boolean(),
    createdAt: Type.String(),
    updatedAt: Type.String(),
  }),
);

export const deliverySchema = named(
  'WebhookDelivery',
  Type.Object({
    id: Type.String(),
    event: Type.String(),
    eventId: Type.String({ description: 'Sent as webhook-id on every attempt' }),
    status: Type.Union(deliveryStatuses.map((s) => Type.Literal(s))),
    attempts: Type.Integer(),
    responseStatus: Type.Union([Type.Integer(), Type.Null()]),
    lastError: Type.Union([Type.String(), Type.Null()]),
    nextAttemptAt: Type.Union([Type.String(), Type.Null()]),
    createdAt: Type.String(),
  }),
);
export const rotatedSecretSchema = Type.Object({
  ...webhookSchema.properties,
  secret: Type.String({
    description:
      'The new secret, `whsec_` and the base64 of 32 random bytes: in this answer only, never returned again',
  }),
  previousSecretExpiresAt: Type.Union([Type.String(), Type.Null()], {
    description:
      "Until then each delivery's webhook-signature also carries the previous secret's signature; null when the webhook had no secret",
  }),
});
export type WebhookView = Static<typeof webhookSchema>;
export type RotatedSecret = Static<typeof rotatedSecretSchema>;
export type DeliveryView = Static<typeof deliverySchema>;
export type RetryPolicy = Static<typeof retryPolicySchema>;
