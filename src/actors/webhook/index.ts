import type { ActorDefinition } from '../../runtime/types.ts';
import { exposePendingDeliveries } from '../../webhooks/webhook-metrics.ts';
import { webhookActor } from './webhook.actor.ts';
import { WebhookLanes } from './webhook-lanes.ts';

/** The webhook actor over its deliveries' lanes; `stop` lets go of the deliveries still running once the runtime hands it no more messages. */
export function createWebhookActor(deps: ConstructorParameters<typeof WebhookLanes>[0]): {
  definition: ActorDefinition;
  stop(): Promise<void>;
} {
  const lanes = new WebhookLanes(deps);
  exposePendingDeliveries(() => lanes.size);
  return { definition: webhookActor(lanes), stop: () => lanes.stop() };
}
