import type { ServerFrame } from '../relay-protocol/frames.ts';
import type { Transport } from '../runtime/types.ts';

/** An addressed message carrying a frame for one relay, to the process holding its socket. */
export interface RelayFrameDelivery {
  kind: 'relay-frame';
  relayId: string;
  /** The connection it is meant for: a frame for an older connection of the relay is dropped. */
  session: number;
  frame: ServerFrame;
}

/**
 * How workers reach a relay: the frame goes to the one frontend that holds
 * the relay's socket (addressed, not broadcast). The WebSocket gateway is the
 * receiving end; tests put a stand-in relay there.
 */
export class RelayLink {
  private readonly handlers = new Set<(delivery: RelayFrameDelivery) => void>();

  constructor(private readonly runtime: Transport) {
    runtime.onNodeMessage((payload) => {
      const delivery = payload as RelayFrameDelivery;
      if (delivery?.kind !== 'relay-frame') return;
      for (const handler of this.handlers) handler(delivery);
    });
  }

  deliver(relay: { id: string; node: string; session: number }, frame: ServerFrame): Promise<void> {
    const delivery: RelayFrameDelivery = { kind: 'relay-frame', relayId: relay.id, session: relay.session, frame };
    return this.runtime.publishToNode(relay.node, delivery);
  }

  /** The receiving end, on the process holding relay sockets; each handler ignores relays it does not hold. Returns the unsubscribe. */
  onFrame(handler: (delivery: RelayFrameDelivery) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }
}
