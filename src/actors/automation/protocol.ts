import { Type } from '@sinclair/typebox';
import { defineProtocol } from '../../runtime/actor.ts';

const id = Type.String({ minLength: 1, maxLength: 64 });

/**
 * Messages of the automation actor (`automation:<conversationId>`). Keyed by
 * conversation so that the executions of one conversation run one at a
 * time: the hourly reply cap is then a count in the store, never raced.
 */
export const automationProtocol = defineProtocol(
  'automation',
  {
    /** An execution was stored (state running): perform its pending actions. */
    run: { tenantId: id, executionId: id },
    /** A timer: the next HTTP attempt of a call_webhook or log_to_crm action is due. */
    retry: { tenantId: id, executionId: id, index: Type.Integer({ minimum: 0, maximum: 9 }) },
  },
  // Messages written before the tenant had one name in code still read.
  { formerNames: { orgId: 'tenantId' } },
);
