import { defineActor } from '../../runtime/actor.ts';
import type { AutomationRunner } from './automation-runner.ts';
import { automationProtocol } from './protocol.ts';

/** Stateless: every message reads its execution from the store, the one truth about what was done. */
export function automationActor(runner: AutomationRunner) {
  return defineActor<typeof automationProtocol, undefined>(automationProtocol, {
    handlers: {
      run: (ctx, m) => runner.run(ctx, m.tenantId, m.executionId),
      retry: (ctx, m) => runner.retry(ctx, m.tenantId, m.executionId, m.index),
    },
  });
}
