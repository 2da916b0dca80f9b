import type { ActorDefinition } from '../../runtime/types.ts';
import { automationActor } from './automation.actor.ts';
import { AutomationRunner } from './automation-runner.ts';

/** The automation actor over the stores and the actions its runner uses. */
export function createAutomationActor(deps: ConstructorParameters<typeof AutomationRunner>[0]): ActorDefinition {
  return automationActor(new AutomationRunner(deps));
}
