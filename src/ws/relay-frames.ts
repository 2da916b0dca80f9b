import { relayProtocol, type ConnectedRelay } from '../actors/relay/protocol.ts';
import type { Logger } from '../log.ts';
import { type AgentFrame, type HelloFrame, type StatusFrame } from '../relay-protocol/frames.ts';
import { acceptsTraceparent, answersCheckSent, answersLookup } from './agent-versions.ts';
import type { RelayRegistry } from '../relays/relay-registry.ts';
import { actorClient, type ActorClient } from '../runtime/actor.ts';
import type { Transport } from '../runtime/types.ts';
import type { RelaySockets, RelayWebSocket } from './relay-sockets.ts';

/**
 * What each valid frame of a relay does: a hello is checked against the
 * registry and opens a session with the relay actor; every later frame
 * becomes a message to that actor, carrying the session it came on.
 */
export class RelayFrames {
  private readonly relays: ActorClient<typeof relayProtocol>;

  constructor(
    private readonly deps: {
      registry: RelayRegistry;
      runtime: Transport;
      sockets: RelaySockets;
      heartbeatIntervalMs: number;
      log: Logger;
    },
  ) {
    this.relays = actorClient(deps.runtime, relayProtocol);
  }

  async handle(ws: RelayWebSocket, frame: AgentFrame): Promise<void> {
    const { sockets } = this.deps;
    const state = ws.getUserData();
    if (frame.type === 'hello') {
      if (state.relay)
        return void sockets.write(ws, {
          type: 'error',
          code: 'validation_error',
          message: 'hello was already accepted',
        });
      return this.hello(ws, frame);
    }
    const relay = state.relay;
    if (!relay) return sockets.refuse(ws, 'unauthorized', 'say hello first');
    const session = { tenantId: relay.tenantId, session: relay.session };
    switch (frame.type) {
      case 'heartbeat':
        sockets.markDegraded(relay.id, ws, frame.degraded !== undefined);
        return void (await this.relays.send(relay.id, {
          kind: 'heartbeat',
          ...session,
          health: frame.health,
          ...(frame.degraded ? { degraded: frame.degraded } : {}),
        }));
      case 'ready':
        return void (await this.relays.send(relay.id, { kind: 'ready', ...session, capacity: frame.capacity }));
      case 'status':
        return this.reports(ws, [frame]);
      case 'availability':
        return sockets.lookupAnswered(relay.id, frame);
      case 'sentCheck':
        return sockets.sentChecked(relay.id, frame);
      case 'inbound': {
        // The relay actor acknowledges the cursor once the message is stored.
        const { type: _type, ...inbound } = frame;
        await this.relays.send(relay.id, { kind: 'inbound', ...session, ...inbound });
        return;
      }
      case 'change': {
        // Acknowledged by the relay actor once the change is stored.
        const { type: _type, ...change } = frame;
        await this.relays.send(relay.id, { kind: 'change', ...session, ...change });
        return;
      }
    }
  }

  /**
   * Status frames, in the order they came: to the relay actor, which settles
   * the sends in flight and passes the reports on to the tenant actor; one
   * `status` for one frame, one `statuses` for several. Each is acknowledged
   * once the relay actor's message is sent.
   */
  async reports(ws: RelayWebSocket, frames: StatusFrame[]): Promise<void> {
    const { sockets } = this.deps;
    const relay = ws.getUserData().relay;
    if (!relay) return sockets.refuse(ws, 'unauthorized', 'say hello first');
    const session = { tenantId: relay.tenantId, session: relay.session };
    const reports = frames.map(({ type: _type, ...report }) => report);
    await this.relays.send(
      relay.id,
      reports.length === 1 ? { kind: 'status', ...session, ...reports[0]! } : { kind: 'statuses', ...session, reports },
    );
    for (const f of frames)
      sockets.write(ws, { type: 'ack', of: 'status', messageId: f.messageId, attempt: f.attempt });
  }

  /** The socket closed: the relay actor hears it after the socket's own frames, so its last statuses are in before its messages are handed back. */
  closed(ws: RelayWebSocket): void {
    const state = ws.getUserData();
    const relay = state.relay;
    if (!relay) return;
    this.deps.sockets.release(relay.id, ws);
    this.deps.sockets.track(
      state.work
        .then(() =>
          this.relays.send(relay.id, {
            kind: 'disconnect',
            tenantId: relay.tenantId,
            session: relay.session,
            reason: 'socket closed',
          }),
        )
        .catch((err) =>
          this.deps.log.warn(
            { err, relayId: relay.id },
            'could not report a relay offline; its heartbeat timeout will',
          ),
        ),
    );
  }

  private async hello(ws: RelayWebSocket, frame: HelloFrame): Promise<void> {
    const { sockets } = this.deps;
    const state = ws.getUserData();
    const registration = await this.deps.registry.register(frame);
    if (state.closed) return;
    if (!registration.ok) return sockets.refuse(ws, registration.code, registration.message);
    const { relayId, tenantId } = registration;
    const relay = await this.relays.ask<ConnectedRelay>(relayId, {
      kind: 'connect',
      tenantId,
      node: this.deps.runtime.nodeId,
      name: frame.name,
      systemInfo: frame.systemInfo,
      ...(frame.phoneNumbers ? { phoneNumbers: frame.phoneNumbers } : {}),
      ...(registration.registration ? { registration: registration.registration } : {}),
    });
    if (state.closed) {
      await this.relays.send(relayId, {
        kind: 'disconnect',
        tenantId,
        session: relay.session,
        reason: 'closed during hello',
      });
      return;
    }
    clearTimeout(state.helloTimer);
    state.relay = { id: relayId, tenantId, session: relay.session };
    state.acceptsTraceparent = acceptsTraceparent(frame.agentVersion);
    state.answersLookup = answersLookup(frame.agentVersion);
    state.answersCheckSent = answersCheckSent(frame.agentVersion);
    sockets.adopt(relayId, ws);
    sockets.write(ws, {
      type: 'welcome',
      relayId,
      ...(registration.credential ? { credential: registration.credential } : {}),
      inboundCursor: relay.inboundCursor,
      heartbeatIntervalMs: this.deps.heartbeatIntervalMs,
    });
    this.deps.log.info({ tenantId, relayId, session: relay.session }, 'relay connected');
  }
}
