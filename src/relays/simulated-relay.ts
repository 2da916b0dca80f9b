import { randomBytes } from 'node:crypto';
import { relayProtocol, type ConnectedRelay } from '../actors/relay/protocol.ts';
import { sha256 } from '../identity/secrets.ts';
import type { Logger } from '../log.ts';
import type { AgentCheckpoint, SendFrame, ServerFrame, StatusFrame } from '../relay-protocol/frames.ts';
import { actorClient, type ActorClient } from '../runtime/actor.ts';
import type { Transport } from '../runtime/types.ts';
import { isTestTenant } from '../test-mode.ts';
import type { RelayLink } from './relay-link.ts';
import type { RelayCollections } from './relay-store.ts';
import { digestId } from '../ids.ts';

/**
 * The recipients whose simulated outcome is fixed (docs/test-mode.md); any
 * other recipient is delivered.
 */
export const magicRecipients = {
  delivered: '+15005550001',
  notRegistered: '+15005550002',
  undelivered: '+15005550003',
  repliesStop: '+15005550004',
} as const;

/** The name the built-in relay of a test tenant shows in its relay list. */
export const simulatedRelayName = 'Simulated relay (test mode)';
/** Sends the simulated relay takes at once (its `ready`). */
const simulatedCapacity = 100;
/** A simulated relay no test request has used this long is disconnected; the next one connects it again. */
const idleMs = 15 * 60_000;

/** The relay id of a test tenant's built-in relay: derived from the tenant, so every process connects the same relay. */
export function simulatedRelayId(tenantId: string): string {
  return `relay_${digestId(`simulated\u0000${tenantId}`, 22)}`;
}

interface Held {
  relayId: string;
  tenantId: string;
  session: number;
  /** The last inbound row id sent: the simulated Messages database's ROWID. */
  rowId: number;
  lastUsedAt: number;
}

/**
 * The built-in relay of test mode: for each test tenant in use, a relay that
 * runs inside the frontend process and speaks the relay protocol as an
 * agent does (connect, ready, heartbeats, `status` reports with checkpoints,
 * `inbound` rows), through the relay actor and `RelayLink` like a socket, so
 * statuses, events, webhooks and opt-outs run unchanged. It connects with the
 * first test request a frontend answers, and its outcome per message is
 * steered by the recipient (`magicRecipients`). It sends nothing anywhere.
 */
export class SimulatedRelays {
  private readonly relays: ActorClient<typeof relayProtocol>;
  private readonly held = new Map<string, Held>();
  private readonly byRelay = new Map<string, Held>();
  private readonly connecting = new Map<string, Promise<void>>();
  /** Tenants whose relay another frontend held when last looked at, and when: looked at again after a heartbeat interval. */
  private readonly elsewhere = new Map<string, number>();
  private readonly timer: NodeJS.Timeout;
  private readonly stopLink: () => void;
  private readonly stopLookups: () => void;
  private closed = false;

  constructor(
    private readonly deps: {
      runtime: Transport;
      link: RelayLink;
      db: RelayCollections;
      heartbeatIntervalMs: number;
      heartbeatTimeoutMs: number;
      log: Logger;
    },
  ) {
    this.relays = actorClient(deps.runtime, relayProtocol);
    this.stopLink = deps.link.onFrame((delivery) => {
      const held = this.byRelay.get(delivery.relayId);
      if (held && held.session === delivery.session) void this.frame(held, delivery.frame);
    });
    // A lookup is answered by the recipient's rule: the magic recipient that is not registered has no iMessage.
    this.stopLookups = deps.link.onLookup((lookup) => {
      const held = this.byRelay.get(lookup.relayId);
      if (!held || held.session !== lookup.session) return false;
      held.lastUsedAt = Date.now();
      void deps.link
        .answer(lookup.replyNode, {
          lookupId: lookup.lookupId,
          imessage: lookup.handle !== magicRecipients.notRegistered,
          source: 'simulator',
        })
        .catch(() => undefined);
      return true;
    });
    this.timer = setInterval(() => void this.beat(), deps.heartbeatIntervalMs);
    this.timer.unref();
  }

