import { parsePhoneNumberFromString } from 'libphonenumber-js/max';

/**
 * The one rule for a phone number anywhere the API reads one (messages,
 * contacts, import, registered numbers, lookups): international form (a
 * leading +), spaces, dots, dashes and brackets allowed, and it must be a
 * number that exists under the numbering plan of its country, checked with
 * libphonenumber's full ('max') metadata. It is stored and compared as E.164.
 * +19999999999 (no such US area code) and +12345678 (too short) are refused.
 */
export function toE164(raw: string): string | undefined {
  const text = raw.trim();
  if (!text.startsWith('+') || text.length > phoneNumberMaxLength) return undefined;
  const known = recentlyParsed.get(text);
  if (known !== undefined) return known || undefined;
  const parsed = parsePhoneNumberFromString(text);
  const number = parsed?.isValid() ? parsed.number : undefined;
  if (recentlyParsed.size >= recentlyParsedMax) recentlyParsed.clear();
  recentlyParsed.set(text, number ?? '');
  return number;
}

/**
 * A parse with the full metadata costs about 45 µs (measured on the 2-core CI
 * machine), and a send reads its number twice (the schema, then the
 * recipient): a busy sender writes to the same numbers over and over, so
 * recent answers are kept ('' = not a valid number). Room for two bulk jobs
 * of 10,000: the cache is emptied when full, and one emptied between a job's
 * schema check and its recipient check would parse its numbers twice.
 */
const recentlyParsed = new Map<string, string>();
const recentlyParsedMax = 20_000;

/** Room for a formatted international number ("+1 (415) 555-0100 ext" is refused anyway). */
export const phoneNumberMaxLength = 32;

/** The JSON Schema format name the validators check with `toE164` (src/http/validation.ts), and normalize to E.164 after. */
export const phoneNumberFormat = 'phone-number';

export const phoneNumberRule =
  'a phone number in international form (+ and country code; spaces, dashes and brackets allowed), stored as E.164';
