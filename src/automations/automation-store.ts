import type { Scope, Store } from '../store/collection.ts';
import type { ActionStatus, ActionType, Condition, Trigger } from './automation-schemas.ts';
import { digestId } from '../ids.ts';

/** An action as stored: secrets and API keys sealed (secret-box.ts), never in clear. */
export interface StoredAction {
  type: ActionType;
  config: {
    body?: string;
    firstName?: string;
    tags?: string[];
    url?: string;
    apiKeySealed?: string;
    secretSealed?: string;
  };
}

export interface AutomationDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  name: string;
  trigger: Trigger;
  logic: 'and' | 'or';
  conditions: Condition[];
  actions: StoredAction[];
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
  lastExecutedAt: string | null;
  executionCount: number;
}

export interface ActionOutcome {
  type: ActionType;
  status: ActionStatus;
  error: string | null;
  /** HTTP attempts made (call_webhook, log_to_crm). */
  attempts?: number;
}

/** The message an execution acts on, as it was when the event was read. */
export interface TriggeringMessage {
  id: string;
  teamId: string;
  conversationId: string;
  from: string | null;
  to: string;
  body: string;
  status: string;
  /** Who the conversation is with: the sender of a received message, the recipient of a sent one. */
  participant: string;
  /** As the message.delivered or message.read event that triggered it had them. */
  deliveredAt?: string;
  readAt?: string;
}

export interface ExecutionDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  automationId: string;
  messageId: string;
  trigger: Trigger;
  matched: boolean;
  /** `running` until every action settled or was handed to its retries. */
  state: 'running' | 'done';
  actions: ActionOutcome[];
  message: TriggeringMessage;
  createdAt: string;
  updatedAt: string;
}

export function automationCollections(store: Store) {
  return {
    automations: store.collection<AutomationDoc>('automations', [
      { keys: { tenantId: 1, createdAt: 1 } },
      { keys: { tenantId: 1, trigger: 1, enabled: 1 } },
    ]),
    executions: store.collection<ExecutionDoc>('automation_executions', [
      { keys: { tenantId: 1, automationId: 1, createdAt: -1, id: 1 }, newestFirst: true },
    ]),
  };
}

export type AutomationCollections = ReturnType<typeof automationCollections>;

export const orgScope = (tenantId: string): Scope => ({ tenantId });

/** One execution per automation and message, whoever reads the event and however often: the id is the guard. */
export function executionId(automationId: string, messageId: string): string {
  return `aex_${digestId(`${automationId}\u0000${messageId}`, 22)}`;
}
