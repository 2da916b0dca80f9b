import { Type, type Static } from '@sinclair/typebox';
import { eventNames } from '../events/event-stream.ts';
import { keysetPaginationQuery, pageOrAfter } from '../http/pagination.ts';
import { strictObject } from '../http/validation.ts';
import { deliveryStatuses } from './webhook-store.ts';

export const testEventName = 'webhook.test';

const eventName = Type.Union(eventNames.map((n) => Type.Literal(n)));
const url = Type.String({ minLength: 1, maxLength: 2048, description: 'http(s) URL of a public address' });
const events = Type.Array(eventName, { minItems: 1, maxItems: eventNames.length, uniqueItems: true });
const secret = Type.String({ minLength: 1, maxLength: 256, description: 'Shared secret for the signatures; stored encrypted, never returned' });

export const webhookCreateBody = strictObject({ url, events, secret: Type.Optional(secret) });
export const webhookUpdateBody = strictObject(
  { url: Type.Optional(url), events: Type.Optional(events), secret: Type.Optional(Type.Union([secret, Type.Null()], { description: 'null removes the secret' })) },
  { minProperties: 1 },
);
export type WebhookCreate = Static<typeof webhookCreateBody>;
export type WebhookUpdate = Static<typeof webhookUpdateBody>;

export const webhookIdParams = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const deliveryParams = strictObject({ id: Type.String({ minLength: 1, maxLength: 64 }), deliveryId: Type.String({ minLength: 1, maxLength: 64 }) });

export const deliveryListQuery = strictObject({
  ...keysetPaginationQuery,
  status: Type.Optional(Type.Union(deliveryStatuses.map((s) => Type.Literal(s)))),
  event: Type.Optional(Type.Union([eventName, Type.Literal(testEventName)])),
}, pageOrAfter);

export const webhookSchema = Type.Object({
  id: Type.String(), url: Type.String(), events: Type.Array(Type.String()), enabled: Type.Boolean(),
  hasSecret: Type.Boolean(), createdAt: Type.String(), updatedAt: Type.String(),
});

export const deliverySchema = Type.Object({
  id: Type.String(), event: Type.String(), eventId: Type.String({ description: 'Sent as webhook-id on every attempt' }),
  status: Type.Union(deliveryStatuses.map((s) => Type.Literal(s))), attempts: Type.Integer(),
  responseStatus: Type.Union([Type.Integer(), Type.Null()]), lastError: Type.Union([Type.String(), Type.Null()]),
  nextAttemptAt: Type.Union([Type.String(), Type.Null()]), createdAt: Type.String(),
});
export type WebhookView = Static<typeof webhookSchema>;
export type DeliveryView = Static<typeof deliverySchema>;
