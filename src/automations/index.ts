import type { Config } from '../config.ts';
import type { ListCursors } from '../http/list-cursors.ts';
import type { ContactCollections } from '../contacts/contact-store.ts';
import { consumeEvents, type EventConsumer } from '../events/event-consumer.ts';
import type { EventStream } from '../events/event-stream.ts';
import type { Logger } from '../log.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import type { SendService } from '../messages/send-service.ts';
import type { Transport } from '../runtime/types.ts';
import type { Store } from '../store/collection.ts';
import type { SecretBox } from '../webhooks/secret-box.ts';
import { WebhookSender } from '../webhooks/webhook-sender.ts';
import { AutomationActions } from './automation-actions.ts';
import { AutomationRouter } from './automation-router.ts';
import { AutomationService } from './automation-service.ts';
import { automationCollections, type AutomationCollections } from './automation-store.ts';
import { automationRoutes } from './automations.routes.ts';

/** Declared before the store's init, which creates their indexes. */
export function declareAutomationCollections(store: Store): AutomationCollections {
  return automationCollections(store);
}

/** Automations wired: routes (every role), the actions the automation actor performs, and on consuming processes the event router. */
export function createAutomations(deps: {
  config: Config;
  log: Logger;
  db: AutomationCollections;
  messages: MessagingCollections['messages'];
  contacts: ContactCollections['contacts'];
  send: SendService;
  box: SecretBox;
  runtime: Transport;
  events: EventStream;
  cursors: ListCursors;
}) {
  const log = deps.log.child({ component: 'automations' });
  const webhook = deps.config.webhook;
  // The webhooks' own sender class: the same address guard, pinning, timeout and no redirects.
  const sender = new WebhookSender({ allowPrivate: webhook.allowPrivate, timeoutMs: webhook.timeoutMs });
  const actions = new AutomationActions({
    messages: deps.messages,
    contacts: deps.contacts,
    send: deps.send,
    sender,
    box: deps.box,
    repliesPerConversationPerHour: deps.config.automationRepliesPerConversationPerHour,
  });
  const router = new AutomationRouter({ db: deps.db, messages: deps.messages, runtime: deps.runtime });
  const service = new AutomationService({ db: deps.db, box: deps.box, webhook });
  let consumer: EventConsumer | undefined;
  return {
    service,
    actions,
    routes: automationRoutes(service, deps.cursors),
    /** Starts reading message events (worker and all roles), after the runtime started. */
    startRouting(): void {
      consumer = consumeEvents(deps.events, 'automations', deps.config.nodeId, (batch) => router.route(batch), log);
    },
    async stopRouting(): Promise<void> {
      await consumer?.stop();
    },
    close(): void {
      sender.close();
    },
  };
}
