import { Type } from '@sinclair/typebox';
import { strictObject } from '../http/validation.ts';

/**
 * What a send's `fallback` asks (docs/handles.md): `if_not_imessage` goes as
 * SMS when iMessage cannot reach the recipient; `if_undelivered` also when the
 * iMessage attempt is not delivered within `afterSeconds` of being sent.
 */
export type SmsFallback = { sms: 'if_not_imessage' } | { sms: 'if_undelivered'; afterSeconds: number };

/** A fallback as the request gives it: `afterSeconds` is checked against the configured minimum (`fallbackProblem`). */
export interface SmsFallbackRequest {
  sms: 'if_not_imessage' | 'if_undelivered';
  afterSeconds?: number;
}

/** The window of `if_undelivered` unless the send gives one: long enough for a phone that was off for a moment to come back. */
export const smsFallbackDefaultSeconds = 300;
/** The longest window: past a day, a second message by SMS is more likely a surprise than a help. */
export const smsFallbackMaxSeconds = 86_400;

export const fallbackSchema = strictObject(
  {
    sms: Type.Union([Type.Literal('if_not_imessage'), Type.Literal('if_undelivered')], {
      description:
        "`if_not_imessage`: as SMS when iMessage cannot reach the recipient (the relay's lookup, or Messages fails it as not registered). `if_undelivered`: also when the iMessage is not delivered within `afterSeconds`; the recipient may get both",
    }),
    afterSeconds: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: smsFallbackMaxSeconds,
        description: `\`if_undelivered\` only: seconds from the iMessage sent to the SMS, 30 to ${smsFallbackMaxSeconds}; ${smsFallbackDefaultSeconds} unless given`,
      }),
    ),
  },
  {
    description: 'send as SMS when iMessage cannot reach the recipient, or does not in time (docs/handles.md)',
    examples: [{ sms: 'if_undelivered', afterSeconds: 300 }],
  },
);

/** What the schema cannot check of a fallback: the field at fault (under `fallback`) and why; null when it is fine. */
export function fallbackProblem(
  fallback: SmsFallbackRequest | undefined,
  minSeconds: number,
): { field: 'afterSeconds'; message: string } | null {
  if (fallback?.afterSeconds === undefined) return null;
  if (fallback.sms !== 'if_undelivered')
    return { field: 'afterSeconds', message: 'is only taken with `if_undelivered`' };
  if (fallback.afterSeconds < minSeconds)
    return { field: 'afterSeconds', message: `must be at least ${minSeconds} seconds` };
  return null;
}

/** The fallback a message stores: `if_undelivered` always with its window. */
export function storedFallback(fallback: SmsFallbackRequest | undefined): SmsFallback | undefined {
  if (!fallback) return undefined;
  if (fallback.sms === 'if_not_imessage') return { sms: 'if_not_imessage' };
  return { sms: 'if_undelivered', afterSeconds: fallback.afterSeconds ?? smsFallbackDefaultSeconds };
}

/** Whether a message's iMessage attempt still waits for its `if_undelivered` window: its SMS has not been asked for. */
export function awaitsUndeliveredFallback(m: { fallback?: SmsFallback; viaSms?: boolean }): boolean {
  return m.fallback?.sms === 'if_undelivered' && m.viaSms !== true;
}
