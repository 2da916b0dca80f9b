import { Type, type Static } from '@sinclair/typebox';
import { defineProtocol } from '../../runtime/actor.ts';

const id = Type.String({ minLength: 1, maxLength: 64 });
const delivery = Type.Object(
  {
    id,
    tenantId: id,
    webhookId: id,
    event: Type.String({ maxLength: 64 }),
    eventId: id,
    status: Type.Literal('pending'),
    attempts: Type.Integer({ minimum: 0 }),
    responseStatus: Type.Union([Type.Integer(), Type.Null()]),
    lastError: Type.Union([Type.String({ maxLength: 2_000 }), Type.Null()]),
    nextAttemptAt: Type.Union([Type.String({ maxLength: 40 }), Type.Null()]),
    payload: Type.String({ maxLength: 1_100_000 }),
    createdAt: Type.String({ maxLength: 40 }),
    updatedAt: Type.String({ maxLength: 40 }),
    traceparent: Type.Optional(Type.String({ maxLength: 128 })),
    tracestate: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);

export type PendingDelivery = Static<typeof delivery>;

/** Messages of the webhook actor (`webhook:<webhookId>`). */
export const webhookProtocol = defineProtocol(
  'webhook',
  {
    /** New deliveries of events the webhook subscribes to, just stored. */
    accept: { tenantId: id, deliveries: Type.Array(delivery, { maxItems: 1_000 }) },
    /** A timer: a failed delivery's next attempt is due. */
    retry: { tenantId: id, deliveryId: id },
    /** Look in the store for due deliveries nobody here is attempting (a timer while deliveries are pending; sent to every webhook when a worker starts). */
    sweep: { tenantId: id },
    /** The webhook was updated, toggled or deleted through the API, or a rotated secret's grace period ended (a timer). */
    changed: { tenantId: id },
  },
  // Messages written before the tenant had one name in code still read.
  { formerNames: { orgId: 'tenantId' } },
);
