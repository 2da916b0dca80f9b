import type { Store } from '../store/collection.ts';
import { RelayRegistry } from './relay-registry.ts';
import { relayRoutes } from './relays.routes.ts';

export { RelayLink } from './relay-link.ts';
export { relayCollections } from './relay-store.ts';

/** Relay registration and the relay list, wired: their routes, and the registry the WebSocket gateway checks credentials against. Declared before the store's init. */
export function createRelays(store: Store) {
  const registry = new RelayRegistry(store);
  return { registry, routes: relayRoutes(registry) };
}
