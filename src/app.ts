import type { Config } from './config.ts';
import { contactCollections, createContacts, type ContactDirectory } from './contacts/index.ts';
import { apiRoutes } from './http/api-routes.ts';
import type { RouteDef } from './http/route.ts';
import { IdentityService } from './identity/identity-service.ts';
import { identityCollections } from './identity/identity-store.ts';
import { loadAccessTokens } from './identity/jwt.ts';
import { requestAuth } from './identity/request-auth.ts';
import type { Logger } from './log.ts';
import { createEventStream, createRateLimiter, createTransport, type RateLimiter, type Transport } from './runtime/index.ts';
import type { EventStream } from './events/event-stream.ts';
import { createMessaging } from './messages/messaging.ts';
import { messagingCollections } from './messages/message-store.ts';
import { relayCollections } from './relays/relay-store.ts';
import { RelayRegistry } from './relays/relay-registry.ts';
import { attachRelayGateway, type RelayGateway } from './ws/relay-gateway.ts';
import type { HttpServer } from './http/server.ts';
import { exposeRuntimeStats } from './http/metrics.ts';
import { createStore, type Store } from './store/index.ts';

/** Everything a process of any role is made of, wired once; `main.ts` and the in-process tests both build it here. */
export interface App {
  config: Config;
  log: Logger;
  store: Store;
  runtime: Transport;
  limiter: RateLimiter;
  identity: IdentityService;
  events: EventStream;
  messaging: ReturnType<typeof createMessaging>;
  /** Group recipients and participant names for messaging. */
  contacts: ContactDirectory;
  relays: RelayRegistry;
  /** The relay WebSocket gateway on a frontend's server (web and all roles). */
  attachGateway(http: HttpServer): RelayGateway;
  routes: RouteDef[];
  hooks: ReturnType<typeof requestAuth>;
  close(): Promise<void>;
}

export async function createApp(config: Config, log: Logger, opts: { consume: boolean }): Promise<App> {
  const store = createStore({ mongoUrl: config.mongoUrl, dataDir: config.dataDir, syncIntervalMs: config.storeSyncIntervalMs }, log);
  const runtime = createTransport(config, log);
  // Collections declare their indexes before init creates them.
  const identityDb = identityCollections(store);
  const db = { ...messagingCollections(store), ...relayCollections(store) };
  const contactsDb = contactCollections(store);
  const events = createEventStream(runtime, store, config.runtime.keyPrefix);
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
  const identity = new IdentityService(identityDb, tokens, rate.limiter, config.identity, log.child({ component: 'identity' }));
  const contacts = createContacts(contactsDb);
  const messaging = createMessaging({ config, log, db, runtime, events, tokens, contacts: contacts.directory });
  await runtime.start([messaging.actor], { consume: opts.consume });
  exposeRuntimeStats(() => runtime.stats());
  return {
    config,
    log,
    store,
    runtime,
    limiter: rate.limiter,
    identity,
    events,
    messaging,
    relays,
    contacts: contacts.directory,
    attachGateway: (http) => attachRelayGateway(http.app, { registry: relays, runtime, link: messaging.link, log }, { heartbeatIntervalMs: config.relayHeartbeatIntervalMs }),
    routes: apiRoutes({ identity, messaging, contacts, relays }),
    hooks: requestAuth(identity, rate.limiter, config),
    async close() {
      // Let actors finish and acknowledge before closing the store they write to.
      await runtime.stop();
      await rate.close();
      await store.close();
    },
  };
}
