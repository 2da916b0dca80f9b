import { Type } from '@sinclair/typebox';
import type { InboundRecorder } from '../messages/inbound-recorder.ts';
import { frameLimits } from '../relay-protocol/frames.ts';
import type { RelaySessions, RelayState } from '../relays/relay-sessions.ts';
import { defineActor, defineProtocol } from '../runtime/actor.ts';

const text = (maxLength: number, minLength = 0) => Type.String({ minLength, maxLength });
const tenantId = text(64, 1);
const connection = { tenantId, session: Type.Integer({ minimum: 0 }) };

/**
 * Messages of the relay actor (`relay:<relayId>`): one per relay, the only
 * writer of its `relays` document. The gateway reports to it what the
 * relay's socket says; it tells the tenant actor only when the relay comes,
 * goes or changes capacity, never per heartbeat.
 */
export const relayProtocol = defineProtocol('relay', {
  /** A hello was accepted: a new session. With `registration`, the relay is created first. Answers `ConnectedRelay`. */
  connect: {
    tenantId,
    node: text(256, 1),
    name: text(frameLimits.nameLength, 1),
    systemInfo: Type.Object({ hostOsVersion: text(frameLimits.nameLength), hostname: text(frameLimits.nameLength) }, { additionalProperties: false }),
    phoneNumbers: Type.Optional(Type.Array(text(16, 1), { maxItems: 20 })),
    registration: Type.Optional(Type.Object({ teamId: text(64, 1), secretHash: text(128, 1) }, { additionalProperties: false })),
  },
  heartbeat: {
    ...connection,
    health: Type.Object({
      cpuPercent: Type.Number({ minimum: 0 }),
      memoryUsedBytes: Type.Integer({ minimum: 0 }),
      memoryTotalBytes: Type.Integer({ minimum: 0 }),
      messagesPerMinute: Type.Number({ minimum: 0 }),
      queueDepth: Type.Integer({ minimum: 0 }),
    }, { additionalProperties: false }),
  },
  ready: { ...connection, capacity: Type.Integer({ minimum: 0, maximum: frameLimits.maxCapacity }) },
  disconnect: { ...connection, reason: text(200) },
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
  },
});

/** One actor per relay: its session, heartbeat timeout, health, capacity and inbound cursor. */
export function relayActor(sessions: RelaySessions, inbound: InboundRecorder) {
  return defineActor<typeof relayProtocol, RelayState>(relayProtocol, {
    activate: () => sessions.activate(),
    handlers: {
      connect: (ctx, m) => sessions.connect(ctx, m),
      heartbeat: (ctx, m) => sessions.heartbeat(ctx, m),
      ready: (ctx, m) => sessions.ready(ctx, m),
      disconnect: (ctx, m) => sessions.offline(ctx, m, m.reason),
      'heartbeat-check': (ctx, m) => sessions.heartbeatCheck(ctx, m),
      inbound: async (ctx, m) => {
        const { kind: _kind, tenantId: orgId, ...report } = m;
        await inbound.record(ctx, orgId, { relayId: ctx.key, ...report });
      },
    },
  });
}
