import { join } from 'node:path';
import type { Store } from '../store/collection.ts';
import { agentDownloadRoutes } from './agent-downloads.routes.ts';
import { AgentPackages } from './agent-package.ts';
import { RelayRegistry } from './relay-registry.ts';
import { relayRoutes } from './relays.routes.ts';

export { RelayLink } from './relay-link.ts';
export { relayCollections } from './relay-store.ts';

/**
 * Relay registration, the relay list and the relay agent's downloads, wired: their routes, and the
 * registry the WebSocket gateway checks credentials against. Declared before the store's init.
 * The agent's package is built under `<dataDir>/build`.
 */
export function createRelays(store: Store, opts: { dataDir: string; publicBaseUrl: string | undefined }) {
  const registry = new RelayRegistry(store);
  const packages = new AgentPackages(join(opts.dataDir, 'build'));
  const baseUrl = (host: string | undefined) => opts.publicBaseUrl ?? `http://${host ?? 'localhost'}`;
  return { registry, routes: [...relayRoutes(registry), ...agentDownloadRoutes(packages, baseUrl)] };
}
