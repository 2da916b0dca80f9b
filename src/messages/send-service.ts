import type { Static } from '@sinclair/typebox';
import { AppError, pointer, validationError } from '../errors.ts';
import { requireRole, type Principal } from '../roles.ts';
import { newOrderedId, nowIso } from '../ids.ts';
import type { Scope } from '../store/collection.ts';
import type { IdempotencyKeys } from './idempotency.ts';
import type { sentMessageSchema } from './message-schemas.ts';
import { publicMessage, type MessageDoc, type MessagingCollections } from './message-store.ts';
import { conversationIdOf, normalizeParticipant, parseRecipient } from './recipients.ts';
import type { SendCommitter } from './send-committer.ts';
import { traceFields, type TraceContext } from '../tracing/trace-context.ts';
import { fallbackProblem, storedFallback, type SmsFallbackRequest } from './sms-fallback.ts';

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
  /** An admin's send to a recipient on the suppression list, on purpose. */
  overrideOptOut?: boolean;
  /** Send as SMS when iMessage cannot reach the recipient, or does not in time. */
  fallback?: SmsFallbackRequest;
}

/**
 * The organization's suppression list as the send path checks it: from
 * memory once the list is held (suppressions/suppression-list.ts), never a
 * store read per send.
 */
export interface OptOutCheck {
  isSuppressed(tenantId: string, handle: string): boolean | Promise<boolean>;
  /** The received message whose stop keyword suppressed `handle` (null: suppressed otherwise; undefined: not suppressed). */
  stopMessageOf(tenantId: string, handle: string): string | null | undefined | Promise<string | null | undefined>;
}

/** The answer to a send to a handle on the suppression list. */
export function optedOut(handle: string): AppError {
  return new AppError(
    'recipient_opted_out',
    `${handle} is on the organization's suppression list (opted out); nothing was sent`,
  );
}

export interface AutomationOrigin {
  automationId: string;
  executionId: string;
  /** The received message the automation answers: a reply to the very message that opted its sender out (a confirmation) still goes. */
  inReplyTo?: string;
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
    ...(input.fallback ? { fallback: storedFallback(input.fallback) } : {}),
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
      optOuts: OptOutCheck;
      /** The shortest `if_undelivered` window (config `smsFallbackMinSeconds`). */
      smsFallbackMinSeconds: number;
    },
  ) {}

  /** Each message stores `trace`, the request's trace context: its relay send and its events' webhook deliveries continue it. */
  send(principal: Principal, input: SendRequest, idempotencyKey: string | undefined, trace: TraceContext) {
    return this.deps.idempotency.run(principal.tenantId, idempotencyKey, { teamId: principal.teamId, ...input }, () =>
      this.accept(principal, input, traceFields(trace)),
    );
  }

  /**
   * The organization's help text, sent to whoever texted HELP: the answer they
   * asked for, so it goes even to a handle on the suppression list (as a
   * carrier's HELP answer does). It records the message it answers.
   */
  sendHelpText(principal: Principal, to: string, body: string, inReplyTo: string) {
    return this.accept(principal, { to, body, priority: 0 }, { helpReplyTo: inReplyTo }, true);
  }

  /** A reply an automation sends: the same path, marked with its origin so that automations never run on it. */
  sendForAutomation(principal: Principal, input: SendRequest, origin: AutomationOrigin) {
    return this.accept(
      principal,
      input,
      { automationId: origin.automationId, automationExecutionId: origin.executionId },
      false,
      origin.inReplyTo,
    );
  }

  private async accept(
    principal: Principal,
    input: SendRequest,
    origin: Partial<MessageDoc> = {},
    answersHelp = false,
    inReplyTo?: string,
  ): Promise<{ status: 201; body: Static<typeof sentMessageSchema> }> {
    const recipient = parseRecipient(input.to);
    // Checked first, so a member's override is refused whether or not the recipient opted out.
    const override = input.overrideOptOut === true;
    if (override) requireRole(principal.role, 'admin');
    const checked = !override && !answersHelp;
    const attachments = input.attachments ?? [];
    if ((input.body ?? '') === '' && attachments.length === 0)
      throw validationError('/body', 'is required unless attachments are given');
    const fallback = fallbackProblem(input.fallback, this.deps.smsFallbackMinSeconds);
    if (fallback) throw validationError(pointer('fallback', fallback.field), fallback.message);
    if (input.fromNumber !== undefined) await this.requireActiveNumber(principal.tenantId, input.fromNumber);
    const scope = { tenantId: principal.tenantId, teamId: principal.teamId };
    const now = nowIso();
    if (override) origin = { ...origin, overrideOptOut: true };
    const message = (to: string, participant: string, extra: Partial<MessageDoc> = {}) =>
      sentMessage(principal, input, to, participant, now, { ...origin, ...extra });
    if (recipient.kind !== 'group') {
      if (
        checked &&
        recipient.kind !== 'chat' &&
        (await this.refused(principal.tenantId, recipient.participant, inReplyTo))
      )
        throw optedOut(recipient.participant);
      const doc = message(recipient.kind === 'phone' ? recipient.participant : input.to.trim(), recipient.participant);
      await this.deps.committer.submit([doc]);
      return { status: 201, body: publicMessage(doc) };
    }
    const everyone = [...new Set(await this.deps.contacts.groupRecipients(scope, recipient.groupId))];
    if (everyone.length === 0) throw validationError('/to', 'the group has no member with a phone number or email');
    // Members on the suppression list are left out of a group send; if that is all of them, nothing is sent.
    const members = checked ? await this.reachable(principal.tenantId, everyone) : everyone;
    if (members.length === 0) throw optedOut(input.to.trim());
    if (members.length > maxFanout) throw validationError('/to', `the group has more than ${maxFanout} members`);
    const parent = message(input.to.trim(), input.to.trim(), { fanout: true, recipients: members.length });
    const children = members.map((m) => message(m, normalizeParticipant(m) ?? m, { parentId: parent.id }));
    await this.deps.committer.submit([parent, ...children]);
    return { status: 201, body: { ...publicMessage(parent), messageIds: children.map((c) => c.id) } };
  }

  /** Whether a send to `handle` is refused: it is on the list, and this is not a reply to the message that put it there. */
  private async refused(tenantId: string, handle: string, inReplyTo: string | undefined): Promise<boolean> {
    if (inReplyTo === undefined) return this.deps.optOuts.isSuppressed(tenantId, handle);
    const stopMessage = await this.deps.optOuts.stopMessageOf(tenantId, handle);
    return stopMessage !== undefined && stopMessage !== inReplyTo;
  }

  private async reachable(tenantId: string, members: string[]): Promise<string[]> {
    const out: string[] = [];
    for (const m of members)
      if (!(await this.deps.optOuts.isSuppressed(tenantId, normalizeParticipant(m) ?? m))) out.push(m);
    return out;
  }

  private async requireActiveNumber(tenantId: string, number: string): Promise<void> {
    const found = await this.deps.db.phoneNumbers.findOne({ tenantId }, { number, status: 'active' });
    if (!found) throw validationError('/fromNumber', 'is not an active registered phone number of the organization');
  }
}
