import { attachmentStatuses } from './attachment-store.ts';
import { Type } from '@sinclair/typebox';
import { reactionKinds } from '../relay-protocol/frames.ts';
import { pageSchema } from '../http/pagination.ts';
import { named } from '../http/route.ts';
import { phoneNumberField, strictObject, violationKey, type ViolationNote } from '../http/validation.ts';
import { waitingReasons } from '../actors/tenant/protocol.ts';
import { hops, messageStatuses } from './message-store.ts';
import { recipientFormat, recipientRule } from './recipients.ts';
import { fallbackSchema } from './sms-fallback.ts';

export const maxBodyChars = 10_000;

const sendFields = {
  to: Type.String({
    minLength: 1,
    maxLength: 320,
    format: recipientFormat,
    description: `${recipientRule}; a phone number is stored as E.164`,
  }),
  body: Type.Optional(Type.String({ maxLength: maxBodyChars, description: 'required unless attachments are given' })),
  attachments: Type.Optional(
    Type.Array(Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2048 }), { maxItems: 10 }),
  ),
  priority: Type.Integer({ minimum: 0, maximum: 100, default: 0, description: 'higher is sent first' }),
  fromNumber: Type.Optional(phoneNumberField('an active registered phone number of the organization')),
  fallback: Type.Optional(fallbackSchema),
};

/** A message carries text, attachments or both. */
const sendRule = {
  anyOf: [
    { required: ['body'], properties: { body: { minLength: 1 } } },
    { required: ['attachments'], properties: { attachments: { minItems: 1 } } },
  ],
  [violationKey]: { path: 'body', message: 'is required unless attachments are given' } satisfies ViolationNote,
};

/** One send, as each entry of a bulk job takes it. */
export const sendBody = strictObject(sendFields, sendRule);

/** `POST /api/v1/messages`: a bulk entry's fields, and the admin's override of the suppression list for one transactional send. */
export const singleSendBody = strictObject(
  {
    ...sendFields,
    overrideOptOut: Type.Optional(
      Type.Boolean({
        description:
          'admin and owner only: send to a recipient on the suppression list all the same (one transactional message); recorded on the message',
      }),
    ),
  },
  sendRule,
);

const status = Type.Union(messageStatuses.map((s) => Type.Literal(s)));
const nullableString = Type.Union([Type.String(), Type.Null()]);
const nullableTime = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);
const time = Type.String({ format: 'date-time' });

/** A message as the API answers it (send, history, conversations). */
export const messageSchema = named(
  'Message',
  Type.Object({
    id: Type.String(),
    status,
    direction: Type.Union([Type.Literal('sent'), Type.Literal('received')]),
    to: Type.String(),
    from: nullableString,
    body: Type.String(),
    priority: Type.Integer(),
    attachments: Type.Array(Type.String()),
    fromNumber: nullableString,
    conversationId: Type.String(),
    attempts: Type.Integer(),
    lastError: nullableString,
    relayId: nullableString,
    teamId: Type.String(),
    parentId: Type.Optional(Type.String({ description: 'the group send this message belongs to' })),
    recipients: Type.Optional(Type.Integer({ description: 'a group send: how many members it went to' })),
    deadLettered: Type.Optional(Type.Boolean({ description: 'failed after every retry' })),
    overrideOptOut: Type.Optional(
      Type.Boolean({ description: 'an admin sent it to a recipient on the suppression list, on purpose' }),
    ),
    guid: Type.Optional(Type.String({ description: 'the Messages GUID, once the relay saw the message' })),
    queuedAt: nullableTime,
    sentAt: nullableTime,
    deliveredAt: nullableTime,
    readAt: nullableTime,
    failedAt: Type.Optional(nullableTime),
    failureReason: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'as MessageStatus' })),
    service: Type.Optional(Type.String({ description: 'as MessageStatus' })),
    fallback: Type.Optional(
      Type.Object(
        { sms: Type.String(), afterSeconds: Type.Optional(Type.Integer()) },
        { description: 'as the send asked (`if_undelivered` with its window)' },
      ),
    ),
    undeliveredAt: Type.Optional(Type.String({ format: 'date-time', description: 'as MessageStatus' })),
    reactions: Type.Optional(
      Type.Array(
        Type.Object({
          reaction: Type.Union(reactionKinds.map((k) => Type.Literal(k))),
          emoji: Type.Optional(Type.String({ description: 'an emoji tapback: its emoji' })),
          from: Type.String(),
          at: time,
        }),
        { description: 'tapbacks on it, one per sender (the latest), oldest first (`message.reaction` events)' },
      ),
    ),
    replyTo: Type.Optional(Type.String({ description: 'a received reply: the id of the message it answers' })),
    edited: Type.Optional(
      Type.Boolean({ description: 'a received message its sender edited: `body` is the edited text' }),
    ),
    editedAt: Type.Optional(time),
    unsent: Type.Optional(Type.Boolean({ description: 'a received message its sender unsent: `body` is empty' })),
    unsentAt: Type.Optional(time),
    createdAt: time,
    updatedAt: time,
  }),
);

