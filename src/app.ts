import { adminRoutes } from './admin/admin.routes.ts';
import { ShareWeightRefresh, shareWeightCollection } from './admin/share-weight-store.ts';
import { createAutomationActor } from './actors/automation/index.ts';
import { exposeDispatchMetrics } from './actors/dispatch-metrics.ts';
import { createJobActor } from './actors/job/index.ts';
import { createRelayActor } from './actors/relay/index.ts';
import { createTenantActor } from './actors/tenant/index.ts';
import { createWebhookActor } from './actors/webhook/index.ts';
import { createAutomations, declareAutomationCollections } from './automations/index.ts';
import type { Config } from './config.ts';
import { contactCollections, createContacts, type ContactDirectory } from './contacts/index.ts';
import { consumeEvents, type EventConsumer } from './events/event-consumer.ts';
import type { EventHistory } from './events/event-log.ts';
import type { EventStream } from './events/event-stream.ts';
import { createEventLog, createEventStream } from './events/index.ts';
import { Outbox } from './events/outbox.ts';
import { ListCursors } from './http/list-cursors.ts';
import { exposeRuntimeStats, exposeEventStreamLag } from './http/metrics.ts';
import type { AnsweredHook, RouteDef } from './http/route.ts';
import type { HttpServer } from './http/server.ts';
import { createIdentity, identityCollections, loadAccessTokens } from './identity/index.ts';
import { cancelledJobIds, createJobs, jobCollections } from './jobs/index.ts';
import type { Logger } from './log.ts';
import { createMessaging } from './messages/index.ts';
import { messagingCollections } from './messages/message-store.ts';
import { MessageRollups } from './messages/message-rollups.ts';
import { createRelays, relayCollections, RelayLink } from './relays/index.ts';
import {
  createBroadcast,
  createRateLimiter,
  createRedisConnection,
  createTransport,
  type Transport,
} from './runtime/index.ts';
import { createRequestLog, declareRequestLog, type RequestRecorder } from './request-log/index.ts';
import { createStore, type Store } from './store/index.ts';
import { createSuppressions, suppressionCollections } from './suppressions/index.ts';
import { availabilityCollection, createHandles } from './handles/index.ts';
import { createWebhooks, declareWebhookCollections } from './webhooks/index.ts';
import { attachRelayGateway, type RelayGateway } from './ws/relay-gateway.ts';
import { SimulatedRelays } from './relays/simulated-relay.ts';

/**
 * Everything a process of any role is made of, wired once; `main.ts` and the
 * in-process tests both build it here. This is the one composition root: the
 * adapters, every feature (each `create<Feature>` answers its routes), the
 * actors over the ports the features give them, and the route table.
 */
export interface App {
  config: Config;
  store: Store;
  runtime: Transport;
  events: EventStream;
  messaging: ReturnType<typeof createMessaging> & { link: RelayLink };
  webhooks: Awaited<ReturnType<typeof createWebhooks>>;
  automations: ReturnType<typeof createAutomations>;
  eventLog: EventHistory;
  /** Group recipients and participant names for messaging. */
  contacts: ContactDirectory;
  /** The relay WebSocket gateway on a frontend's server (web and all roles). */
  attachGateway(http: HttpServer): RelayGateway & { simulated: SimulatedRelays };
  /** What every frontend's answers are recorded by (GET /api/v1/request-log). */
  requestLog: RequestRecorder;
  routes: RouteDef[];
  hooks: Awaited<ReturnType<typeof createIdentity>>['hooks'] & { answered: AnsweredHook };
  close(): Promise<void>;
}

