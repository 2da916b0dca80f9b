import type { Role } from '../roles.ts';
import type { RouteDef } from './route.ts';

/** Reading needs a viewer, writing a member, unless the route asks for more. */
export function neededRole(def: RouteDef): Role {
  return def.minRole ?? (def.method === 'GET' ? 'viewer' : 'member');
}
