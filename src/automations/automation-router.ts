import { automationProtocol } from '../actors/automation/protocol.ts';
import type { DomainEvent, ReadEvent } from '../events/event-stream.ts';
import { nowIso } from '../ids.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import { normalizeParticipant } from '../messages/recipients.ts';
import { actorClient } from '../runtime/actor.ts';
import type { Transport } from '../runtime/types.ts';
import { insertNew } from '../store/insert-new.ts';
import { executionOutcomes } from './automation-metrics.ts';
import { triggerEvents, type Trigger } from './automation-schemas.ts';
import {
  executionId,
  orgScope,
  type AutomationCollections,
  type AutomationDoc,
  type ExecutionDoc,
  type TriggeringMessage,
} from './automation-store.ts';
import { evaluateWithRetry, loopTurn, type Evaluation } from './conditions.ts';

/** Evaluations of one batch run back to back for at most this long before the loop takes its turn. */
const evaluationSliceMs = 10;

const triggerOf = Object.fromEntries(
  Object.entries(triggerEvents).map(([trigger, event]) => [event, trigger]),
) as Partial<Record<DomainEvent['event'], Trigger>>;

/**
 * Turns message events of the durable stream (the `automations` consumer
 * group, read at least once) into executions: one per enabled automation of
 * the message's organization with that trigger, under an id derived from
 * automation and message, so a batch read again stores nothing twice and an
 * execution already done is not run again. Matched executions go to the
 * automation actor of the message's conversation. Replies sent by
 * automations are never a trigger.
 */
export class AutomationRouter {
  private readonly automations;

  constructor(
    private readonly deps: {
      db: AutomationCollections;
      messages: MessagingCollections['messages'];
      runtime: Transport;
    },
  ) {
    this.automations = actorClient(deps.runtime, automationProtocol);
  }

  async route(batch: ReadEvent[]): Promise<void> {
    const byOrg = new Map<string, DomainEvent[]>();
    for (const { event } of batch) {
      if (!triggerOf[event.event] || !event.teamId) continue;
      // A tapback taken off runs nothing: the trigger is a reaction given.
      if (event.event === 'message.reaction' && event.data.removed === true) continue;
      const list = byOrg.get(event.tenantId);
      if (list) list.push(event);
      else byOrg.set(event.tenantId, [event]);
    }
    await Promise.all([...byOrg].map(([tenantId, events]) => this.routeOrg(tenantId, events)));
  }

  private async routeOrg(tenantId: string, events: DomainEvent[]): Promise<void> {
    const rules = await this.deps.db.automations.find(orgScope(tenantId), { enabled: true });
    if (rules.length === 0) return;
    const automated = await this.automatedReplies(tenantId, events);
    const now = nowIso();
    const docs: ExecutionDoc[] = [];
    let slice = performance.now();
    for (const e of events) {
      const trigger = triggerOf[e.event]!;
      const message = triggeringMessage(e);
      if (automated.has(message.id)) continue;
      for (const rule of rules) {
        if (rule.trigger !== trigger) continue;
        // One evaluation holds the loop at most ~patternDeadlineMs; many in a row take turns with everything else.
        if (performance.now() - slice > evaluationSliceMs) {
          await loopTurn();
          slice = performance.now();
        }
        docs.push(newExecution(rule, message, trigger, now, await evaluateWithRetry(rule, message), e));
      }
    }
    const inserted = new Set((await insertNew(this.deps.db.executions, orgScope(tenantId), docs)).map((d) => d.id));
    for (const d of docs) if (inserted.has(d.id) && !d.matched) executionOutcomes.inc({ outcome: 'not_matched' });
    const matched = docs.filter((d) => d.matched);
    const stored = matched.filter((d) => !inserted.has(d.id));
    // Read again (the consumer died before acknowledging): only executions not yet done are handed on.
    const unfinished =
      stored.length === 0
        ? new Set<string>()
        : new Set(
            (
              await this.deps.db.executions.find(orgScope(tenantId), {
                id: { $in: stored.map((d) => d.id) },
                state: 'running',
              })
            ).map((d) => d.id),
          );
    await Promise.all(
      matched
        .filter((d) => inserted.has(d.id) || unfinished.has(d.id))
        .map((d) => this.automations.send(d.message.conversationId, { kind: 'run', tenantId, executionId: d.id })),
    );
  }

  /** Message ids among these events that are replies sent by an automation. */
  private async automatedReplies(tenantId: string, events: DomainEvent[]): Promise<Set<string>> {
    const sent = events
      .filter((e) => e.event !== 'message.received' && e.event !== 'message.reaction')
      .map((e) => String(e.data.id));
    if (sent.length === 0) return new Set();
    const docs = await this.deps.messages.find(orgScope(tenantId), {
      id: { $in: sent },
      automationId: { $exists: true },
    });
    return new Set(docs.map((d) => d.id));
  }
}

/**
 * What a trigger's conditions and actions see: the message of a message
 * event; for a reaction, the message reacted to with the reaction as its
 * `body` (the emoji of an emoji tapback, else its kind: `love`, `like`...)
 * and the one who reacted as `from` and participant.
 */
function triggeringMessage(e: DomainEvent): TriggeringMessage {
  if (e.event === 'message.reaction') {
    const r = e.data as { messageId: string; reaction: string; emoji?: string; from: string; conversationId: string };
    return {
      id: r.messageId,
      teamId: e.teamId!,
      conversationId: r.conversationId,
      from: r.from,
      to: '',
      body: r.emoji ?? r.reaction,
      status: 'reaction',
      participant: normalizeParticipant(r.from) ?? r.from,
    };
  }
  const d = e.data as {
    id: string;
    to: string;
    from: string | null;
    body: string;
    status: string;
    conversationId: string;
    deliveredAt?: string;
    readAt?: string;
  };
  const other = e.event === 'message.received' ? (d.from ?? '') : d.to;
  return {
    id: d.id,
    teamId: e.teamId!,
    conversationId: d.conversationId,
    from: d.from,
    to: d.to,
    body: d.body ?? '',
    status: d.status,
    participant: normalizeParticipant(other) ?? other,
    ...(d.deliveredAt ? { deliveredAt: d.deliveredAt } : {}),
    ...(d.readAt ? { readAt: d.readAt } : {}),
  };
}

function newExecution(
  rule: AutomationDoc,
  message: TriggeringMessage,
  trigger: Trigger,
  now: string,
  evaluation: Evaluation,
  event: DomainEvent,
): ExecutionDoc {
  const { matched, actionsWouldExecute } = evaluation;
  return {
    // A message has each other trigger's event once, and may have many reactions: each runs once.
    id: executionId(rule.id, event.event === 'message.reaction' ? `${message.id}\u0000${event.id}` : message.id),
    tenantId: rule.tenantId,
    automationId: rule.id,
    messageId: message.id,
    trigger,
    matched,
    state: matched ? 'running' : 'done',
    actions: actionsWouldExecute.map((type) => ({
      type,
      status: 'pending' as const,
      error: null,
      ...(type === 'call_webhook' || type === 'log_to_crm' ? { attempts: 0 } : {}),
    })),
    message,
    createdAt: now,
    updatedAt: now,
  };
}