/** A send answer: a group send adds the ids of its members' messages. */
export const sentMessageSchema = Type.Object({
  ...messageSchema.properties,
  messageIds: Type.Optional(Type.Array(Type.String(), { description: 'a group send: one message per member' })),
});

export const statusRecordSchema = named(
  'MessageStatus',
  Type.Object({
    id: Type.String(),
    status,
    waitingFor: Type.Union([...waitingReasons.map((w) => Type.Literal(w)), Type.Null()], {
      description:
        "a queued message: what it waits for (its sender line's rate or new-contact cap, a relay, its retry's backoff, the messages before it)",
    }),
    notBefore: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'a queued message held by pacing or a retry: not sent before this time',
    }),
    checkpoints: Type.Array(
      Type.Object({ hop: Type.Union(hops.map((h) => Type.Literal(h))), at: Type.String({ format: 'date-time' }) }),
      {
        maxItems: hops.length,
        description:
          "when the message passed each hop, in order: accepted, sms_fallback (given up on iMessage and queued again as SMS: the hops after it are the SMS attempt's), handed_to_relay, the relay agent's relay_received, handed_to_app and seen_in_database (when it reports them), sent, undelivered, delivered, failed",
      },
    ),
    jobId: Type.Union([Type.String(), Type.Null()], { description: 'the bulk job the message belongs to' }),
    attempts: Type.Integer(),
    lastError: nullableString,
    failureReason: Type.Union([Type.String(), Type.Null()], {
      description:
        "why the last attempt failed, when Messages said: `not_registered` (the recipient has no iMessage), `network`, or `unknown_<code>` (Messages' error code)",
    }),
    service: Type.Union([Type.String(), Type.Null()], {
      description:
        'the service Messages sent it over, as its relay saw it: `iMessage`, `SMS` (a recipient without iMessage) or `RCS`',
    }),
    undeliveredAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description:
        "sent, and not delivered within the organization's window (PUT /api/v1/organization/delivery): when that was noticed; a later delivery still applies",
    }),
    queuedAt: nullableTime,
    sentAt: nullableTime,
    deliveredAt: nullableTime,
    readAt: nullableTime,
    recipients: Type.Optional(
      Type.Array(Type.Object({ id: Type.String(), to: Type.String(), status }), {
        description: 'a group send: each member message',
      }),
    ),
  }),
);

/** `pending` until its relay uploads it, then `ready`; `failed` (with `reason`) when it never will; a sent message's are `ready`. */
const attachmentStatus = Type.Union(attachmentStatuses.map((s) => Type.Literal(s)));

export const attachmentListSchema = Type.Object({
  data: Type.Array(
    named(
      'Attachment',
      Type.Object({
        id: Type.String(),
        url: Type.Union([Type.String({ format: 'uri' }), Type.Null()], {
          description: 'signed link, valid until expiresAt; null unless ready',
        }),
        filename: Type.String(),
        mimeType: Type.String(),
        size: Type.Union([Type.Integer(), Type.Null()]),
        status: attachmentStatus,
        reason: Type.Optional(Type.String({ description: 'why it failed' })),
        expiresAt: time,
      }),
    ),
  ),
});

/** What a relay's upload answers. */
export const uploadedAttachmentSchema = Type.Object({
  id: Type.String(),
  status: attachmentStatus,
  size: Type.Union([Type.Integer(), Type.Null()]),
});

export const queueStatsSchema = named(
  'QueueStats',
  Type.Object({
    pending: Type.Integer(),
    processing: Type.Integer(),
    failed: Type.Integer(),
    deadLetter: Type.Integer(),
  }),
);

export const conversationSchema = named(
  'Conversation',
  Type.Object({
    id: Type.String(),
    teamId: Type.String(),
    participant: Type.String(),
    participantName: nullableString,
    lastMessage: Type.String(),
    lastMessageAt: time,
    unreadCount: Type.Integer(),
    isGroup: Type.Boolean(),
    name: Type.Optional(
      Type.String({ description: "a group chat: its name, as its relay last saw it renamed ('' when removed)" }),
    ),
    participants: Type.Optional(
      Type.Array(Type.String(), {
        description: "a group chat: its members, as its relay's Messages had them at the latest group event",
      }),
    ),
    createdAt: time,
    updatedAt: time,
  }),
);

export const messagePageSchema = pageSchema(messageSchema);

/** A conversation with one page of its messages, newest first. */
export const conversationWithMessagesSchema = Type.Object({
  ...conversationSchema.properties,
  messages: Type.Array(messageSchema),
  pagination: messagePageSchema.properties.pagination,
});
