import { validationError } from '../errors.ts';
import { defineFormat } from '../http/validation.ts';
import { toE164 } from '../phone-number.ts';
import { chatGuid, email, recipientOf, recipientProblem, type Recipient } from './recipient-rules.ts';
import { digestId } from '../ids.ts';

export { recipientRule, type Recipient } from './recipient-rules.ts';

/** `to` as a JSON Schema format, so a bad recipient is listed with the request's other violations. */
export const recipientFormat = 'message-recipient';
defineFormat(recipientFormat, (value) => recipientOf(value) !== undefined, recipientProblem, '+14155550100');

/** Parses `to`, or throws a 400 naming `path` (a JSON Pointer). */
export function parseRecipient(raw: string, path = '/to'): Recipient {
  const recipient = recipientOf(raw);
  if (!recipient) throw validationError(path, recipientProblem(raw));
  return recipient;
}

/** A participant as conversations key it: phone numbers in E.164, emails lower-cased; anything else is not a participant. */
export function normalizeParticipant(raw: string): string | undefined {
  const value = raw.trim();
  if (value.startsWith('+')) return toE164(value);
  if (email.test(value)) return value.toLowerCase();
  if (chatGuid.test(value)) return value;
  return undefined;
}

/**
 * A conversation's id follows from its team and participant, so the send path
 * knows it without a lookup and concurrent writers agree on it.
 */
export function conversationIdOf(tenantId: string, teamId: string, participant: string): string {
  const key = `${tenantId}\u0000${teamId}\u0000${participant}`;
  let id = recentConversationIds.get(key);
  if (id === undefined) {
    id = `conv_${digestId(key, 24)}`;
    if (recentConversationIds.size >= 10_000) recentConversationIds.clear();
    recentConversationIds.set(key, id);
  }
  return id;
}

/** A busy sender writes to the same few participants over and over: their ids are kept rather than hashed again. */
const recentConversationIds = new Map<string, string>();
