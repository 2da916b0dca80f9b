import { AppError } from '../errors.ts';
import { nowIso } from '../ids.ts';
import type { ContactCollections } from '../contacts/contact-store.ts';
import {
  contactUpdate,
  newContactDoc,
  publicContact,
  reachableByFilter,
  type ContactDoc,
} from '../contacts/contact-store.ts';
import type { Contact } from '../contacts/contact-schemas.ts';
import type { MessagingCollections } from '../messages/message-store.ts';
import type { SendService } from '../messages/send-service.ts';
import { normalizeParticipant } from '../messages/recipients.ts';
import type { WebhookSender, AttemptResult } from '../webhooks/webhook-sender.ts';
import { deliveryHeaders, signingKey } from '../webhooks/webhook-signing.ts';
import type { SecretBox } from '../webhooks/secret-box.ts';
import { triggerEvents } from './automation-schemas.ts';
import type { ExecutionDoc, StoredAction } from './automation-store.ts';

const hourMs = 3_600_000;

export type ReplyOutcome = { status: 'succeeded' | 'skipped' | 'failed'; error: string | null };

/** The performers of the four action types; each is safe to run again for the same execution (a redelivered run). */
export class AutomationActions {
  constructor(
    private readonly deps: {
      messages: MessagingCollections['messages'];
      contacts: ContactCollections['contacts'];
      send: SendService;
      sender: WebhookSender;
      box: SecretBox;
      repliesPerConversationPerHour: number;
    },
  ) {}

  /**
   * Through the normal send path, in the message's team and conversation. A
   * reply already stored for this execution (a run cut short after sending)
   * is not sent again; beyond the hourly cap of the conversation it is
   * skipped. Runs are serialized per conversation, so the count is exact.
   */
  async reply(exec: ExecutionDoc, action: StoredAction, index: number): Promise<ReplyOutcome> {
    const m = exec.message;
    const scope = { tenantId: exec.tenantId, teamId: m.teamId };
    const origin = `${exec.id}:${index}`;
    if (await this.deps.messages.findOne(scope, { conversationId: m.conversationId, automationExecutionId: origin }))
      return { status: 'succeeded', error: null };
    if (m.participant.startsWith('chat:') || normalizeParticipant(m.participant) === undefined) {
      return { status: 'failed', error: 'the conversation has no address to reply to' };
    }
    const since = new Date(Date.now() - hourMs).toISOString();
    const recent = await this.deps.messages.count(scope, {
      conversationId: m.conversationId,
      automationId: { $exists: true },
      createdAt: { $gte: since },
    });
    const cap = this.deps.repliesPerConversationPerHour;
    if (recent >= cap)
      return {
        status: 'skipped',
        error: `loop guard: this conversation had ${cap} automated replies in the last hour`,
      };
    try {
      await this.deps.send.sendForAutomation(
        { tenantId: exec.tenantId, teamId: m.teamId, role: 'admin' },
        { to: m.participant, body: action.config.body ?? '', priority: 0 },
        { automationId: exec.automationId, executionId: origin, inReplyTo: exec.messageId },
      );
      return { status: 'succeeded', error: null };
    } catch (err) {
      if (err instanceof AppError && !err.retryable) return { status: 'failed', error: err.message };
      throw err;
    }
  }

  /** Creates a contact for the conversation's participant, or adds the tags to the one that has that phone or email. */
  async createContact(exec: ExecutionDoc, action: StoredAction): Promise<ReplyOutcome> {
    const m = exec.message;
    const scope = { tenantId: exec.tenantId, teamId: m.teamId };
    const address = normalizeParticipant(m.participant);
    if (address === undefined || address.startsWith('chat:'))
      return { status: 'failed', error: 'the sender has no phone number or email' };
    const existing = await this.contactOf(exec);
    const tags = action.config.tags ?? [];
    if (existing) {
      const known = new Set(existing.tags.map((t) => t.toLowerCase()));
      const added = tags.filter((t) => !known.has(t.toLowerCase()));
      if (added.length > 0)
        await this.deps.contacts.updateOne(
          scope,
          { id: existing.id },
          contactUpdate({ tags: [...existing.tags, ...added] }, nowIso()),
        );
      return { status: 'succeeded', error: null };
    }
    const isEmail = address.includes('@');
    const doc = newContactDoc(
      scope,
      {
        firstName: action.config.firstName ?? address,
        ...(isEmail ? { emailAddresses: [address] } : { phoneNumbers: [address] }),
        ...(tags.length > 0 ? { tags } : {}),
      },
      nowIso(),
    );
    await this.deps.contacts.insertOne(scope, doc);
    return { status: 'succeeded', error: null };
  }

  /** One signed attempt of call_webhook or log_to_crm; the webhook-id is the same on every attempt of the action. */
  async post(exec: ExecutionDoc, action: StoredAction, index: number): Promise<AttemptResult> {
    const m = exec.message;
    const payload: Record<string, unknown> = {
      event: triggerEvents[exec.trigger],
      timestamp: nowIso(),
      automationId: exec.automationId,
      data: {
        id: m.id,
        to: m.to,
        from: m.from,
        body: m.body,
        status: m.status,
        conversationId: m.conversationId,
        ...(m.deliveredAt ? { deliveredAt: m.deliveredAt } : {}),
        ...(m.readAt ? { readAt: m.readAt } : {}),
      },
    };
    const headers: Record<string, string> = {};
    if (action.type === 'log_to_crm') {
      const contact = await this.contactOf(exec);
      payload.contact = contact ? (publicContact(contact) satisfies Contact) : null;
      if (action.config.apiKeySealed)
        headers.authorization = `Bearer ${this.deps.box.open(action.config.apiKeySealed)}`;
    }
    const body = JSON.stringify(payload);
    // An action's secret signs with its UTF-8 bytes, whatever it looks like: `whsec_` keys are webhooks' only.
    const keys = action.config.secretSealed ? [signingKey(this.deps.box.open(action.config.secretSealed), 'raw')] : [];
    Object.assign(headers, deliveryHeaders({ webhookId: `${exec.id}_${index}`, body, keys }));
    return this.deps.sender.attempt(action.config.url ?? '', headers, body);
  }

  private async contactOf(exec: ExecutionDoc): Promise<ContactDoc | null> {
    const address = normalizeParticipant(exec.message.participant);
    if (address === undefined) return null;
    const filter = address.includes('@') ? reachableByFilter([], [address]) : reachableByFilter([address], []);
    if (!filter) return null;
    return this.deps.contacts.findOne({ tenantId: exec.tenantId, teamId: exec.message.teamId }, filter);
  }
}
