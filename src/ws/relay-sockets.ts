import type { WebSocket } from '@trufflesuite/uws-js-unofficial';
import { Gauge, register } from 'prom-client';
import type { Logger } from '../log.ts';
import type { AvailabilityFrame, SentCheckFrame, ServerFrame, StatusFrame } from '../relay-protocol/frames.ts';
import type { RelayLink, RelayLookup } from '../relays/relay-link.ts';

/** What the gateway keeps on each relay socket. */
export interface RelaySocket {
  /** Set once the hello is accepted. */
  relay?: { id: string; tenantId: string; session: number };
  /** Its agent accepts `send.traceparent` (its hello's agentVersion); otherwise the field is left out of its send frames. */
  acceptsTraceparent?: boolean;
  /** Its agent answers `lookup` frames (its hello's agentVersion). */
  answersLookup?: boolean;
  /** Its agent answers `checkSent` frames, the failover check (its hello's agentVersion). */
  answersCheckSent?: boolean;
  badFrames: number;
  closed: boolean;
  helloTimer?: NodeJS.Timeout;
  /** Frames handled one after another, in the order they arrived. */
  work: Promise<void>;
  /** Status frames at the end of `work`, not yet begun: a status frame that arrives now joins them. */
  reports?: StatusFrame[];
}

export type RelayWebSocket = WebSocket<RelaySocket>;

const onlineGauge =
  (register.getSingleMetric('relaybox_relays_connected') as Gauge | undefined) ??
  new Gauge({
    name: 'relaybox_relays_connected',
    help: 'Relay sockets held by this frontend',
  });

const degradedGauge =
  (register.getSingleMetric('relaybox_relays_degraded') as Gauge | undefined) ??
  new Gauge({
    name: 'relaybox_relays_degraded',
    help: 'Relay sockets held by this frontend whose last heartbeat said degraded (Messages writes no rows for its sends)',
  });

/**
 * The relay sockets this frontend holds, one per relay (a newer connection
 * replaces an older one), the frames written to them, and the work still
 * running for them. Frames actors address to a relay (`RelayLink`) reach its
 * socket only while it is the session they were meant for.
 */
export class RelaySockets {
  private readonly sockets = new Map<string, RelayWebSocket>();
  private readonly degraded = new Set<string>();
  private readonly pending = new Set<Promise<unknown>>();
  /** Lookups written to a relay and not answered yet, by id: which relay was asked and where the answer goes. */
  private readonly lookups = new Map<string, { relayId: string; replyNode: string; at: number }>();

  constructor(
    private readonly link: RelayLink,
    private readonly backpressureCap: number,
    private readonly log: Logger,
  ) {
    link.onFrame((delivery) => {
      const ws = this.sockets.get(delivery.relayId);
      if (ws && ws.getUserData().relay?.session === delivery.session)
        this.write(ws, fitted(ws.getUserData(), delivery.frame));
    });
    link.onLookup((lookup) => this.lookup(lookup));
  }

  /** A lookup for a relay whose socket this frontend may hold: asked of its agent, or refused; false when it holds no such socket. */
  private lookup(lookup: RelayLookup): boolean {
    const ws = this.sockets.get(lookup.relayId);
    const state = ws?.getUserData();
    if (!ws || state?.relay?.session !== lookup.session || state.closed) return false;
    const refuse = (refused: 'offline' | 'agent_too_old') =>
      void this.link.answer(lookup.replyNode, { lookupId: lookup.lookupId, refused }).catch(() => undefined);
    if (!(lookup.check ? state.answersCheckSent : state.answersLookup)) return (refuse('agent_too_old'), true);
    const now = Date.now();
    // Unanswered lookups are forgotten after a minute: their askers stopped waiting long before.
    for (const [id, pending] of this.lookups) if (now - pending.at > 60_000) this.lookups.delete(id);
    if (this.lookups.size >= 10_000) return (refuse('offline'), true);
    this.lookups.set(lookup.lookupId, { relayId: lookup.relayId, replyNode: lookup.replyNode, at: now });
    this.write(
      ws,
      lookup.check
        ? { type: 'checkSent', checkId: lookup.lookupId, to: lookup.handle, ...lookup.check }
        : { type: 'lookup', lookupId: lookup.lookupId, handle: lookup.handle },
    );
    return true;
  }

