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

/** Frames for one relay's connection, in order, in one addressed message (a hand-over's sends): handled as that many `relay-frame`. */
export interface RelayFramesDelivery {
  kind: 'relay-frames';
  relayId: string;
  session: number;
  frames: ServerFrame[];
}

/** About how large one `relay-frames` message may grow before the rest of a hand-over goes in another. */
const framesMessageBytes = 256 * 1024;

/** A frame's size, about: its text and links, and room for the rest of its fields. */
function approximateBytes(frame: ServerFrame): number {
  if (frame.type !== 'send') return 1_024;
  return 1_024 + (frame.body?.length ?? 0) + (frame.attachments ?? []).reduce((sum, url) => sum + url.length, 0);
}

/** A handle lookup for one relay's agent, to the process holding its socket; the answer goes to `replyNode`. */
export interface RelayLookup {
  kind: 'relay-lookup';
  relayId: string;
  session: number;
  lookupId: string;
  handle: string;
  /** A failover check (relay-protocol/failover-frames.ts) instead of a handle lookup: did this text go to `handle` since `since`? */
  check?: SentCheck;
  replyNode: string;
}

/** What a failover check asks a standby's agent. */
export interface SentCheck {
  body: string;
  since: string;
}

/** What the relay's agent answered to a lookup (`availability`), or why there is no answer. */
export interface RelayLookupAnswer {
  kind: 'relay-lookup-answer';
  lookupId: string;
  imessage?: boolean | null;
  source?: string;
  /** A failover check's answer: whether the standby's chat.db has the message, and its row's guid. */
  sent?: boolean;
  guid?: string;
  /** Set when the lookup could not be asked: the relay's socket is gone, or its agent is older than lookups. */
  refused?: 'offline' | 'agent_too_old';
}

/**
 * How workers reach a relay: the frame goes to the one frontend that holds
 * the relay's socket (addressed, not broadcast). The WebSocket gateway is the
 * receiving end; tests put a stand-in relay there. Lookups take the same way
 * there, and their answers come back to the asking process.
 */
export class RelayLink {
  private readonly handlers = new Set<(delivery: RelayFrameDelivery) => void>();
  private readonly lookupHandlers = new Set<(lookup: RelayLookup) => boolean>();
  private readonly answers = new Map<string, (answer: RelayLookupAnswer) => void>();

  constructor(private readonly runtime: Transport) {
    runtime.onNodeMessage((payload) => {
      const kind = (payload as { kind?: unknown } | null)?.kind;
      if (kind === 'relay-frame') for (const handler of this.handlers) handler(payload as RelayFrameDelivery);
      else if (kind === 'relay-frames') this.framesArrived(payload as RelayFramesDelivery);
      else if (kind === 'relay-lookup') this.lookupArrived(payload as RelayLookup);
      else if (kind === 'relay-lookup-answer') this.answered(payload as RelayLookupAnswer);
    });
  }

  /** This process's id on the runtime: where answers to its lookups come. */
  get node(): string {
    return this.runtime.nodeId;
  }

  /**
   * Asks the relay's agent about a handle and waits up to `timeoutMs` for
   * its answer; undefined when none came in time.
   */
  lookup(
    relay: { id: string; node: string; session: number },
    lookupId: string,
    handle: string,
    timeoutMs: number,
  ): Promise<RelayLookupAnswer | undefined> {
    return this.ask(relay, lookupId, handle, undefined, timeoutMs);
  }

  /** Asks a standby's agent whether its chat.db has this message (a failover check); undefined when no answer came in time. */
  checkSent(
    relay: { id: string; node: string; session: number },
    checkId: string,
    to: string,
    check: SentCheck,
    timeoutMs: number,
  ): Promise<RelayLookupAnswer | undefined> {
    return this.ask(relay, checkId, to, check, timeoutMs);
  }

  private async ask(
    relay: { id: string; node: string; session: number },
    lookupId: string,
    handle: string,
    check: SentCheck | undefined,
    timeoutMs: number,
  ): Promise<RelayLookupAnswer | undefined> {
    const answer = new Promise<RelayLookupAnswer | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.answers.delete(lookupId);
        resolve(undefined);
      }, timeoutMs);
      this.answers.set(lookupId, (a) => {
        clearTimeout(timer);
        this.answers.delete(lookupId);
        resolve(a);
      });
    });
    const lookup: RelayLookup = {
      kind: 'relay-lookup',
      relayId: relay.id,
      session: relay.session,
      lookupId,
      handle,
      ...(check ? { check } : {}),
      replyNode: this.node,
    };
    await this.runtime.publishToNode(relay.node, lookup);
    return answer;
  }

  /** The holder of the relay's socket answers a lookup to the process that asked. */
  answer(replyNode: string, answer: Omit<RelayLookupAnswer, 'kind'>): Promise<void> {
    return this.runtime.publishToNode(replyNode, { kind: 'relay-lookup-answer', ...answer });
  }

  /**
   * The receiving end of lookups, on the process holding relay sockets (and
   * the built-in relays): a handler answers true when it holds the relay's
   * session and sees to the answer. Returns the unsubscribe.
   */
  onLookup(handler: (lookup: RelayLookup) => boolean): () => void {
    this.lookupHandlers.add(handler);
    return () => this.lookupHandlers.delete(handler);
  }

  /** A lookup no handler here holds the relay of: its session is gone, and the asker is told at once. */
  private lookupArrived(lookup: RelayLookup): void {
    let held = false;
    for (const handler of this.lookupHandlers) held = handler(lookup) || held;
    if (!held)
      void this.answer(lookup.replyNode, { lookupId: lookup.lookupId, refused: 'offline' }).catch(() => undefined);
  }

  private answered(answer: RelayLookupAnswer): void {
    this.answers.get(answer.lookupId)?.(answer);
  }

  deliver(relay: { id: string; node: string; session: number }, frame: ServerFrame): Promise<void> {
    const delivery: RelayFrameDelivery = { kind: 'relay-frame', relayId: relay.id, session: relay.session, frame };
    return this.runtime.publishToNode(relay.node, delivery);
  }

  /**
   * Frames for one connection, in order, to the process holding it: a
   * hand-over's in one message, or in a few of at most about
   * `framesMessageBytes` each (a subscriber's output buffer is bounded).
   */
  async deliverAll(relay: { id: string; node: string; session: number }, frames: ServerFrame[]): Promise<void> {
    let part: ServerFrame[] = [];
    let bytes = 0;
    const flush = async () => {
      if (part.length === 1) await this.deliver(relay, part[0]!);
      else if (part.length > 1) {
        const delivery: RelayFramesDelivery = {
          kind: 'relay-frames',
          relayId: relay.id,
          session: relay.session,
          frames: part,
        };
        await this.runtime.publishToNode(relay.node, delivery);
      }
      part = [];
      bytes = 0;
    };
    for (const frame of frames) {
      const size = approximateBytes(frame);
      if (part.length > 0 && bytes + size > framesMessageBytes) await flush();
      part.push(frame);
      bytes += size;
    }
    await flush();
  }

  private framesArrived({ relayId, session, frames }: RelayFramesDelivery): void {
    if (!Array.isArray(frames)) return;
    for (const frame of frames)
      for (const handler of this.handlers) handler({ kind: 'relay-frame', relayId, session, frame });
  }

  /** The receiving end, on the process holding relay sockets; each handler ignores relays it does not hold. Returns the unsubscribe. */
  onFrame(handler: (delivery: RelayFrameDelivery) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }
}