  /** A test tenant was used here: its relay is connected if it is not (at once, with nothing to wait for, when it is). */
  use(tenantId: string, teamId: string): void {
    if (this.closed || !isTestTenant(tenantId)) return;
    const held = this.held.get(tenantId);
    if (held) {
      held.lastUsedAt = Date.now();
      return;
    }
    if (this.connecting.has(tenantId)) return;
    const seen = this.elsewhere.get(tenantId);
    if (seen !== undefined && Date.now() - seen < this.deps.heartbeatIntervalMs) return;
    const connecting = this.connectUnlessHeld(tenantId, teamId)
      .catch((err) =>
        this.deps.log.warn({ err, tenantId }, 'simulated relay could not connect; the next request tries again'),
      )
      .finally(() => this.connecting.delete(tenantId));
    this.connecting.set(tenantId, connecting);
  }

  /** Connected (or failed to) for the tenant: what a caller that must see it online waits for. */
  async settled(tenantId: string): Promise<void> {
    await this.connecting.get(tenantId);
  }

  /**
   * Connects the tenant's relay, unless another frontend holds it and it is
   * alive (a heartbeat within the timeout): frontends taking turns at a
   * tenant's requests then do not take the relay from each other.
   */
  private async connectUnlessHeld(tenantId: string, teamId: string): Promise<void> {
    const doc = await this.deps.db.relays.findOne({ tenantId }, { id: simulatedRelayId(tenantId) });
    const heard = Date.parse(doc?.lastHeartbeat ?? '') || 0;
    if (
      doc?.status === 'online' &&
      doc.node !== this.deps.runtime.nodeId &&
      Date.now() - heard < this.deps.heartbeatTimeoutMs
    ) {
      if (this.elsewhere.size >= 50_000) this.elsewhere.clear();
      this.elsewhere.set(tenantId, Date.now());
      return;
    }
    this.elsewhere.delete(tenantId);
    await this.connect(tenantId, teamId);
  }

  private async connect(tenantId: string, teamId: string): Promise<void> {
    const relayId = simulatedRelayId(tenantId);
    const connected = await this.relays.ask<ConnectedRelay>(relayId, {
      kind: 'connect',
      tenantId,
      node: this.deps.runtime.nodeId,
      name: simulatedRelayName,
      systemInfo: { hostOsVersion: 'simulated', hostname: 'relaybox' },
      // Used only the first time: the relay is made with it. Its secret is thrown away, so no agent can connect as it.
      registration: { teamId, secretHash: sha256(randomBytes(32).toString('base64url')) },
    });
    const held: Held = {
      relayId,
      tenantId,
      session: connected.session,
      rowId: connected.inboundCursor,
      lastUsedAt: Date.now(),
    };
    this.held.set(tenantId, held);
    this.byRelay.set(relayId, held);
    await this.relays.send(relayId, { kind: 'ready', tenantId, session: held.session, capacity: simulatedCapacity });
  }

  private async frame(held: Held, frame: ServerFrame): Promise<void> {
    try {
      if (frame.type === 'send') await this.send(held, frame);
      else if (frame.type === 'ack' && frame.of === 'inbound' && frame.cursor !== undefined)
        held.rowId = Math.max(held.rowId, frame.cursor);
    } catch (err) {
      // Unreported, the send is retried at its timeout, as an agent's would be.
      this.deps.log.warn({ err, relayId: held.relayId }, 'simulated relay could not report');
    }
  }

