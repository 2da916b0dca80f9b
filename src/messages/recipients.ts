import { createHash } from 'node:crypto';
import { validationError } from '../errors.ts';

export const e164Pattern = '^\\+[1-9][0-9]{7,14}$';
const e164 = new RegExp(e164Pattern);
const email = /^[^\s@]{1,64}@[^\s@]{1,255}\.[^\s@]{1,63}$/;
const groupId = /^group:([A-Za-z0-9_-]{1,64})$/;
const chatGuid = /^chat:([A-Za-z0-9_;:+.@-]{1,200})$/;

/** Where a message goes, as the `to` field of decisions.md ("Messages and jobs") allows it. */
export type Recipient =
  | { kind: 'phone'; participant: string }
  | { kind: 'email'; participant: string }
  | { kind: 'group'; groupId: string }
  | { kind: 'chat'; participant: string };

/** Parses `to`, or throws a 400 naming `field`. */
export function parseRecipient(raw: string, field = 'to'): Recipient {
  const to = raw.trim();
  if (e164.test(to)) return { kind: 'phone', participant: to };
  if (email.test(to)) return { kind: 'email', participant: to.toLowerCase() };
  const group = groupId.exec(to);
  if (group) return { kind: 'group', groupId: group[1]! };
  if (chatGuid.test(to)) return { kind: 'chat', participant: to };
  throw validationError(field, 'must be an E.164 phone number (+ and 8 to 15 digits), an email address, group:<id> or chat:<guid>');
}

/** A participant as conversations key it: E.164 as is, emails lower-cased; anything else is not a participant. */
export function normalizeParticipant(raw: string): string | undefined {
  const value = raw.trim();
  if (e164.test(value)) return value;
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
    id = `conv_${createHash('sha256').update(key).digest('base64url').slice(0, 24)}`;
    if (recentConversationIds.size >= 10_000) recentConversationIds.clear();
    recentConversationIds.set(key, id);
  }
  return id;
}

/** A busy sender writes to the same few participants over and over: their ids are kept rather than hashed again. */
const recentConversationIds = new Map<string, string>();
