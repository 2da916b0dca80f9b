import type { Static } from '@sinclair/typebox';
import { validationError } from '../errors.ts';
import type { Principal } from '../roles.ts';
import { newOrderedId, nowIso } from '../ids.ts';
import type { Scope } from '../store/collection.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import type { sentMessageSchema } from './message-schemas.ts';
import { publicMessage, type MessageDoc, type MessagingCollections } from './message-store.ts';
import { conversationIdOf, normalizeParticipant, parseRecipient } from './recipients.ts';
import type { SendCommitter } from './send-committer.ts';
import { traceFields, type TraceContext } from '../tracing/trace-context.ts';

/** What the contacts side answers for `group:<id>` and for names in conversations. */
export interface ContactLookup {
  groupRecipients(scope: Scope, groupId: string): Promise<string[]>;
  namesFor(scope: Scope, participants: string[]): Promise<Map<string, string>>;
}

export interface SendRequest {
  to: string;
  body?: string;
  attachments?: string[];
  priority: number;
  fromNumber?: string;
}

export interface AutomationOrigin {
  automationId: string;
  executionId: string;
}

/** The most messages one `group:<id>` send fans out to (the bulk job limit). */
export const maxFanout = 10_000;

/** A new outgoing message, queued as of `now`. */
export function sentMessage(
  principal: Principal,
  input: SendRequest,
  to: string,
  participant: string,
  now: string,
  extra: Partial<MessageDoc> = {},
): MessageDoc {
  return {
    id: newOrderedId('msg'),
    tenantId: principal.tenantId,
    teamId: principal.teamId,
    direction: 'sent',
    status: 'queued',
    to,
    from: input.fromNumber ?? null,
    participant,
    conversationId: conversationIdOf(principal.tenantId, principal.teamId, participant),
    body: input.body ?? '',
    attachments: input.attachments ?? [],
    priority: input.priority,
    fromNumber: input.fromNumber ?? null,
    attempts: 0,
    lastError: null,
    relayId: null,
    queuedAt: now,
    sentAt: null,
    deliveredAt: null,
    readAt: null,
    createdAt: now,
    updatedAt: now,
    ...extra,
  };
}

/** The accept half of the send path: validate what the schema cannot, store, queue, answer. */
export class SendService {
  constructor(
    private readonly deps: {
      db: MessagingCollections;
      committer: SendCommitter;
      idempotency: IdempotencyKeys;
      contacts: ContactLookup;
    },
  ) {}

  /** Each message stores `trace`, the request's trace context: its relay send and its events' webhook deliveries continue it. */
  send(principal: Principal, input: SendRequest, idempotencyKey: string | undefined, trace: TraceContext) {
    return this.deps.idempotency.run(principal.tenantId, idempotencyKey, { teamId: principal.teamId, ...input }, () =>
      this.accept(principal, input, traceFields(trace)),
    );
  }

  /** A reply an automation sends: the same path, marked with its origin so that automations never run on it. */
  sendForAutomation(principal: Principal, input: SendRequest, origin: AutomationOrigin) {
    return this.accept(principal, input, {
      automationId: origin.automationId,
      automationExecutionId: origin.executionId,
    });
  }

  private async accept(
    principal: Principal,
    input: SendRequest,
    origin: Partial<MessageDoc> = {},
  ): Promise<{ status: 201; body: Static<typeof sentMessageSchema> }> {
    const recipient = parseRecipient(input.to);
    const attachments = input.attachments ?? [];
    if ((input.body ?? '') === '' && attachments.length === 0)
      throw validationError('/body', 'is required unless attachments are given');
    if (input.fromNumber !== undefined) await this.requireActiveNumber(principal.tenantId, input.fromNumber);
    const scope = { tenantId: principal.tenantId, teamId: principal.teamId };
    const now = nowIso();
    const message = (to: string, participant: string, extra: Partial<MessageDoc> = {}) =>
      sentMessage(principal, input, to, participant, now, { ...origin, ...extra });
    if (recipient.kind !== 'group') {
      const doc = message(recipient.kind === 'phone' ? recipient.participant : input.to.trim(), recipient.participant);
      await this.deps.committer.submit([doc]);
      return { status: 201, body: publicMessage(doc) };
    }
    const members = [...new Set(await this.deps.contacts.groupRecipients(scope, recipient.groupId))];
    if (members.length === 0) throw validationError('/to', 'the group has no member with a phone number or email');
    if (members.length > maxFanout) throw validationError('/to', `the group has more than ${maxFanout} members`);
    const parent = message(input.to.trim(), input.to.trim(), { fanout: true, recipients: members.length });
    const children = members.map((m) => message(m, normalizeParticipant(m) ?? m, { parentId: parent.id }));
    await this.deps.committer.submit([parent, ...children]);
    return { status: 201, body: { ...publicMessage(parent), messageIds: children.map((c) => c.id) } };
  }

  private async requireActiveNumber(tenantId: string, number: string): Promise<void> {
    const found = await this.deps.db.phoneNumbers.findOne({ tenantId }, { number, status: 'active' });
    if (!found) throw validationError('/fromNumber', 'is not an active registered phone number of the organization');
  }
}
