import type { TemplatedApp, WebSocket } from '@trufflesuite/uws-js-unofficial';
import { Gauge, register } from 'prom-client';
import type { Logger } from '../log.ts';
import { agentFrame, frameLimits, parseFrame, relaySocketPath, type AgentFrame, type HelloFrame, type ServerFrame } from '../relay-protocol/frames.ts';
import type { RelayLink } from '../relays/relay-link.ts';
import type { RelayRegistry } from '../relays/relay-registry.ts';
import { relayProtocol, type ConnectedRelay } from '../actors/relay/protocol.ts';
import { actorClient } from '../runtime/actor.ts';
import type { Transport } from '../runtime/types.ts';

interface RelaySocket {
  /** Set once the hello is accepted. */
  relay?: { id: string; tenantId: string; session: number };
  badFrames: number;
  closed: boolean;
  helloTimer?: NodeJS.Timeout;
  /** Frames handled one after another, in the order they arrived. */
  work: Promise<void>;
}

export interface RelayGatewayOptions {
  heartbeatIntervalMs: number;
  /** A socket that has not said hello this long is closed. */
  helloTimeoutMs: number;
  /** Bad frames a connection may send before it is closed. */
  maxBadFrames: number;
  /** Bytes queued for a relay that is not reading before it is disconnected. */
  maxBackpressureBytes: number;
}

const onlineGauge = (register.getSingleMetric('relaybox_relays_connected') as Gauge | undefined) ?? new Gauge({
  name: 'relaybox_relays_connected',
  help: 'Relay sockets held by this frontend',
});

/**
 * The relay WebSocket gateway: authenticates a relay's hello, keeps its
 * socket, turns its frames into relay actor messages, and writes the frames
 * actors address to it. Every frame is validated against its schema.
 */
