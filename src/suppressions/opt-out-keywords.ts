/**
 * The keywords an inbound message may be (CTIA's and the carriers' set, as
 * Twilio honours it): the whole text, trimmed and case-folded, must be one of
 * them; "stop sending me ads" is a message, not a keyword.
 */
export const defaultStopKeywords = ['stop', 'stopall', 'unsubscribe', 'cancel', 'end', 'quit'] as const;
export const startKeywords = ['start', 'unstop'] as const;
export const helpKeyword = 'help';

/** An organization's own stop keywords: at most this many, each at most this long. */
export const maxOwnKeywords = 20;
export const maxKeywordChars = 32;
/** A text longer than this is no keyword whatever its spaces: nearly every message is answered by its length alone. */
export const maxKeywordTextChars = maxKeywordChars + 16;

export type KeywordKind = 'stop' | 'start' | 'help';

/** The form a keyword is compared in: trimmed, case-folded (so `Stop`, ` STOP ` and `ſtop` are one word). */
export function foldKeyword(text: string): string {
  return text.trim().normalize('NFKC').toLowerCase();
}

/**
 * What an inbound text is as a keyword, or undefined for an ordinary
 * message. Anything longer than a keyword can be is answered without folding
 * it: nearly every inbound message stops at the length check.
 */
export function keywordOf(text: string, ownStopKeywords: readonly string[]): KeywordKind | undefined {
  if (text.length > maxKeywordTextChars) return undefined;
  const word = foldKeyword(text);
  if (word.length === 0 || word.length > maxKeywordChars) return undefined;
  if ((defaultStopKeywords as readonly string[]).includes(word) || ownStopKeywords.includes(word)) return 'stop';
  if ((startKeywords as readonly string[]).includes(word)) return 'start';
  if (word === helpKeyword) return 'help';
  return undefined;
}

/** A received one-to-one message, as the relay actor stored it: what the keywords act on. */
export interface ReceivedText {
  tenantId: string;
  teamId: string;
  messageId: string;
  /** The sender as a participant (E.164 or a lower-cased email). */
  handle: string;
  body: string;
  /** First time stored (not a replay after a reconnect): only then is HELP answered. */
  fresh: boolean;
}

/** What a received one-to-one message may be besides a message: a stop, start or help keyword (opt-out-inbound.ts). */
export interface InboundKeywords {
  received(text: ReceivedText): Promise<void>;
}
