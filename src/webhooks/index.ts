import type { Config } from '../config.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import { consumeEvents, type EventConsumer } from '../events/event-consumer.ts';
import type { EventStream } from '../events/event-stream.ts';
import type { Logger } from '../log.ts';
import type { Transport } from '../runtime/types.ts';
import type { Store } from '../store/collection.ts';
import { DeliveryAttempts } from './delivery-attempts.ts';
import { DeliveryLog } from './delivery-log.ts';
import { loadSecretBox } from './secret-box.ts';
import { WebhookRouter } from './webhook-router.ts';
import { WebhookSender } from './webhook-sender.ts';
import { WebhookService } from './webhook-service.ts';
import { webhookCollections, type WebhookCollections } from './webhook-store.ts';
import { webhookRoutes } from './webhooks.routes.ts';

/** Declared before the store's init, which creates their indexes. */
export function declareWebhookCollections(store: Store): WebhookCollections {
  return webhookCollections(store);
}

/** Webhooks wired: routes (every role), the delivery attempts the webhook actor makes, and on consuming processes the event router. */
export async function createWebhooks(deps: {
  config: Config;
  log: Logger;
  db: WebhookCollections;
  runtime: Transport;
  events: EventStream;
  cursors: ListCursors;
}) {
  const log = deps.log.child({ component: 'webhooks' });
  const cfg = deps.config.webhook;
  const box = await loadSecretBox(cfg.secretKey, deps.config.dataDir);
  const sender = new WebhookSender({ allowPrivate: cfg.allowPrivate, timeoutMs: cfg.timeoutMs });
  const deliveryLog = new DeliveryLog(deps.db.deliveries);
  const attempts = new DeliveryAttempts({
    db: deps.db,
    deliveryLog,
    box,
    sender,
    config: cfg,
    log,
  });
  const router = new WebhookRouter({ db: deps.db, runtime: deps.runtime });
  const service = new WebhookService({ db: deps.db, box, attempts, runtime: deps.runtime, config: cfg, log });
  let consumer: EventConsumer | undefined;
  return {
    box,
    service,
    attempts,
    routes: webhookRoutes(service, deps.cursors),
    /** Starts routing events to webhooks (worker and all roles), after the runtime started. */
    async startRouting(): Promise<void> {
      consumer = consumeEvents(deps.events, 'webhooks', deps.config.nodeId, (batch) => router.route(batch), log);
      await router.sweepAll();
    },
    async stopRouting(): Promise<void> {
      await consumer?.stop();
    },
    /** After the runtime stopped and the webhook actor's lanes let go: the delivery log's last batch is written, then connections close. */
    async close(): Promise<void> {
      await deliveryLog.flushed();
      sender.close();
    },
  };
}
