import type { Config } from '../config.ts';
import type { RelayLink } from '../relays/relay-link.ts';
import type { RelayDoc } from '../relays/relay-store.ts';
import type { RateLimiter } from '../runtime/rate-limiter.ts';
import type { Collection } from '../store/collection.ts';
import { HandleAvailability, type AvailabilityDoc } from './handle-availability.ts';
import { handleRoutes } from './handles.routes.ts';

export { availabilityCollection } from './handle-availability.ts';

/** Capability lookups, wired: asked through the relays' link, paid from each relay's budget, kept in the store. */
export function createHandles(deps: {
  config: Pick<Config, 'handleLookup'>;
  availability: Collection<AvailabilityDoc>;
  relays: Collection<RelayDoc>;
  link: RelayLink;
  limiter: RateLimiter;
}) {
  const availability = new HandleAvailability({
    availability: deps.availability,
    relays: deps.relays,
    link: deps.link,
    limiter: deps.limiter,
    settings: deps.config.handleLookup,
  });
  return { availability, routes: handleRoutes(availability) };
}
