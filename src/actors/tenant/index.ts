import type { ActorDefinition } from '../../runtime/types.ts';
import { tenantActor } from './tenant.actor.ts';
import { TenantDispatcher } from './tenant-dispatcher.ts';

/** The tenant actor over the stores and ports its dispatcher uses, and nothing else. */
export function createTenantActor(deps: ConstructorParameters<typeof TenantDispatcher>[0]): ActorDefinition {
  return tenantActor(new TenantDispatcher(deps));
}