  /** A relay's agent answered a failover check: as a lookup's answer, to the process that asked. */
  sentChecked(relayId: string, frame: SentCheckFrame): Promise<void> {
    const pending = this.lookups.get(frame.checkId);
    if (!pending || pending.relayId !== relayId) return Promise.resolve();
    this.lookups.delete(frame.checkId);
    return this.link.answer(pending.replyNode, {
      lookupId: frame.checkId,
      sent: frame.sent,
      ...(frame.guid ? { guid: frame.guid } : {}),
    });
  }

  /** A relay's agent answered a lookup: the answer goes to the process that asked; one for a lookup it was not asked is dropped. */
  lookupAnswered(relayId: string, frame: AvailabilityFrame): Promise<void> {
    const pending = this.lookups.get(frame.lookupId);
    if (!pending || pending.relayId !== relayId) return Promise.resolve();
    this.lookups.delete(frame.lookupId);
    return this.link.answer(pending.replyNode, {
      lookupId: frame.lookupId,
      imessage: frame.imessage,
      source: frame.source,
    });
  }

  get size(): number {
    return this.sockets.size;
  }

  /** Work the gateway waits for when it closes (a socket's frames, its offline report). */
  track<T>(p: Promise<T>): Promise<T> {
    this.pending.add(p);
    void p.finally(() => this.pending.delete(p)).catch(() => undefined);
    return p;
  }

  write(ws: RelayWebSocket, frame: ServerFrame): void {
    const state = ws.getUserData();
    if (state.closed) return;
    if (ws.getBufferedAmount() > this.backpressureCap) {
      this.log.warn({ relayId: state.relay?.id }, 'relay is not reading; disconnecting it');
      ws.end(1008, 'not reading');
      return;
    }
    ws.cork(() => ws.send(JSON.stringify(frame), false));
  }

  refuse(ws: RelayWebSocket, code: string, message: string): void {
    this.write(ws, { type: 'error', code, message });
    if (!ws.getUserData().closed) ws.end(4001, code);
  }

  /** The socket's hello was accepted: it is the relay's socket now, and an older one is closed. */
  adopt(relayId: string, ws: RelayWebSocket): void {
    const previous = this.sockets.get(relayId);
    this.sockets.set(relayId, ws);
    onlineGauge.set(this.sockets.size);
    if (previous && previous !== ws) previous.end(4002, 'replaced by a newer connection');
  }

  /** The relay's latest heartbeat on its current socket said whether it is degraded. */
  markDegraded(relayId: string, ws: RelayWebSocket, degraded: boolean): void {
    if (this.sockets.get(relayId) !== ws) return;
    if (degraded) this.degraded.add(relayId);
    else this.degraded.delete(relayId);
    degradedGauge.set(this.degraded.size);
  }

  /** The socket closed; it is forgotten unless a newer one already replaced it. */
  release(relayId: string, ws: RelayWebSocket): void {
    if (this.sockets.get(relayId) === ws) {
      this.sockets.delete(relayId);
      this.degraded.delete(relayId);
    }
    onlineGauge.set(this.sockets.size);
    degradedGauge.set(this.degraded.size);
  }

  /** Closes every relay socket and waits for the work still running for them. */
  async close(): Promise<void> {
    for (const ws of [...this.sockets.values()]) ws.end(1001, 'server shutting down');
    await Promise.allSettled([...this.pending]);
  }
}

/**
 * A send frame as the socket's agent reads it: an agent older than
 * `traceparentSince` refuses a frame with `traceparent`, one older than
 * `lookupSince` one with `service` or `fallback` (it sends over iMessage).
 */
function fitted(state: RelaySocket, frame: ServerFrame): ServerFrame {
  if (frame.type !== 'send') return frame;
  let fit = frame;
  if (fit.traceparent !== undefined && !state.acceptsTraceparent) {
    const { traceparent: _traceparent, ...older } = fit;
    fit = older;
  }
  if ((fit.service !== undefined || fit.fallback !== undefined) && !state.answersLookup) {
    const { service: _service, fallback: _fallback, ...older } = fit;
    fit = older;
  }
  return fit;
}
