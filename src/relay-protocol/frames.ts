/**
 * The relay WebSocket protocol: one JSON object per text frame, each with a
 * `type`. These schemas are the validation, the static types and the
 * documentation at once; the server (src/ws) and the desktop agent
 * (packages/relay-agent) both import them, so the two ends cannot drift.
 *
 * Delivery rules the schemas cannot say:
 * - `ready.capacity` is the credit window: the server keeps at most
 *   `capacity` sends unfinished on one connection, where a send is finished
 *   once the agent reports `sent` or `failed` (`delivered` and `read` come
 *   later and hold no credit; one that comes first finishes the send too).
 *   The agent repeats `ready` whenever a send finishes; the latest value is
 *   the window.
 * - A send attempt is identified by (messageId, attempt) end to end: the
 *   `send` frame, the agent's journal, every `status` and its `ack` carry both.
 *   A retry of a failed attempt comes with the next attempt number and is sent
 *   again; a `send` for an attempt the agent already has (a reconnect, a
 *   redelivered frame) is never sent twice: the agent re-reports its statuses.
 * - The server applies a `status` only to the message's current attempt on
 *   that relay; a late report of an earlier attempt changes nothing.
 * - Each `status` frame is acked with `ack {of:'status', messageId, attempt}`;
 *   statuses not acked are sent again after a reconnect, so the server may see
 *   one twice.
 * - `inbound` rows are at-least-once: the agent sends every row after the
 *   server's `welcome.inboundCursor` and moves its own cursor only on an
 *   `ack` with `of: 'inbound'`; the server dedupes by `guid`. A tapback is an
 *   `inbound` row with `reaction` (its body is the text Messages wrote for
 *   older clients); a reply has `replyTo`; a group event (renamed, a member
 *   added or gone) has `group` and an empty body.
 * - An `inbound` row's attachments (`files`) are named, never located: the
 *   agent uploads each file's bytes over HTTP (`attachmentUploadPath`) once
 *   the row is acked, and the server records them `pending` until then.
 * - `change` frames (an edit or unsend of a received message, which changes
 *   an old row in place, so the ROWID cursor never sees it) are at-least-once
 *   too, in the order of their `at`: each is acked with `ack {of:'change',
 *   guid, at}`, and the agent keeps the latest acked `at` as its own cursor.
 *   The server makes each change's event once (its id comes from the guid
 *   and `at`).
 * - Fields and frames added later (`reaction`, `replyTo`, `group`, `change`) are
 *   optional or sent only by newer agents: a server is upgraded before its
 *   agents, since a server refuses a field it does not know.
 * - A `lookup` is answered by one `availability` with its `lookupId`; the
 *   server waits a few seconds for it and never repeats it (a lost answer is
 *   a lookup the API caller may make again).
 * - A `checkSent` (failover-frames.ts) is answered by one `sentCheck` with its
 *   `checkId`, the same way.
 *
 * Each end reads a frame with `parseFrame` (frame-parser.ts).
 */
import { Type, type Static } from '@sinclair/typebox';
import { checkSentFrame, sentCheckFrame } from './failover-frames.ts';

export { checkSentFrame, sentCheckFrame, type CheckSentFrame, type SentCheckFrame } from './failover-frames.ts';

/** Where a relay opens its WebSocket. */
export const relaySocketPath = '/api/v1/relays/connect';
/** Where a relay uploads an inbound attachment's bytes: `PUT <path>/<guid>`, `Authorization: Bearer <relayId>:<secret>`. */
export const attachmentUploadPath = '/api/v1/relay/attachments';

/** Every size bound of the protocol in one place. */
export const frameLimits = {
  idLength: 128,
  secretLength: 256,
  tokenLength: 512,
  nameLength: 200,
  handleLength: 320,
  guidLength: 200,
  bodyLength: 20_000,
  errorLength: 2_000,
  attachments: 10,
  groupMembers: 100,
  urlLength: 2_048,
  pathLength: 1_024,
  maxCapacity: 1_000,
  maxAttempt: 1_000,
  traceparentLength: 128,
  /** Largest text frame either end should accept (bodies are the bulk of it). */
  maxFrameBytes: 1024 * 1024,
} as const;

const L = frameLimits;
const str = (maxLength: number, minLength = 1) => Type.String({ minLength, maxLength });
const isoTime = Type.String({ format: 'date-time', maxLength: 40 });
/** Which attempt at sending a message, counted from 1 by the server. */
const attemptNumber = Type.Integer({ minimum: 1, maximum: L.maxAttempt });
const strict = { additionalProperties: false } as const;

