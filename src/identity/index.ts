import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Broadcast } from '../runtime/broadcast.ts';
import type { RateLimiter } from '../runtime/rate-limiter.ts';
import { IdentityService } from './identity-service.ts';
import type { IdentityCollections } from './identity-store.ts';
import { identityRoutes } from './identity.routes.ts';
import type { AccessTokens } from './jwt.ts';
import { requestAuth } from './request-auth.ts';
import { sessionRoutes } from './session.routes.ts';

export { identityCollections } from './identity-store.ts';
export { loadAccessTokens } from './jwt.ts';

/** Organizations, users, teams, API keys and sessions, wired: their routes and the authentication step every other route runs. */
export async function createIdentity(deps: {
  config: Config;
  log: Logger;
  db: IdentityCollections;
  tokens: AccessTokens;
  limiter: RateLimiter;
  broadcast: Broadcast;
}) {
  const service = new IdentityService(
    deps.db,
    deps.tokens,
    deps.limiter,
    deps.config.identity,
    deps.log.child({ component: 'identity' }),
    deps.broadcast,
  );
  await service.listenForRevocations();
  return {
    service,
    routes: [...identityRoutes(service), ...sessionRoutes(service, deps.config.identity.refreshTokenTtlMs)],
    hooks: requestAuth(service, deps.limiter, deps.config),
  };
}
