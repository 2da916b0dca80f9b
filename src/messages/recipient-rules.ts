import { phoneNumberRule, toE164 } from '../phone-number.ts';

/* The recipient rule without server dependencies: the API and the dashboard's bulk preview check with the same code. */

export const email = /^[^\s@]{1,64}@[^\s@]{1,255}\.[^\s@]{1,63}$/;
const groupId = /^group:([A-Za-z0-9_-]{1,64})$/;
export const chatGuid = /^chat:([A-Za-z0-9_;:+.@-]{1,200})$/;

/** Where a message goes, as the `to` field of decisions.md ("Messages and jobs") allows it; a phone number is in E.164. */
export type Recipient =
  | { kind: 'phone'; participant: string }
  | { kind: 'email'; participant: string }
  | { kind: 'group'; groupId: string }
  | { kind: 'chat'; participant: string };

export const recipientRule =
  'a phone number in international form (+ and country code; spaces, dashes and brackets allowed), an email address, group:<contact group id> or chat:<group chat guid>';

export function recipientProblem(value: string): string {
  return value.trim().startsWith('+')
    ? `is not a valid phone number: use ${phoneNumberRule}`
    : `must be ${recipientRule}`;
}

export function recipientOf(raw: string): Recipient | undefined {
  const to = raw.trim();
  if (to.startsWith('+')) {
    const number = toE164(to);
    return number ? { kind: 'phone', participant: number } : undefined;
  }
  if (email.test(to)) return { kind: 'email', participant: to.toLowerCase() };
  const group = groupId.exec(to);
  if (group) return { kind: 'group', groupId: group[1]! };
  if (chatGuid.test(to)) return { kind: 'chat', participant: to };
  return undefined;
}
