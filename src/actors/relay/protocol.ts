import { Type } from '@sinclair/typebox';
import {
  deliveryStatus,
  failureReason,
  frameLimits,
  groupEvent,
  inboundFile,
  inboundReaction,
  messageReference,
  sendService,
} from '../../relay-protocol/frames.ts';
import { defineProtocol } from '../../runtime/actor.ts';
import { agentCheckpoints, queueItem, statusBatch } from '../tenant/protocol.ts';

/** Reports one `statuses` message carries at most, to the relay actor as to the tenant actor. */
export { statusBatch };

const text = (maxLength: number, minLength = 0) => Type.String({ minLength, maxLength });
const tenantId = text(64, 1);
const connection = { tenantId, session: Type.Integer({ minimum: 0 }) };
const messageId = text(frameLimits.idLength, 1);
const attempt = Type.Integer({ minimum: 1 });
/** The tenant actor's join of a session (new at every join): credits are granted to it, and only it uses them. */
const epoch = text(64, 1);
/** What a relay says of a send attempt (its status frame, less the frame's type). */
const report = {
  messageId,
  status: deliveryStatus,
  at: text(40),
  error: Type.Optional(text(frameLimits.errorLength)),
  guid: Type.Optional(text(frameLimits.guidLength)),
  reason: Type.Optional(failureReason),
  service: Type.Optional(sendService),
  attempt,
  checkpoints: Type.Optional(agentCheckpoints),
};

/**
 * Messages of the relay actor (`relay:<relayId>`): one per relay, the only
 * writer of its `relays` document and the keeper of its sends in flight.
 * The gateway reports to it what the relay's socket says; it tells the
 * tenant actor when the relay comes or goes and grants it credits as sends
 * settle, never anything per heartbeat.
 */
export const relayProtocol = defineProtocol('relay', {
  /** A hello was accepted: a new session. With `registration`, the relay is created first. Answers `ConnectedRelay`. */
  connect: {
    tenantId,
    node: text(256, 1),
    name: text(frameLimits.nameLength, 1),
    systemInfo: Type.Object(
      { hostOsVersion: text(frameLimits.nameLength), hostname: text(frameLimits.nameLength) },
      { additionalProperties: false },
    ),
    phoneNumbers: Type.Optional(Type.Array(text(16, 1), { maxItems: 20 })),
    registration: Type.Optional(
      Type.Object({ teamId: text(64, 1), secretHash: text(128, 1) }, { additionalProperties: false }),
    ),
  },
  heartbeat: {
    ...connection,
    health: Type.Object(
      {
        cpuPercent: Type.Number({ minimum: 0 }),
        memoryUsedBytes: Type.Integer({ minimum: 0 }),
        memoryTotalBytes: Type.Integer({ minimum: 0 }),
        messagesPerMinute: Type.Number({ minimum: 0 }),
        queueDepth: Type.Integer({ minimum: 0 }),
      },
      { additionalProperties: false },
    ),
    /** Why the relay cannot send (a stuck Messages app); absent when it can. */
    degraded: Type.Optional(text(frameLimits.errorLength, 1)),
  },
  ready: { ...connection, capacity: Type.Integer({ minimum: 0, maximum: frameLimits.maxCapacity }) },
  disconnect: { ...connection, reason: text(200) },
  /** A tenant actor activation asks for the credits of this session (it holds none). */
  attach: { ...connection, epoch },
  /** The tenant actor hands these queued messages to the relay, one credit each: claimed here and sent as frames. */
  deliver: { ...connection, epoch, items: Type.Array(queueItem, { minItems: 1, maxItems: frameLimits.maxCapacity }) },
  /** The relay's report on a send (its socket's session may be an older one). */
  status: { ...connection, ...report },
  /** Reports that reached one socket together, in the order they came: handled as that many `status`, in one message. */
  statuses: {
    ...connection,
    reports: Type.Array(Type.Object(report, { additionalProperties: false }), { minItems: 1, maxItems: statusBatch }),
  },
  /** A timer: has the relay reported on this attempt in time? (One a send, as an earlier version armed them.) */
  'send-timeout': { tenantId, messageId, attempt },
  /** A timer: has the relay reported in time on each of these attempts, handed over together? */
  'send-timeouts': {
    tenantId,
    sends: Type.Array(Type.Object({ messageId, attempt }, { additionalProperties: false }), {
      minItems: 1,
      maxItems: frameLimits.maxCapacity,
    }),
  },
  /** The tenant actor found messages in flight on this relay while it is not online: they are handed back. */
  'hand-back': { tenantId },
  /** A timer: has the session sent a heartbeat within the timeout? */
  'heartbeat-check': connection,
  inbound: {
    ...connection,
    rowId: Type.Integer({ minimum: 1 }),
    guid: text(frameLimits.guidLength, 1),
    from: text(frameLimits.handleLength, 1),
    chatGuid: Type.Optional(text(frameLimits.guidLength)),
    isGroup: Type.Boolean(),
    body: text(frameLimits.bodyLength),
    receivedAt: text(40, 1),
    attachments: Type.Optional(Type.Array(text(frameLimits.pathLength), { maxItems: frameLimits.attachments })),
    files: Type.Optional(Type.Array(inboundFile, { maxItems: frameLimits.attachments })),
    reaction: Type.Optional(inboundReaction),
    replyTo: Type.Optional(messageReference),
    group: Type.Optional(groupEvent),
  },
  /** A received message edited or unsent (relay-protocol `change` frame). */
  change: {
    ...connection,
    rowId: Type.Integer({ minimum: 1 }),
    guid: text(frameLimits.guidLength, 1),
    change: Type.Union([Type.Literal('edited'), Type.Literal('unsent')]),
    at: text(40, 1),
    body: Type.Optional(text(frameLimits.bodyLength)),
  },
});

/** What `connect` answers the gateway. */
export interface ConnectedRelay {
  session: number;
  inboundCursor: number;
}
