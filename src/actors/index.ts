import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import type { ActorDefinition } from '../runtime/types.ts';
import type { Store } from '../store/collection.ts';

export interface ActorDeps {
  store: Store;
  config: Config;
  log: Logger;
}

/** Every actor type the workers run; each lives in its own `<name>.actor.ts`. */
export function actorDefinitions(_deps: ActorDeps): ActorDefinition[] {
  return [];
}