export function attachRelayGateway(
  app: TemplatedApp,
  deps: { registry: RelayRegistry; runtime: Transport; link: RelayLink; log: Logger },
  opts: RelayGatewayOptions,
) {
  const log = deps.log.child({ component: 'relay-gateway' });
  const relays = actorClient(deps.runtime, relayProtocol);
  const sockets = new Map<string, WebSocket<RelaySocket>>();
  const pending = new Set<Promise<unknown>>();
  const maxBadFrames = opts.maxBadFrames;
  const backpressureCap = opts.maxBackpressureBytes;

  const track = <T>(p: Promise<T>): Promise<T> => {
    pending.add(p);
    void p.finally(() => pending.delete(p)).catch(() => undefined);
    return p;
  };

  function write(ws: WebSocket<RelaySocket>, frame: ServerFrame): void {
    const state = ws.getUserData();
    if (state.closed) return;
    if (ws.getBufferedAmount() > backpressureCap) {
      log.warn({ relayId: state.relay?.id }, 'relay is not reading; disconnecting it');
      ws.end(1008, 'not reading');
      return;
    }
    ws.cork(() => ws.send(JSON.stringify(frame), false));
  }

  const refuse = (ws: WebSocket<RelaySocket>, code: string, message: string) => {
    write(ws, { type: 'error', code, message });
    if (!ws.getUserData().closed) ws.end(4001, code);
  };

  deps.link.onFrame((delivery) => {
    const ws = sockets.get(delivery.relayId);
    if (ws && ws.getUserData().relay?.session === delivery.session) write(ws, delivery.frame);
  });

  async function hello(ws: WebSocket<RelaySocket>, frame: HelloFrame): Promise<void> {
    const state = ws.getUserData();
    const registration = await deps.registry.register(frame);
    if (state.closed) return;
    if (!registration.ok) return refuse(ws, registration.code, registration.message);
    const { relayId, tenantId } = registration;
    const relay = await relays.ask<ConnectedRelay>(relayId, {
      kind: 'connect',
      tenantId,
      node: deps.runtime.nodeId,
      name: frame.name,
      systemInfo: frame.systemInfo,
      ...(frame.phoneNumbers ? { phoneNumbers: frame.phoneNumbers } : {}),
      ...(registration.registration ? { registration: registration.registration } : {}),
    });
    if (state.closed) {
      await relays.send(relayId, { kind: 'disconnect', tenantId, session: relay.session, reason: 'closed during hello' });
      return;
    }
    clearTimeout(state.helloTimer);
    state.relay = { id: relayId, tenantId, session: relay.session };
    const previous = sockets.get(relayId);
    sockets.set(relayId, ws);
    onlineGauge.set(sockets.size);
    if (previous && previous !== ws) previous.end(4002, 'replaced by a newer connection');
    write(ws, {
      type: 'welcome',
      relayId,
      ...(registration.credential ? { credential: registration.credential } : {}),
      inboundCursor: relay.inboundCursor,
      heartbeatIntervalMs: opts.heartbeatIntervalMs,
    });
    log.info({ tenantId, relayId, session: relay.session }, 'relay connected');
  }

  async function handle(ws: WebSocket<RelaySocket>, frame: AgentFrame): Promise<void> {
    const state = ws.getUserData();
    if (frame.type === 'hello') {
      if (state.relay) return void write(ws, { type: 'error', code: 'validation_error', message: 'hello was already accepted' });
      return hello(ws, frame);
    }
    const relay = state.relay;
    if (!relay) return refuse(ws, 'unauthorized', 'say hello first');
    const session = { tenantId: relay.tenantId, session: relay.session };
    switch (frame.type) {
      case 'heartbeat':
        return void (await relays.send(relay.id, { kind: 'heartbeat', ...session, health: frame.health }));
      case 'ready':
        return void (await relays.send(relay.id, { kind: 'ready', ...session, capacity: frame.capacity }));
      case 'status': {
        const { type: _type, ...status } = frame;
        // To the relay actor, which settles the send in flight and passes the report on to the tenant actor.
        await relays.send(relay.id, { kind: 'status', ...session, ...status });
        return write(ws, { type: 'ack', of: 'status', messageId: frame.messageId, attempt: frame.attempt });
      }
      case 'inbound': {
        // The relay actor acknowledges the cursor once the message is stored.
        const { type: _type, ...inbound } = frame;
        await relays.send(relay.id, { kind: 'inbound', ...session, ...inbound });
        return;
      }
    }
  }

  app.ws<RelaySocket>(relaySocketPath, {
    maxPayloadLength: frameLimits.maxFrameBytes,
    idleTimeout: 60,
    maxBackpressure: backpressureCap,
    closeOnBackpressureLimit: 1,
    sendPingsAutomatically: true,
    upgrade(res, req, context) {
      res.upgrade<RelaySocket>(
        { badFrames: 0, closed: false, work: Promise.resolve() },
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open(ws) {
      const state = ws.getUserData();
      state.helloTimer = setTimeout(() => {
        if (!state.relay && !state.closed) refuse(ws, 'unauthorized', 'no hello in time');
      }, opts.helloTimeoutMs);
    },
    message(ws, message, isBinary) {
      const state = ws.getUserData();
      const parsed = isBinary ? { ok: false as const, error: 'frames are JSON text' } : parseFrame(Buffer.from(message).toString('utf8'), agentFrame);
      if (!parsed.ok) {
        state.badFrames++;
        write(ws, { type: 'error', code: 'validation_error', message: parsed.error.slice(0, frameLimits.errorLength) });
        if (state.badFrames >= maxBadFrames) ws.end(1008, 'too many bad frames');
        return;
      }
      state.work = track(state.work.then(() => handle(ws, parsed.frame)).catch((err) => {
        log.error({ err, relayId: state.relay?.id, frame: parsed.frame.type }, 'relay frame failed');
        if (!state.closed) write(ws, { type: 'error', code: 'internal_error', message: 'the frame could not be handled; send it again' });
      }));
    },
    close(ws) {
      const state = ws.getUserData();
      state.closed = true;
      clearTimeout(state.helloTimer);
      const relay = state.relay;
      if (!relay) return;
      if (sockets.get(relay.id) === ws) sockets.delete(relay.id);
      onlineGauge.set(sockets.size);
      // After this socket's own frames, so its last statuses are in before its messages are handed back.
      track(state.work.then(() => relays.send(relay.id, { kind: 'disconnect', tenantId: relay.tenantId, session: relay.session, reason: 'socket closed' }))
        .catch((err) => log.warn({ err, relayId: relay.id }, 'could not report a relay offline; its heartbeat timeout will')));
    },
  });

  return {
    get connected(): number {
      return sockets.size;
    },
    /** Closes every relay socket and waits until each is reported offline. */
    async close(): Promise<void> {
      for (const ws of [...sockets.values()]) ws.end(1001, 'server shutting down');
      await Promise.allSettled([...pending]);
    },
  };
}

export type RelayGateway = ReturnType<typeof attachRelayGateway>;
