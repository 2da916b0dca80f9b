import { randomUUID } from 'node:crypto';
import type { AgentCheckpoint, ServerFrame, SendFrame } from '../../src/relay-protocol/frames.ts';
import { relayProtocol } from '../../src/actors/relay/protocol.ts';
import type { ConnectedRelay } from '../../src/actors/relay/protocol.ts';
import { actorClient } from '../../src/runtime/actor.ts';
import type { TestApp } from './test-app.ts';

/**
 * A relay at the actor level: it connects through the relay actor and receives
 * its frames through the same addressed delivery the WebSocket gateway uses,
 * and reports statuses as the gateway would.
 */
export class StandInRelay {
  readonly id = `relay_${randomUUID().slice(0, 12)}`;
  readonly frames: ServerFrame[] = [];
  private readonly unsubscribe: () => void;
  private answering: ((send: SendFrame) => void) | undefined;
  session = 0;

  constructor(
    private readonly t: TestApp,
    private readonly orgId: string,
    private readonly teamId: string,
    readonly opts: { capacity: number; phoneNumbers?: string[]; name?: string },
  ) {
    this.unsubscribe = t.app.messaging.link.onFrame((d) => {
      if (d.relayId !== this.id || d.session !== this.session) return;
      this.frames.push(d.frame);
      if (d.frame.type === 'send') this.answering?.(d.frame);
    });
  }

  get sends(): SendFrame[] {
    return this.frames.filter((f): f is SendFrame => f.type === 'send');
  }

  private get relays() {
    return actorClient(this.t.app.runtime, relayProtocol);
  }

  /** Connects as the gateway does on a hello: the relay actor creates the relay the first time and opens a new session. */
  async connect(): Promise<void> {
    const connected = await this.relays.ask<ConnectedRelay>(this.id, {
      kind: 'connect',
      tenantId: this.orgId,
      node: this.t.app.runtime.nodeId,
      name: this.opts.name ?? this.id,
      systemInfo: { hostOsVersion: '15.1', hostname: 'stand-in' },
      phoneNumbers: this.opts.phoneNumbers ?? [],
      registration: { teamId: this.teamId, secretHash: 'x' },
    });
    this.session = connected.session;
    if (this.opts.capacity > 0) await this.ready(this.opts.capacity);
  }

  /** Reports on the latest attempt this relay was given, as the agent would, unless `attempt` names another; with the hops it saw when given. */
  report(
    messageId: string,
    status: 'sent' | 'delivered' | 'read' | 'failed',
    error?: string,
    attempt = this.lastAttempt(messageId),
    checkpoints?: AgentCheckpoint[],
  ): Promise<string> {
    return this.relays.send(this.id, {
      kind: 'status',
      tenantId: this.orgId,
      session: this.session,
      messageId,
      attempt,
      status,
      at: new Date().toISOString(),
      ...(error ? { error } : {}),
      ...(checkpoints ? { checkpoints } : {}),
    });
  }

  /**
   * From now on reports every send it is given sent, then delivered, as soon
   * as it comes (until `stop`); `reported` counts the sends reported both.
   */
  deliverEverySend(): { reported(): number; stop(): void } {
    let reported = 0;
    this.answering = (send) =>
      void this.report(send.messageId, 'sent', undefined, send.attempt)
        .then(() => this.report(send.messageId, 'delivered', undefined, send.attempt))
        .then(() => reported++);
    return {
      reported: () => reported,
      stop: () => (this.answering = undefined),
    };
  }

  lastAttempt(messageId: string): number {
    const send = this.sends.filter((f) => f.messageId === messageId).at(-1);
    if (!send) throw new Error(`stand-in relay ${this.id} was never given ${messageId}`);
    return send.attempt;
  }

  private inboundRow = 0;

  /** A message `from` wrote to this relay's Messages app, reported as the agent reports a new chat.db row. */
  inbound(from: string, body: string): Promise<string> {
    this.inboundRow++;
    return this.relays.send(this.id, {
      kind: 'inbound',
      tenantId: this.orgId,
      session: this.session,
      rowId: this.inboundRow,
      guid: `${this.id}-in-${this.inboundRow}`,
      from,
      isGroup: false,
      body,
      receivedAt: new Date().toISOString(),
    });
  }

  ready(capacity: number): Promise<string> {
    return this.relays.send(this.id, { kind: 'ready', tenantId: this.orgId, session: this.session, capacity });
  }

  heartbeat(): Promise<string> {
    return this.relays.send(this.id, {
      kind: 'heartbeat',
      tenantId: this.orgId,
      session: this.session,
      health: { cpuPercent: 1, memoryUsedBytes: 1, memoryTotalBytes: 2, messagesPerMinute: 0, queueDepth: 0 },
    });
  }

  disconnect(reason = 'closed'): Promise<string> {
    return this.relays.send(this.id, { kind: 'disconnect', tenantId: this.orgId, session: this.session, reason });
  }

  close(): void {
    this.unsubscribe();
  }
}
