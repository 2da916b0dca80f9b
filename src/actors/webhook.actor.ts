import { Type, type Static } from '@sinclair/typebox';
import { defineActor, defineProtocol } from '../runtime/actor.ts';
import type { LoadedWebhook } from '../webhooks/delivery-attempts.ts';
import type { WebhookLanes } from '../webhooks/webhook-lanes.ts';
import type { DeliveryDoc } from '../webhooks/webhook-store.ts';

const id = Type.String({ minLength: 1, maxLength: 64 });
const delivery = Type.Object({
  id, tenantId: id, webhookId: id, event: Type.String({ maxLength: 64 }), eventId: id,
  status: Type.Literal('pending'), attempts: Type.Integer({ minimum: 0 }),
  responseStatus: Type.Union([Type.Integer(), Type.Null()]), lastError: Type.Union([Type.String({ maxLength: 2_000 }), Type.Null()]),
  nextAttemptAt: Type.Union([Type.String({ maxLength: 40 }), Type.Null()]), payload: Type.String({ maxLength: 1_100_000 }),
  createdAt: Type.String({ maxLength: 40 }), updatedAt: Type.String({ maxLength: 40 }),
}, { additionalProperties: false });

export type PendingDelivery = Static<typeof delivery>;

/** Messages of the webhook actor (`webhook:<webhookId>`). */
export const webhookProtocol = defineProtocol('webhook', {
  /** New deliveries of events the webhook subscribes to, just stored. */
  accept: { orgId: id, deliveries: Type.Array(delivery, { maxItems: 1_000 }) },
  /** A timer: a failed delivery's next attempt is due. */
  retry: { orgId: id, deliveryId: id },
  /** Look in the store for due deliveries nobody here is attempting (a timer while deliveries are pending; sent to every webhook when a worker starts). */
  sweep: { orgId: id },
  /** The webhook was updated, toggled or deleted through the API. */
  changed: { orgId: id },
});

/** The actor's state: the webhook as its attempts use it (null once deleted). */
export interface WebhookState {
  hook: LoadedWebhook | null;
}

/**
 * One actor per webhook. Its state is the webhook as attempts use it (secret
 * opened); its deliveries run in the webhook's lane (webhook-lanes.ts), up to
 * WEBHOOK_CONCURRENCY at once, outside the handler, so a slow endpoint never
 * holds the actor's shard.
 */
export function webhookActor(lanes: WebhookLanes) {
  return defineActor<typeof webhookProtocol, WebhookState>(webhookProtocol, {
    activate: async (ctx) => ({ hook: await lanes.load(ctx.key) }),
    handlers: {
      accept: (ctx, m) => lanes.accept(ctx, m.orgId, m.deliveries as DeliveryDoc[]),
      retry: (ctx, m) => lanes.retry(ctx, m.orgId, m.deliveryId),
      sweep: (ctx, m) => lanes.sweep(ctx, m.orgId),
      changed: (ctx, m) => lanes.changed(ctx, m.orgId),
    },
  });
}
