import { defineActor } from '../../runtime/actor.ts';
import { webhookProtocol } from './protocol.ts';
import type { WebhookLanes, WebhookState } from './webhook-lanes.ts';

/**
 * One actor per webhook. Its state is the webhook as attempts use it
 * (secrets opened into keys); its deliveries run in the webhook's lane
 * (webhook-lanes.ts), up to WEBHOOK_CONCURRENCY at once, outside the handler,
 * so a slow endpoint never holds the actor's shard.
 */
export function webhookActor(lanes: WebhookLanes) {
  return defineActor<typeof webhookProtocol, WebhookState>(webhookProtocol, {
    activate: async (ctx) => ({ hook: await lanes.load(ctx.key) }),
    handlers: {
      accept: (ctx, m) => lanes.accept(ctx, m.tenantId, m.deliveries),
      retry: (ctx, m) => lanes.retry(ctx, m.tenantId, m.deliveryId),
      sweep: (ctx, m) => lanes.sweep(ctx, m.tenantId),
      changed: (ctx, m) => lanes.changed(ctx, m.tenantId),
    },
  });
}
