import { setImmediate as nextTurn } from 'node:timers/promises';
import type { TemplatedApp } from '@trufflesuite/uws-js-unofficial';
import type { Logger } from '../log.ts';
import { agentFrame, frameLimits, relaySocketPath } from '../relay-protocol/frames.ts';
import { parseFrame } from '../relay-protocol/frame-parser.ts';
import type { RelayLink } from '../relays/relay-link.ts';
import type { RelayRegistry } from '../relays/relay-registry.ts';
import type { Transport } from '../runtime/types.ts';
import { statusBatch } from '../actors/relay/protocol.ts';
import { RelayFrames } from './relay-frames.ts';
import { RelaySockets, type RelaySocket } from './relay-sockets.ts';

export interface RelayGatewayOptions {
  heartbeatIntervalMs: number;
  /** A socket that has not said hello this long is closed. */
  helloTimeoutMs: number;
  /** Bad frames a connection may send before it is closed. */
  maxBadFrames: number;
  /** Bytes queued for a relay that is not reading before it is disconnected. */
  maxBackpressureBytes: number;
  /** Status frames that arrive while the socket's earlier frames are handled go to the relay actor as one message. */
  batchReports: boolean;
}

/**
 * The relay WebSocket gateway: authenticates a relay's hello, keeps its
 * socket, turns its frames into relay actor messages, and writes the frames
 * actors address to it. Every frame is validated against its schema; a
 * socket's frames are handled one after another, in the order they arrived.
 */
export function attachRelayGateway(
  app: TemplatedApp,
  deps: { registry: RelayRegistry; runtime: Transport; link: RelayLink; log: Logger },
  opts: RelayGatewayOptions,
) {
  const log = deps.log.child({ component: 'relay-gateway' });
  const sockets = new RelaySockets(deps.link, opts.maxBackpressureBytes, log);
  const frames = new RelayFrames({
    registry: deps.registry,
    runtime: deps.runtime,
    sockets,
    heartbeatIntervalMs: opts.heartbeatIntervalMs,
    log,
  });

  app.ws<RelaySocket>(relaySocketPath, {
    maxPayloadLength: frameLimits.maxFrameBytes,
    idleTimeout: 60,
    maxBackpressure: opts.maxBackpressureBytes,
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
        if (!state.relay && !state.closed) sockets.refuse(ws, 'unauthorized', 'no hello in time');
      }, opts.helloTimeoutMs);
    },
    message(ws, message, isBinary) {
      const state = ws.getUserData();
      const parsed = isBinary
        ? { ok: false as const, error: 'frames are JSON text' }
        : parseFrame(Buffer.from(message).toString('utf8'), agentFrame);
      if (!parsed.ok) {
        state.badFrames++;
        sockets.write(ws, {
          type: 'error',
          code: 'validation_error',
          message: parsed.error.slice(0, frameLimits.errorLength),
        });
        if (state.badFrames >= opts.maxBadFrames) ws.end(1008, 'too many bad frames');
        return;
      }
      const frame = parsed.frame;
      // Status frames that arrive in one turn of the event loop, or while the socket's earlier frames are handled, go
      // on as one message: a status frame joins the reports waiting at the end of the socket's work, if any.
      const waiting = state.reports;
      if (frame.type === 'status' && waiting && waiting.length < statusBatch) return void waiting.push(frame);
      const reports = opts.batchReports && frame.type === 'status' ? [frame] : undefined;
      state.reports = reports;
      state.work = sockets.track(
        state.work
          .then(async () => {
            if (!reports) return frames.handle(ws, frame);
            await nextTurn();
            if (state.reports === reports) state.reports = undefined;
            return frames.reports(ws, reports);
          })
          .catch((err) => {
            log.error({ err, relayId: state.relay?.id, frame: frame.type }, 'relay frame failed');
            if (!state.closed)
              sockets.write(ws, {
                type: 'error',
                code: 'internal_error',
                message: 'the frame could not be handled; send it again',
              });
          }),
      );
    },
    close(ws) {
      const state = ws.getUserData();
      state.closed = true;
      clearTimeout(state.helloTimer);
      frames.closed(ws);
    },
  });

  return {
    get connected(): number {
      return sockets.size;
    },
    /** Closes every relay socket and waits until each is reported offline. */
    close: () => sockets.close(),
  };
}

export type RelayGateway = ReturnType<typeof attachRelayGateway>;