  /** What a real relay would report of the send, as the recipient steers it. */
  private async send(held: Held, frame: SendFrame): Promise<void> {
    const base = { messageId: frame.messageId, attempt: frame.attempt };
    const now = new Date().toISOString();
    const checkpoints: AgentCheckpoint[] = [
      { hop: 'relay_received', at: now },
      { hop: 'handed_to_app', at: now },
      { hop: 'seen_in_database', at: now },
    ];
    // As an agent: a send asked to go as SMS, or whose fallback finds no iMessage, goes as SMS and is delivered.
    const asSms =
      frame.service === 'SMS' ||
      (frame.fallback?.sms === 'if_not_imessage' && frame.to === magicRecipients.notRegistered);
    if (frame.to === magicRecipients.notRegistered && !asSms) {
      return this.report(held, [
        {
          ...base,
          status: 'failed',
          at: now,
          reason: 'not_registered',
          error: 'simulated: the recipient is not registered with iMessage',
          checkpoints,
        },
      ]);
    }
    const guid = `simulated-${frame.messageId}-${frame.attempt}`;
    await this.report(held, [
      { ...base, status: 'sent', at: now, service: asSms ? 'SMS' : 'iMessage', guid, checkpoints },
    ]);
    if (frame.to === magicRecipients.undelivered) return;
    await this.report(held, [{ ...base, status: 'delivered', at: new Date().toISOString(), guid }]);
    if (frame.to === magicRecipients.repliesStop) await this.reply(held, frame.to, 'STOP');
  }

  private async report(held: Held, reports: Omit<StatusFrame, 'type'>[]): Promise<void> {
    for (const report of reports)
      await this.relays.send(held.relayId, {
        kind: 'status',
        tenantId: held.tenantId,
        session: held.session,
        ...report,
      });
  }

  private async reply(held: Held, from: string, body: string): Promise<void> {
    held.rowId++;
    await this.relays.send(held.relayId, {
      kind: 'inbound',
      tenantId: held.tenantId,
      session: held.session,
      rowId: held.rowId,
      guid: `simulated-in-${randomBytes(12).toString('base64url')}`,
      from,
      isGroup: false,
      body,
      receivedAt: new Date().toISOString(),
    });
  }

  /**
   * Each interval: a heartbeat for every relay held, unless it has been idle
   * (then it disconnects) or another process has connected it since (then it
   * is let go here: the next test request on this process connects it back).
   */
  private async beat(): Promise<void> {
    const now = Date.now();
    for (const held of [...this.held.values()]) {
      try {
        if (now - held.lastUsedAt > idleMs) {
          this.forget(held);
          await this.disconnect(held, 'idle');
          continue;
        }
        const doc = await this.deps.db.relays.findOne({ tenantId: held.tenantId }, { id: held.relayId });
        if (!doc || doc.session !== held.session || doc.status !== 'online') {
          this.forget(held);
          continue;
        }
        await this.relays.send(held.relayId, {
          kind: 'heartbeat',
          tenantId: held.tenantId,
          session: held.session,
          health: { cpuPercent: 0, memoryUsedBytes: 0, memoryTotalBytes: 0, messagesPerMinute: 0, queueDepth: 0 },
        });
      } catch (err) {
        this.deps.log.warn({ err, relayId: held.relayId }, 'simulated relay heartbeat failed');
      }
    }
  }

  private forget(held: Held): void {
    if (this.held.get(held.tenantId) === held) this.held.delete(held.tenantId);
    if (this.byRelay.get(held.relayId) === held) this.byRelay.delete(held.relayId);
  }

  private async disconnect(held: Held, reason: string): Promise<void> {
    await this.relays.send(held.relayId, {
      kind: 'disconnect',
      tenantId: held.tenantId,
      session: held.session,
      reason,
    });
  }

  /** Every simulated relay goes offline, as a closing gateway's sockets do. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.stopLink();
    this.stopLookups();
    await Promise.allSettled([...this.connecting.values()]);
    const held = [...this.held.values()];
    this.held.clear();
    this.byRelay.clear();
    await Promise.allSettled(held.map((h) => this.disconnect(h, 'server shutting down')));
  }
}
