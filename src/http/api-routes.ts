import { contactRoutes, type ContactsDeps } from '../contacts/index.ts';
import type { IdentityService } from '../identity/identity-service.ts';
import { identityRoutes } from '../identity/identity.routes.ts';
import { sessionRoutes } from '../identity/session.routes.ts';
import type { RelayRegistry } from '../relays/relay-registry.ts';
import { relayRoutes } from '../relays/relays.routes.ts';
import type { RouteDef } from './route.ts';

export interface ApiDeps {
  identity: IdentityService;
  /** Send path, history, conversations, phone numbers (src/messages/messaging.ts). */
  messaging: { routes: RouteDef[] };
  /** Bulk jobs (src/jobs). */
  jobs: { routes: RouteDef[] };
  /** Contacts, import/export and contact groups (src/contacts). */
  contacts: ContactsDeps;
  relays: RelayRegistry;
  /** How long a dashboard session's cookie lives (the refresh token's lifetime). */
  refreshTokenTtlMs: number;
}

/** Every /api/v1 route of the product, in one table: the server, the OpenAPI document and the route matrices read it. */
export function apiRoutes(deps: ApiDeps): RouteDef[] {
  return [...identityRoutes(deps.identity), ...sessionRoutes(deps.identity, deps.refreshTokenTtlMs), ...deps.jobs.routes, ...deps.messaging.routes, ...contactRoutes(deps.contacts), ...relayRoutes(deps.relays)];
}
