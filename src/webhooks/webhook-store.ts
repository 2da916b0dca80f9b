import type { Scope, Store } from '../store/collection.ts';
import type { SecretFormat } from './webhook-signing.ts';
import { digestId } from '../ids.ts';

export interface WebhookDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  url: string;
  events: string[];
  enabled: boolean;
  /** AES-256-GCM of the secret (secret-box.ts); the secret itself is never stored. */
  secretSealed: string | null;
  /** How the secret keys the signatures; absent on webhooks stored before `whsec_` keys, whose secrets keep signing `raw`. */
  secretFormat?: SecretFormat;
  /** The secret a rotation replaced (sealed too): it signs beside the current one until `until`, then it is dropped. */
  previousSecret?: PreviousSecret | null;
  /** Events from this instant on are delivered: set at creation and whenever it is enabled again. */
  activeSince: string;
  createdAt: string;
  updatedAt: string;
}

export interface PreviousSecret {
  sealed: string;
  format: SecretFormat;
  /** ISO time the grace period ends. */
  until: string;
}

export const deliveryStatuses = ['pending', 'succeeded', 'failed'] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];

export interface DeliveryDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  webhookId: string;
  event: string;
  /** The event's id, sent as `webhook-id` on every attempt. */
  eventId: string;
  status: DeliveryStatus;
  attempts: number;
  responseStatus: number | null;
  lastError: string | null;
  /** When the next attempt is due; null once the delivery is settled. */
  nextAttemptAt: string | null;
  /** The exact body sent on every attempt. */
  payload: string;
  /** The event's W3C trace context: each attempt sends it on with a span id of its own (`traceparent`, `tracestate`). */
  traceparent?: string;
  tracestate?: string;
  createdAt: string;
  updatedAt: string;
}

/** Platform-wide list of webhooks, so a restarted worker can find every webhook with deliveries left to make. */
export interface WebhookIndexDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  /** The tenant this entry points into (`tenantId` above is the platform scope); the stored name stays `orgId` so existing data reads. */
  orgId: string;
}

export function webhookCollections(store: Store) {
  return {
    webhooks: store.collection<WebhookDoc>('webhooks', [{ keys: { tenantId: 1, createdAt: 1 } }]),
    deliveries: store.collection<DeliveryDoc>('webhook_deliveries', [
      { keys: { tenantId: 1, webhookId: 1, createdAt: -1, id: 1 }, newestFirst: true },
      { keys: { tenantId: 1, webhookId: 1, status: 1, nextAttemptAt: 1 } },
    ]),
    index: store.collection<WebhookIndexDoc>('webhook_index'),
  };
}

export type WebhookCollections = ReturnType<typeof webhookCollections>;

export const orgScope = (tenantId: string): Scope => ({ tenantId });

/** One delivery per webhook and event, whoever creates it and however often: redelivered events make no duplicates. */
export function deliveryId(webhookId: string, eventId: string): string {
  return `whd_${digestId(`${webhookId}\u0000${eventId}`, 22)}`;
}
