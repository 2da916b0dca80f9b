import { Counter, register } from 'prom-client';

function singleton<T>(name: string, make: () => T): T {
  return (register.getSingleMetric(name) as T | undefined) ?? make();
}

/** Executions by outcome: not_matched (logged, no action), succeeded (no action failed), failed (an action failed). */
export const executionOutcomes = singleton(
  'relaybox_automation_executions_total',
  () =>
    new Counter({
      name: 'relaybox_automation_executions_total',
      help: 'Automation executions by outcome (not_matched, succeeded, failed)',
      labelNames: ['outcome'],
    }),
);

/** Settled action outcomes by action type and status (succeeded, failed, skipped); HTTP actions count once, when they settle. */
export const actionOutcomes = singleton(
  'relaybox_automation_actions_total',
  () =>
    new Counter({
      name: 'relaybox_automation_actions_total',
      help: 'Automation action outcomes by type and status (succeeded, failed, skipped)',
      labelNames: ['type', 'status'],
    }),
);
