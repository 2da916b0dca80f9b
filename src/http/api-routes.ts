import type { RouteDef } from './route.ts';

/** Every /api/v1 route of the product, in one table: the server, the OpenAPI document and the route matrices read it. */
export function apiRoutes(): RouteDef[] {
  return [];
}