export const relayCredential = Type.Object({ relayId: str(L.idLength), secret: str(L.secretLength) }, strict);

// ---------------------------------------------------------------- agent → server

export const helloFrame = Type.Object(
  {
    type: Type.Literal('hello'),
    registrationToken: Type.Optional(str(L.tokenLength)),
    credential: Type.Optional(relayCredential),
    name: str(L.nameLength),
    systemInfo: Type.Object({ hostOsVersion: str(L.nameLength, 0), hostname: str(L.nameLength, 0) }, strict),
    agentVersion: str(64),
    /** The phone numbers this relay's Messages account sends from: a message with one of them as fromNumber goes to this relay. */
    phoneNumbers: Type.Optional(
      Type.Array(Type.String({ pattern: '^\\+[1-9][0-9]{7,14}$', maxLength: 16 }), { maxItems: 20 }),
    ),
  },
  {
    ...strict,
    // Exactly one way to authenticate: a first registration or a stored credential.
    oneOf: [{ required: ['registrationToken'] }, { required: ['credential'] }],
  },
);

export const heartbeatFrame = Type.Object(
  {
    type: Type.Literal('heartbeat'),
    health: Type.Object(
      {
        cpuPercent: Type.Number({ minimum: 0, maximum: 100_000 }),
        memoryUsedBytes: Type.Integer({ minimum: 0 }),
        memoryTotalBytes: Type.Integer({ minimum: 0 }),
        messagesPerMinute: Type.Number({ minimum: 0 }),
        queueDepth: Type.Integer({ minimum: 0 }),
      },
      strict,
    ),
    /** Present while the relay cannot send (Messages writes no rows for its sends): why, in a sentence. */
    degraded: Type.Optional(str(L.errorLength)),
  },
  strict,
);

export const readyFrame = Type.Object(
  { type: Type.Literal('ready'), capacity: Type.Integer({ minimum: 0, maximum: L.maxCapacity }) },
  strict,
);

export const deliveryStatus = Type.Union([
  Type.Literal('sent'),
  Type.Literal('delivered'),
  Type.Literal('read'),
  Type.Literal('failed'),
]);

/**
 * The hops an agent sees of a send before its status, in order: it received
 * the `send` frame, handed the message to the Messages app, and saw its row
 * in chat.db. Optional on `status`: an agent that does not report them is
 * still served, and the message's record shows the hops the server saw.
 */
export const agentHops = ['relay_received', 'handed_to_app', 'seen_in_database'] as const;
export const agentCheckpoint = Type.Object(
  { hop: Type.Union(agentHops.map((h) => Type.Literal(h))), at: isoTime },
  strict,
);

/**
 * Why Messages failed a send, from its chat.db row's `error` code: `not_registered`
 * (the recipient has no iMessage), `network` (Messages could not reach the service),
 * `unknown_<code>` for any other code. Optional on `status`: an older agent reports a failure without it.
 */
export const failureReason = Type.String({
  pattern: '^(not_registered|network|unknown_-?[0-9]{1,10})$',
  maxLength: 32,
});
/** The service Messages sent over, as its chat.db row names it (`iMessage`, `SMS`, `RCS`). */
export const sendService = Type.String({ pattern: '^[A-Za-z0-9.]{1,32}$', maxLength: 32 });

export const statusFrame = Type.Object(
  {
    type: Type.Literal('status'),
    messageId: str(L.idLength),
    attempt: attemptNumber,
    status: deliveryStatus,
    at: isoTime,
    error: Type.Optional(str(L.errorLength, 0)),
    /** On `failed` from a chat.db row's error: the mapped reason (`failureReason`). */
    reason: Type.Optional(failureReason),
    /** The service of the outgoing chat.db row, once matched (`sendService`). */
    service: Type.Optional(sendService),
    /** The Messages GUID of the outgoing chat.db row, once matched. */
    guid: Type.Optional(str(L.guidLength)),
    /** The hops of this attempt the agent saw (`agentHops`), each once; optional. */
    checkpoints: Type.Optional(Type.Array(agentCheckpoint, { maxItems: agentHops.length })),
  },
  strict,
);

/** The tapbacks by `associated_message_type` − 2000 (a removal: − 3000), as Messages numbers them. */
export const reactionKinds = ['love', 'like', 'dislike', 'laugh', 'emphasize', 'question', 'emoji', 'sticker'] as const;

