import type { Config } from './config.ts';
import { contactCollections, createContacts, type ContactDirectory } from './contacts/index.ts';
import { apiRoutes } from './http/api-routes.ts';
import type { RouteDef } from './http/route.ts';
import { IdentityService } from './identity/identity-service.ts';
import { identityCollections } from './identity/identity-store.ts';
import { loadAccessTokens } from './identity/jwt.ts';
import { requestAuth } from './identity/request-auth.ts';
import type { Logger } from './log.ts';
import { createBroadcast, createEventStream, createRateLimiter, createTransport, type RateLimiter, type Transport } from './runtime/index.ts';
import type { EventStream } from './events/event-stream.ts';
import { cancelledJobIds, createJobs, jobCollections } from './jobs/index.ts';
import { createMessaging } from './messages/messaging.ts';
import { messagingCollections } from './messages/message-store.ts';
import { relayCollections } from './relays/relay-store.ts';
import { RelayRegistry } from './relays/relay-registry.ts';
import { attachRelayGateway, type RelayGateway } from './ws/relay-gateway.ts';
import type { HttpServer } from './http/server.ts';
import { exposeRuntimeStats } from './http/metrics.ts';
import { createStore, type Store } from './store/index.ts';
import { consumeEvents, type EventConsumer } from './events/event-consumer.ts';
import { cursorKeysCollection, EventCursors } from './events/event-cursor.ts';
import { EventLog, eventLogCollection } from './events/event-log.ts';
import { eventRoutes } from './events/events.routes.ts';
import { createWebhooks, declareWebhookCollections } from './webhooks/index.ts';
import { createAutomations, declareAutomationCollections } from './automations/index.ts';

/** Everything a process of any role is made of, wired once; `main.ts` and the in-process tests both build it here. */
export interface App {
  config: Config;
  store: Store;
  runtime: Transport;
  events: EventStream;
  messaging: ReturnType<typeof createMessaging>;
  webhooks: Awaited<ReturnType<typeof createWebhooks>>;
  automations: ReturnType<typeof createAutomations>;
  eventLog: EventLog;
  /** Group recipients and participant names for messaging. */
  contacts: ContactDirectory;
  /** The relay WebSocket gateway on a frontend's server (web and all roles). */
  attachGateway(http: HttpServer): RelayGateway;
  routes: RouteDef[];
  hooks: ReturnType<typeof requestAuth>;
  close(): Promise<void>;
}

export async function createApp(config: Config, log: Logger, opts: { consume: boolean }): Promise<App> {
  const store = createStore({ mongoUrl: config.mongoUrl, dataDir: config.dataDir, syncIntervalMs: config.storeSyncIntervalMs, cacheMb: config.storeCacheMb, walMaxMb: config.storeWalMaxMb, pingTimeoutMs: config.storePingTimeoutMs }, log);
  const runtime = createTransport(config, log);
  // Collections declare their indexes before init creates them.
  const identityDb = identityCollections(store);
  const db = { ...messagingCollections(store), ...relayCollections(store), ...jobCollections(store) };
  const contactsDb = contactCollections(store);
  const webhookDb = declareWebhookCollections(store);
  const automationDb = declareAutomationCollections(store);
  const eventLog = new EventLog(eventLogCollection(store), config.eventRetentionDays, new EventCursors(cursorKeysCollection(store)));
  const events = createEventStream(runtime, store, config.runtime, config.eventClaimIdleMs);
  const relays = new RelayRegistry(store);
  await store.init();
  const rate = createRateLimiter(config);
  const tokens = await loadAccessTokens({
    issuer: config.identity.jwtIssuer,
    audience: config.identity.jwtAudience,
    accessTokenTtlSeconds: config.identity.accessTokenTtlSeconds,
    privateKeyPem: config.identity.jwtPrivateKeyPem,
    publicKeyPem: config.identity.jwtPublicKeyPem,
    dataDir: config.dataDir,
  });
  const broadcast = createBroadcast(config, log);
  const identity = new IdentityService(identityDb, tokens, rate.limiter, config.identity, log.child({ component: 'identity' }), broadcast);
  await identity.listenForRevocations();
  const contacts = createContacts(contactsDb);
  const messaging = createMessaging({ config, log, db, runtime, events, tokens, contacts: contacts.directory, closedSources: (orgId) => cancelledJobIds(db, orgId) });
  const jobs = createJobs({ config, log, db, runtime, events });
  const webhooks = await createWebhooks({ config, log, db: webhookDb, runtime, events });
  // Every role registers every actor type: senders need each type's shards and message schemas too.
  const automations = createAutomations({
    config, log, db: automationDb, messages: db.messages, contacts: contactsDb.contacts, send: messaging.send, box: webhooks.box, runtime, events,
  });
  await runtime.start([...messaging.actors, jobs.actor, webhooks.actor, automations.actor], { consume: opts.consume });
  if (opts.consume) await jobs.recoverTimers();
  exposeRuntimeStats(() => runtime.stats());
  const consumers: EventConsumer[] = [];
  if (opts.consume) {
    consumers.push(consumeEvents(events, 'event-log', config.nodeId, (batch) => eventLog.record(batch), log.child({ component: 'event-log' })));
    await webhooks.startRouting();
    automations.startRouting();
  }
  return {
    config,
    store,
    runtime,
    events,
    messaging,
    webhooks,
    automations,
    eventLog,
    contacts: contacts.directory,
    attachGateway: (http) => attachRelayGateway(http.app, { registry: relays, runtime, link: messaging.link, log }, {
      heartbeatIntervalMs: config.relayHeartbeatIntervalMs,
      helloTimeoutMs: config.relayHelloTimeoutMs,
      maxBadFrames: config.relayMaxBadFrames,
      maxBackpressureBytes: config.relayMaxBackpressureBytes,
    }),
    routes: [...apiRoutes({ identity, messaging, jobs, contacts, relays, refreshTokenTtlMs: config.identity.refreshTokenTtlMs }), ...webhooks.routes, ...automations.routes, ...eventRoutes(eventLog)],
    hooks: requestAuth(identity, rate.limiter, config),
    async close() {
      await webhooks.stopRouting();
      await automations.stopRouting();
      await Promise.all(consumers.map((c) => c.stop()));
      // Let actors finish and acknowledge before closing the store they write to.
      await runtime.stop();
      await webhooks.close();
      automations.close();
      await rate.close();
      await broadcast.close();
      await store.close();
    },
  };
}
