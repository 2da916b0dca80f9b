import { automationProtocol } from './protocol.ts';
import type { WebhookConfig } from '../../config.ts';
import { nowIso } from '../../ids.ts';
import type { Logger } from '../../log.ts';
import type { ActorContext } from '../../runtime/actor.ts';
import { nextStep } from '../../webhooks/retry-schedule.ts';
import type { AutomationActions } from '../../automations/automation-actions.ts';
import { actionOutcomes, executionOutcomes } from '../../automations/automation-metrics.ts';
import type { ActionStatus } from '../../automations/automation-schemas.ts';
import { orgScope, type AutomationCollections, type ExecutionDoc } from '../../automations/automation-store.ts';

type Ctx = ActorContext<undefined>;

/**
 * Performs an execution's actions in order, recording each outcome as it
 * settles. The stored execution is the truth: a run delivered again (a worker
 * died mid-run) performs only the actions still `pending`, and each performer
 * is safe to repeat for the action it may have done just before the crash.
 * HTTP actions that fail are `retrying` on the webhook schedule (durable
 * timers of the runtime), and the execution is done without waiting for them.
 */
export class AutomationRunner {
  constructor(
    private readonly deps: {
      db: AutomationCollections;
      actions: AutomationActions;
      webhook: WebhookConfig;
      log: Logger;
    },
  ) {}

  async run(ctx: Ctx, tenantId: string, executionId: string): Promise<void> {
    const exec = await this.deps.db.executions.findOne(orgScope(tenantId), { id: executionId });
    if (!exec || exec.state === 'done') return;
    const automation = await this.deps.db.automations.findOne(orgScope(tenantId), { id: exec.automationId });
    if (!automation) return;
    // The last action's outcome, when it settles here, is written by the update that marks the execution done.
    let unwritten: number | undefined;
    const last = exec.actions.length - 1;
    for (const [index, outcome] of exec.actions.entries()) {
      // A run cut short between recording `retrying` and setting its timer: set it again (the attempt count guards a double).
      if (outcome.status === 'retrying' && ctx.delivery > 1) {
        await ctx.send(automationProtocol, ctx.key, { kind: 'retry', tenantId, executionId, index });
      }
      if (outcome.status !== 'pending') continue;
      const action = automation.actions[index];
      const write = index !== last;
      if (!write) unwritten = index;
      if (!action || action.type !== outcome.type) {
        await this.settle(exec, index, 'failed', 'the automation was changed before this action ran', write);
        continue;
      }
      switch (action.type) {
        case 'send_reply': {
          const r = await this.deps.actions.reply(exec, action, index);
          await this.settle(exec, index, r.status, r.error, write);
          break;
        }
        case 'create_contact': {
          const r = await this.deps.actions.createContact(exec, action);
          await this.settle(exec, index, r.status, r.error, write);
          break;
        }
        case 'call_webhook':
        case 'log_to_crm':
          unwritten = undefined;
          await this.attempt(ctx, exec, index, 0);
          break;
      }
    }
    await this.finish(exec, automation.id, unwritten);
  }

  /** A due retry of an HTTP action that is still `retrying` with the attempts the timer was set after. */
  async retry(ctx: Ctx, tenantId: string, executionId: string, index: number): Promise<void> {
    const exec = await this.deps.db.executions.findOne(orgScope(tenantId), { id: executionId });
    const outcome = exec?.actions[index];
    if (!exec || outcome?.status !== 'retrying') return;
    await this.attempt(ctx, exec, index, outcome.attempts ?? 0);
  }

  private async attempt(ctx: Ctx, exec: ExecutionDoc, index: number, before: number): Promise<void> {
    const automation = await this.deps.db.automations.findOne(orgScope(exec.tenantId), { id: exec.automationId });
    const action = automation?.actions[index];
    if (!action || action.type !== exec.actions[index]!.type) {
      await this.settle(exec, index, 'failed', 'the automation was changed or deleted before this action ran');
      return;
    }
    const result = await this.deps.actions.post(exec, action, index);
    const attempts = before + 1;
    const step = nextStep(result, attempts, this.deps.webhook);
    const status: ActionStatus =
      step.kind === 'succeeded' ? 'succeeded' : step.kind === 'retry' ? 'retrying' : 'failed';
    // Compare-and-set on the attempt count: a duplicate attempt records nothing twice and schedules nothing more.
    const recorded = await this.deps.db.executions.updateOne(
      orgScope(exec.tenantId),
      { id: exec.id, [`actions.${index}.status`]: exec.actions[index]!.status, [`actions.${index}.attempts`]: before },
      {
        $set: {
          [`actions.${index}.status`]: status,
          [`actions.${index}.error`]: result.error,
          [`actions.${index}.attempts`]: attempts,
          updatedAt: nowIso(),
        },
      },
    );
    if (!recorded) return;
    exec.actions[index] = { ...exec.actions[index]!, status, error: result.error, attempts };
    if (status !== 'retrying') actionOutcomes.inc({ type: action.type, status });
    if (step.kind === 'retry')
      await ctx.send(
        automationProtocol,
        ctx.key,
        { kind: 'retry', tenantId: exec.tenantId, executionId: exec.id, index },
        { delayMs: step.delayMs },
      );
  }

  /** `write: false` leaves the stored outcome to `finish` (the last action of a run). */
  private async settle(
    exec: ExecutionDoc,
    index: number,
    status: ActionStatus,
    error: string | null,
    write = true,
  ): Promise<void> {
    if (write) {
      await this.deps.db.executions.updateOne(
        orgScope(exec.tenantId),
        { id: exec.id },
        { $set: { [`actions.${index}.status`]: status, [`actions.${index}.error`]: error, updatedAt: nowIso() } },
      );
    }
    exec.actions[index] = { ...exec.actions[index]!, status, error };
    actionOutcomes.inc({ type: exec.actions[index]!.type, status });
    if (status === 'failed')
      this.deps.log.info(
        { automationId: exec.automationId, executionId: exec.id, messageId: exec.messageId, error },
        'automation action failed',
      );
  }

  /**
   * Only the run that moves the execution to done counts it on the automation. If another run got there
   * first, that run stored every outcome, the one left `unwritten` here included.
   */
  private async finish(exec: ExecutionDoc, automationId: string, unwritten?: number): Promise<void> {
    const now = nowIso();
    const set: Record<string, unknown> = { state: 'done', updatedAt: now };
    if (unwritten !== undefined) {
      const outcome = exec.actions[unwritten]!;
      set[`actions.${unwritten}.status`] = outcome.status;
      set[`actions.${unwritten}.error`] = outcome.error;
    }
    const done = await this.deps.db.executions.updateOne(
      orgScope(exec.tenantId),
      { id: exec.id, state: 'running' },
      { $set: set },
    );
    if (!done) return;
    await this.deps.db.automations.updateOne(
      orgScope(exec.tenantId),
      { id: automationId },
      { $set: { lastExecutedAt: now }, $inc: { executionCount: 1 } },
    );
    executionOutcomes.inc({ outcome: exec.actions.some((a) => a.status === 'failed') ? 'failed' : 'succeeded' });
  }
}