/** A message of this relay's chat.db an inbound row points at: its guid, and our message id when the agent knows it (one it sent). */
const messageRef = {
  guid: str(L.guidLength),
  /** The id the server gave the message, when the agent sent it (received messages' ids follow from their guid). */
  messageId: Type.Optional(str(L.idLength)),
};

export const messageReference = Type.Object(messageRef, strict);

export const inboundReaction = Type.Object(
  {
    kind: Type.Union(reactionKinds.map((k) => Type.Literal(k))),
    ...messageRef,
    /** An emoji tapback's emoji. */
    emoji: Type.Optional(str(64)),
    removed: Type.Boolean(),
  },
  strict,
);

export const groupEvent = Type.Object(
  {
    change: Type.Union([Type.Literal('renamed'), Type.Literal('participant_added'), Type.Literal('participant_left')]),
    /** For `renamed`: the new name (empty: the name was removed). */
    name: Type.Optional(str(L.nameLength, 0)),
    /** For a member change: the member. */
    handle: Type.Optional(str(L.handleLength)),
    /** The group's members as the relay's chat.db has them when the event is read. */
    participants: Type.Optional(Type.Array(str(L.handleLength), { maxItems: L.groupMembers })),
  },
  strict,
);

/**
 * An attachment of an inbound row, without its path on the Mac: the agent
 * uploads its bytes over HTTP (`PUT attachmentUploadPath/<guid>` with the
 * relay credential) after the row's `ack`; `unavailable` says why it never
 * will (the file is not on the Mac).
 */
export const inboundFile = Type.Object(
  {
    guid: str(L.guidLength),
    name: str(L.nameLength),
    mimeType: Type.Optional(str(L.nameLength)),
    size: Type.Optional(Type.Integer({ minimum: 0 })),
    unavailable: Type.Optional(str(L.errorLength)),
  },
  strict,
);

export const inboundFrame = Type.Object(
  {
    type: Type.Literal('inbound'),
    /** chat.db message.ROWID: the replay cursor. */
    rowId: Type.Integer({ minimum: 1 }),
    guid: str(L.guidLength),
    from: str(L.handleLength),
    chatGuid: Type.Optional(str(L.guidLength)),
    isGroup: Type.Boolean(),
    body: str(L.bodyLength, 0),
    receivedAt: isoTime,
    /** Agents before 0.4: the attachments' file paths on the Mac (the server keeps only their names). */
    attachments: Type.Optional(Type.Array(str(L.pathLength), { maxItems: L.attachments })),
    /** The row's attachments, by their chat.db guid: the agent uploads each one's bytes once the row is acked. Agents from 0.4. */
    files: Type.Optional(Type.Array(inboundFile, { maxItems: L.attachments })),
    /** A tapback row: what it does to which message (the target's `guid`). */
    reaction: Type.Optional(inboundReaction),
    /** A reply: the message it answers (`thread_originator_guid`). */
    replyTo: Type.Optional(messageReference),
    /** A group event of the group chat `chatGuid` (`from` made it): renamed, or a member added or gone. */
    group: Type.Optional(groupEvent),
  },
  strict,
);

/** A received message the sender edited (with its text now) or unsent, at `at`. */
export const changeFrame = Type.Object(
  {
    type: Type.Literal('change'),
    rowId: Type.Integer({ minimum: 1 }),
    guid: str(L.guidLength),
    change: Type.Union([Type.Literal('edited'), Type.Literal('unsent')]),
    at: isoTime,
    /** For `edited`: the text as edited. */
    body: Type.Optional(str(L.bodyLength, 0)),
  },
  strict,
);

/**
 * The answer to a `lookup`: whether the handle is reached on iMessage, as the
 * agent can tell; null when it cannot. `source` says how it knows:
 * `history` (the service of the newest chat.db row with that handle),
 * `simulator` (the simulated Messages app's rule).
 */
export const availabilityFrame = Type.Object(
  {
    type: Type.Literal('availability'),
    lookupId: str(L.idLength),
    imessage: Type.Union([Type.Boolean(), Type.Null()]),
    source: Type.String({ pattern: '^[a-z_]{1,32}$', maxLength: 32 }),
  },
  strict,
);

// ---------------------------------------------------------------- server → agent

