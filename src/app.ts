import { actorDefinitions } from './actors/index.ts';
import type { Config } from './config.ts';
import { apiRoutes } from './http/api-routes.ts';
import type { RouteDef } from './http/route.ts';
import { IdentityService } from './identity/identity-service.ts';
import { identityCollections } from './identity/identity-store.ts';
import { loadAccessTokens } from './identity/jwt.ts';
import { requestAuth } from './identity/request-auth.ts';
import type { Logger } from './log.ts';
import { createRateLimiter, createTransport, type RateLimiter, type Transport } from './runtime/index.ts';
import { createStore, type Store } from './store/index.ts';

/** Everything a process of any role is made of, wired once; `main.ts` and the in-process tests both build it here. */
export interface App {
  config: Config;
  log: Logger;
  store: Store;
  runtime: Transport;
  limiter: RateLimiter;
  identity: IdentityService;
  routes: RouteDef[];
  hooks: ReturnType<typeof requestAuth>;
  close(): Promise<void>;
}

export async function createApp(config: Config, log: Logger, opts: { consume: boolean }): Promise<App> {
  const store = createStore({ mongoUrl: config.mongoUrl, dataDir: config.dataDir }, log);
  const identityDb = identityCollections(store);
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
  const runtime = createTransport(config, log);
  await runtime.start(actorDefinitions({ store, config, log }), { consume: opts.consume });
  return {
    config,
    log,
    store,
    runtime,
    limiter: rate.limiter,
    identity,
    routes: apiRoutes({ identity }),
    hooks: requestAuth(identity, rate.limiter, config),
    async close() {
      // Let actors finish and acknowledge before closing the store they write to.
      await runtime.stop();
      await rate.close();
      await store.close();
    },
  };
}
