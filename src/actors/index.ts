import type { ActorDefinition } from '../runtime/types.ts';

/** Every actor type the workers run; each lives in its own `<name>.actor.ts`. */
export const actors: ActorDefinition[] = [];