export const welcomeFrame = Type.Object(
  {
    type: Type.Literal('welcome'),
    relayId: str(L.idLength),
    /** Present only on the first registration; the agent stores it. */
    credential: Type.Optional(relayCredential),
    /** Highest chat.db ROWID of inbound rows the server has durably stored; 0 if none. */
    inboundCursor: Type.Integer({ minimum: 0 }),
    heartbeatIntervalMs: Type.Integer({ minimum: 100, maximum: 3_600_000 }),
  },
  strict,
);

export const sendFrame = Type.Object(
  {
    type: Type.Literal('send'),
    messageId: str(L.idLength),
    attempt: attemptNumber,
    to: str(L.handleLength),
    body: Type.Optional(str(L.bodyLength, 0)),
    /** http(s) URLs the agent downloads before sending. */
    attachments: Type.Optional(Type.Array(str(L.urlLength), { maxItems: L.attachments })),
    fromNumber: Type.Optional(str(L.handleLength)),
    /** `SMS`: send it as SMS (the Mac's text message forwarding); an earlier attempt found no iMessage. Agents from 0.3. */
    service: Type.Optional(Type.Literal('SMS')),
    /** The send's fallback: the agent sends as SMS a recipient it knows has no iMessage. Agents from 0.3. */
    fallback: Type.Optional(Type.Object({ sms: Type.Literal('if_not_imessage') }, strict)),
    /**
     * W3C trace context of this send attempt (`00-<trace id>-<span id>-<flags>`):
     * the trace of the request that sent the message, with a span id of its
     * own. Absent for messages stored without one, and for agents older
     * than `traceparentSince`, which refuse fields they do not know.
     */
    traceparent: Type.Optional(str(L.traceparentLength)),
  },
  strict,
);

/** Asks an agent which service a handle is reached on; it answers with `availability`. Sent only to agents of `lookupSince` or newer. */
export const lookupFrame = Type.Object(
  { type: Type.Literal('lookup'), lookupId: str(L.idLength), handle: str(L.handleLength) },
  strict,
);

export const ackFrame = Type.Object(
  {
    type: Type.Literal('ack'),
    of: Type.Union([Type.Literal('inbound'), Type.Literal('status'), Type.Literal('change')]),
    /** For `of: 'inbound'`: the ROWID now durably stored. */
    cursor: Type.Optional(Type.Integer({ minimum: 0 })),
    /** For `of: 'status'`: the status's message and attempt. */
    messageId: Type.Optional(str(L.idLength)),
    attempt: Type.Optional(attemptNumber),
    /** For `of: 'change'`: the change's guid and time. */
    guid: Type.Optional(str(L.guidLength)),
    at: Type.Optional(isoTime),
  },
  strict,
);

export const errorFrame = Type.Object(
  { type: Type.Literal('error'), code: str(64), message: str(L.errorLength, 0) },
  strict,
);

export const agentFrame = Type.Union([
  helloFrame,
  heartbeatFrame,
  readyFrame,
  statusFrame,
  inboundFrame,
  changeFrame,
  availabilityFrame,
  sentCheckFrame,
]);
export const serverFrame = Type.Union([welcomeFrame, sendFrame, ackFrame, errorFrame, lookupFrame, checkSentFrame]);

export type RelayCredential = Static<typeof relayCredential>;
export type HelloFrame = Static<typeof helloFrame>;
export type HeartbeatFrame = Static<typeof heartbeatFrame>;
export type DeliveryStatus = Static<typeof deliveryStatus>;
export type StatusFrame = Static<typeof statusFrame>;
export type AgentCheckpoint = Static<typeof agentCheckpoint>;
export type FailureReason = Static<typeof failureReason>;
export type InboundFrame = Static<typeof inboundFrame>;
export type InboundFile = Static<typeof inboundFile>;
export type InboundReaction = Static<typeof inboundReaction>;
export type GroupEvent = Static<typeof groupEvent>;
export type ChangeFrame = Static<typeof changeFrame>;
export type WelcomeFrame = Static<typeof welcomeFrame>;
export type SendFrame = Static<typeof sendFrame>;
export type AckFrame = Static<typeof ackFrame>;
export type LookupFrame = Static<typeof lookupFrame>;
export type AvailabilityFrame = Static<typeof availabilityFrame>;
export type ErrorFrame = Static<typeof errorFrame>;
export type AgentFrame = Static<typeof agentFrame>;
export type ServerFrame = Static<typeof serverFrame>;
