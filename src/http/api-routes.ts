import type { IdentityService } from '../identity/identity-service.ts';
import { identityRoutes } from '../identity/identity.routes.ts';
import type { RouteDef } from './route.ts';

export interface ApiDeps {
  identity: IdentityService;
}

/** Every /api/v1 route of the product, in one table: the server, the OpenAPI document and the route matrices read it. */
export function apiRoutes(deps: ApiDeps): RouteDef[] {
  return [...identityRoutes(deps.identity)];
}
