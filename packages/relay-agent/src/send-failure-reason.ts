import type { FailureReason } from 'relaybox-relay-protocol/frames.ts';

/**
 * The `message.error` codes of chat.db whose meaning is known. Apple does not
 * document them; these two are what the public clients that read chat.db
 * agree on (AirMessage's `messageErrorCodeAppleNetwork = 3` and
 * `messageErrorCodeAppleUnregistered = 22`; BlueBubbles shows error 22 as "the
 * recipient is not registered with iMessage"). Every other code is reported
 * as `unknown_<code>`, so a customer still sees the code Messages wrote.
 */
const knownCodes: ReadonlyMap<number, FailureReason> = new Map([
  [3, 'network'],
  [22, 'not_registered'],
]);

/** The reason a send failed, from its chat.db row's non-zero `error`. */
export function failureReasonOf(code: number): FailureReason {
  return knownCodes.get(code) ?? `unknown_${code}`;
}

/** The sentence a failed status carries with its reason. */
export function failureText(code: number): string {
  const reason = failureReasonOf(code);
  if (reason === 'not_registered')
    return `Messages reported error ${code}: the recipient is not registered with iMessage`;
  if (reason === 'network') return `Messages reported error ${code}: it could not reach the iMessage service`;
  return `Messages reported error ${code}`;
}