/** `observeStoreCommands`: a MongoDB store counts every command its driver sends (for the tests that count round trips). */
export async function createApp(
  config: Config,
  log: Logger,
  opts: { consume: boolean; observeStoreCommands?: boolean },
): Promise<App> {
  const store = createStore(
    {
      mongoUrl: config.mongoUrl,
      dataDir: config.dataDir,
      syncIntervalMs: config.storeSyncIntervalMs,
      cacheMb: config.storeCacheMb,
      walMaxMb: config.storeWalMaxMb,
      pingTimeoutMs: config.storePingTimeoutMs,
      mongoWrites: config.mongoWrites,
      observeCommands: opts.observeStoreCommands ?? false,
      mongoPaths: config.mongoPaths,
    },
    log,
  );
  // On Redis the transport and the event stream share one command connection: one socket and one auto-pipeline per process.
  const redis = createRedisConnection(config);
  const runtime = createTransport(config, log, redis);
  // Collections declare their indexes before init creates them.
  const identityDb = identityCollections(store);
  const db = { ...messagingCollections(store), ...relayCollections(store), ...jobCollections(store) };
  const contactsDb = contactCollections(store);
  const webhookDb = declareWebhookCollections(store);
  const automationDb = declareAutomationCollections(store);
  const requestChunks = declareRequestLog(store);
  const suppressionDb = suppressionCollections(store);
  const availabilityDb = availabilityCollection(store);
  const shareWeights = new ShareWeightRefresh(
    shareWeightCollection(store),
    log.child({ component: 'runtime' }),
    config.shareWeightRefreshMs,
  );
  const history = { retentionDays: config.eventRetentionDays, subjects: db.messages };
  const events = createEventStream(store, {
    redis: redis && {
      connection: redis.client,
      target: redis.target,
      key: redis.keys.events,
      replicaWaitMs: redis.replicaWaitMs,
    },
    dedupeTtlMs: config.runtime.dedupeTtlMs,
    claimIdleMs: config.eventClaimIdleMs,
    entryBatches: config.eventEntryBatches,
    history,
  });
  const eventLog = createEventLog(store, events, history);
  const relays = createRelays(store, { dataDir: config.dataDir, publicBaseUrl: config.publicBaseUrl });
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
  const identity = await createIdentity({ config, log, db: identityDb, tokens, limiter: rate.limiter, broadcast });
  const suppressions = await createSuppressions({ config, log, db: suppressionDb, events, broadcast });
  const cursors = new ListCursors(eventLog.cursors);
  const contacts = createContacts(contactsDb, cursors);
  const requestLog = createRequestLog(
    requestChunks,
    cursors,
    { maxEntries: config.requestLogMaxEntries },
    log.child({ component: 'request-log' }),
  );
  const outbox = new Outbox(events, log.child({ component: 'messaging' }));
  const link = new RelayLink(runtime);
  const handles = createHandles({
    config,
    availability: availabilityDb,
    relays: db.relays,
    link,
    limiter: rate.limiter,
  });
  const rollups = new MessageRollups(db.rollups, log.child({ component: 'messaging' }), {
    coalesce: store.kind !== 'embedded',
  });
  const messaging = createMessaging({
    config,
    log,
    db,
    runtime,
    outbox,
    rollups,
    tokens,
    contacts: contacts.directory,
    cursors,
    optOuts: suppressions.list,
    files: (bucket) => store.files(bucket),
    relay: (credential) => relays.registry.authenticate(credential),
  });
  const jobs = createJobs({ config, log, db, runtime, events, rollups, cursors, optOuts: suppressions.list });
  const webhooks = await createWebhooks({ config, log, db: webhookDb, runtime, events, cursors });
  const automations = createAutomations({
    config,
    log,
    db: automationDb,
    messages: db.messages,
    contacts: contactsDb.contacts,
    send: messaging.send,
    box: webhooks.box,
    runtime,
    events,
    cursors,
  });
  // Every role registers every actor type: senders need each type's shards and schemas.
  const jobActor = createJobActor({
    db,
    events,
    runtime,
    log: log.child({ component: 'jobs' }),
    trackMs: config.jobTrackMs,
    optOuts: suppressions.list,
  });
  const webhookActor = createWebhookActor({
    attempts: webhooks.attempts,
    db: webhookDb,
    runtime,
    config: config.webhook,
    log: log.child({ component: 'webhooks' }),
  });
  const actors = [
    createTenantActor({
      config,
      db,
      outbox,
      rollups,
      closedSources: (tenantId, closed) => cancelledJobIds(db, tenantId, closed),
    }),
    createRelayActor({
      db,
      outbox,
      rollups,
      link,
      sendTimeoutMs: config.messageSendTimeoutMs,
      heartbeatTimeoutMs: config.relayHeartbeatTimeoutMs,
      batchReports: config.relayReportBatches,
      keywords: suppressions.keywords(async (to, text) => {
        const principal = { tenantId: to.tenantId, teamId: to.teamId, role: 'member' as const };
        await messaging.send.sendHelpText(principal, to.handle, text, to.messageId);
      }),
    }),
    jobActor.definition,
    webhookActor.definition,
    createAutomationActor({
      db: automationDb,
      actions: automations.actions,
      webhook: config.webhook,
      log: log.child({ component: 'automations' }),
    }),
  ];

  // Bulk work takes turns by organization, at the weights the operator set: read before the first message is served.
  if (opts.consume) await shareWeights.start();
  await runtime.start(actors, { consume: opts.consume });
  if (opts.consume) await jobActor.recoverTimers();
  if (opts.consume) exposeDispatchMetrics(runtime);
  exposeRuntimeStats(() => runtime.stats());
  const consumers: EventConsumer[] = [];
  if (opts.consume) {
    // A stream kept in the store is the history itself; a Redis stream is copied into it by a consumer group.
    if (eventLog.record)
      consumers.push(
        consumeEvents(events, 'event-log', config.nodeId, eventLog.record, log.child({ component: 'event-log' })),
      );
    await webhooks.startRouting();
    automations.startRouting();
    exposeEventStreamLag(() => events.lag());
  }
  return {
    config,
    store,
    runtime,
    events,
    messaging: { ...messaging, link },
    webhooks,
    automations,
    eventLog: eventLog.log,
    contacts: contacts.directory,
    requestLog: requestLog.recorder,
    attachGateway: (http) => {
      const gateway = attachRelayGateway(
        http.app,
        { registry: relays.registry, runtime, link, log },
        {
          heartbeatIntervalMs: config.relayHeartbeatIntervalMs,
          helloTimeoutMs: config.relayHelloTimeoutMs,
          maxBadFrames: config.relayMaxBadFrames,
          maxBackpressureBytes: config.relayMaxBackpressureBytes,
          batchReports: config.relayReportBatches,
        },
      );
      // Test data is sent by a relay built in, held where relay sockets are: connected by the test requests this frontend answers.
      const simulated = new SimulatedRelays({
        runtime,
        link,
        db,
        heartbeatIntervalMs: config.relayHeartbeatIntervalMs,
        heartbeatTimeoutMs: config.relayHeartbeatTimeoutMs,
        log: log.child({ component: 'simulated-relay' }),
      });
      identity.service.onTestCaller((tenantId, teamId) => simulated.use(tenantId, teamId));
      return {
        get connected() {
          return gateway.connected;
        },
        simulated,
        async close() {
          await simulated.close();
          await gateway.close();
        },
      };
    },
    // Every route of the product in one table: the server, the OpenAPI document and the route matrices read it.
    // Order matters where paths overlap (POST /api/v1/messages/bulk before /api/v1/messages/:id).
    routes: [
      ...identity.routes,
      ...jobs.routes,
      ...messaging.routes,
      ...contacts.routes,
      ...relays.routes,
      ...webhooks.routes,
      ...automations.routes,
      ...suppressions.routes,
      ...handles.routes,
      ...eventLog.routes,
      ...requestLog.routes,
      ...adminRoutes({
        organizations: identityDb.organizations,
        messages: db.messages,
        rollups: db.rollups,
        deliveries: webhookDb.deliveries,
      }),
    ],
    hooks: { ...identity.hooks, answered: requestLog.answered },
    async close() {
      // Sends answered 201 finish their background work (events published, messages queued) while the runtime still runs.
      await messaging.settled();
      await webhooks.stopRouting();
      await automations.stopRouting();
      await Promise.all(consumers.map((c) => c.stop()));
      // Let actors finish and acknowledge before closing the store they write to.
      await runtime.stop();
      shareWeights.stop();
      await redis?.client.quit().catch(() => undefined);
      // The runtime hands the webhook actors no more messages: the deliveries still running are let go.
      await webhookActor.stop();
      await rollups.settled();
      await requestLog.recorder.close();
      await webhooks.close();
      automations.close();
      await rate.close();
      await broadcast.close();
      await store.close();
    },
  };
}
