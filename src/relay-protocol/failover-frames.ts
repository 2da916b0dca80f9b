/**
 * The frames of a failover check (docs/relay-agent.md, "Standby relays"): before
 * a standby sends a message its line's primary held when it went offline,
 * the server asks the standby whether its Messages database already has it.
 * Both Macs of a line are signed in to one Apple ID, so what the primary's
 * Mac sent reaches the standby's chat.db through iCloud. Sent only to agents
 * of `checkSentSince` (src/ws/agent-versions.ts) or newer.
 */
import { Type, type Static } from '@sinclair/typebox';

const str = (maxLength: number, minLength = 1) => Type.String({ minLength, maxLength });
const strict = { additionalProperties: false } as const;

/** Asks whether a message with this text went to this recipient from this Apple ID since `since`; answered by one `sentCheck`. */
export const checkSentFrame = Type.Object(
  {
    type: Type.Literal('checkSent'),
    checkId: str(128),
    to: str(320),
    body: str(20_000, 0),
    /** When the primary was handed the message: a row older than this is another message with the same text. */
    since: Type.String({ format: 'date-time', maxLength: 40 }),
  },
  strict,
);

/** The answer to a `checkSent`: `sent` true with the row's guid when chat.db has it, false when it has not. */
export const sentCheckFrame = Type.Object(
  {
    type: Type.Literal('sentCheck'),
    checkId: str(128),
    sent: Type.Boolean(),
    guid: Type.Optional(str(200)),
  },
  strict,
);

export type CheckSentFrame = Static<typeof checkSentFrame>;
export type SentCheckFrame = Static<typeof sentCheckFrame>;
