import { defineActor } from '../../runtime/actor.ts';
import type { InboundRecorder } from './inbound-recorder.ts';
import { relayProtocol } from './protocol.ts';
import type { RelaySends } from './relay-sends.ts';
import type { RelaySessions } from './relay-sessions.ts';
import type { RelayState } from './relay-state.ts';

/** One actor per relay: its session, heartbeat timeout, health, capacity, sends in flight and inbound cursor. */
export function relayActor(sessions: RelaySessions, sends: RelaySends, inbound: InboundRecorder) {
  return defineActor<typeof relayProtocol, RelayState>(relayProtocol, {
    activate: () => sessions.activate(),
    handlers: {
      connect: (ctx, m) => sessions.connect(ctx, m),
      heartbeat: (ctx, m) => sessions.heartbeat(ctx, m),
      ready: (ctx, m) => sessions.ready(ctx, m),
      disconnect: (ctx, m) => sessions.offline(ctx, m, m.reason),
      'heartbeat-check': (ctx, m) => sessions.heartbeatCheck(ctx, m),
      // Each first loads the document, and with it the sends in flight as the store has them.
      attach: async (ctx, m) => sends.attach(ctx, await sessions.load(ctx, m.tenantId), m),
      deliver: async (ctx, m) => sends.deliver(ctx, await sessions.load(ctx, m.tenantId), m),
      status: async (ctx, m) => {
        await sessions.load(ctx, m.tenantId);
        await sends.status(ctx, m);
      },
      'send-timeout': async (ctx, m) => {
        await sessions.load(ctx, m.tenantId);
        await sends.sendTimeout(ctx, m);
      },
      'hand-back': async (ctx, m) => sends.handBackStray(ctx, await sessions.load(ctx, m.tenantId), m.tenantId),
      inbound: async (ctx, m) => {
        const { kind: _kind, tenantId, ...report } = m;
        await inbound.record(ctx, tenantId, { relayId: ctx.key, ...report });
      },
    },
  });
}
