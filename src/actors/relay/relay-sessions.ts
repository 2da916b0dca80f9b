import { tenantProtocol } from '../tenant/protocol.ts';
import { relayProtocol, type ConnectedRelay } from './protocol.ts';
import { AppError } from '../../errors.ts';
import { changeEventId, domainEvent } from '../../events/event-stream.ts';
import type { Outbox } from '../../events/outbox.ts';
import { nowIso } from '../../ids.ts';
import type { ActorContext, MessageOfKind } from '../../runtime/actor.ts';
import { RelayCredits } from './relay-credits.ts';
import { isLive, type RelayState } from './relay-state.ts';
import type { RelaySends } from './relay-sends.ts';
import type { RelayCollections, RelayDoc } from '../../relays/relay-store.ts';
import type { MessagingCollections } from '../../messages/message-store.ts';
import { offlineMoves, onlineMoves } from './line-failover.ts';

type RelayContext = ActorContext<RelayState>;
type Msg<K extends keyof (typeof relayProtocol)['messages'] & string> = MessageOfKind<typeof relayProtocol, K>;

/**
 * A relay's life as the relay actor runs it: connect (a new session, online,
 * `relay.online`), heartbeats (health, and the timeout that takes a silent
 * relay offline), capacity, disconnect (offline, `relay.offline`). Every
 * write is guarded by the session, so what an older connection reports
 * afterwards changes nothing.
 */
export class RelaySessions {
  constructor(
    private readonly deps: {
      db: RelayCollections & Pick<MessagingCollections, 'phoneNumbers'>;
      outbox: Outbox;
      sends: RelaySends;
      heartbeatTimeoutMs: number;
    },
  ) {}

  activate(): RelayState {
    return { doc: undefined, lastHeartbeatAt: 0, credits: new RelayCredits(), bulkSends: new Set() };
  }

  /**
   * The relay's document; the tenant comes with every message, so the read is
   * scoped by it. Read from the store (after a crash, a takeover or a failed
   * handler), it may still hold events its writer did not publish: they go out now.
   * The sends in flight are read with it.
   */
  async load(ctx: RelayContext, tenantId: string): Promise<RelayDoc | null> {
    if (ctx.state.doc === undefined || (ctx.state.doc && ctx.state.doc.tenantId !== tenantId)) {
      ctx.state.doc = await this.deps.db.relays.findOne({ tenantId }, { id: ctx.key });
      ctx.state.lastHeartbeatAt = Date.parse(ctx.state.doc?.lastHeartbeat ?? '') || 0;
      if (ctx.state.doc?.outboxAt)
        await this.deps.outbox.publishPending(this.deps.db.relays, { tenantId }, ctx.state.doc);
      await this.deps.sends.rebuild(ctx, tenantId, ctx.state.doc);
    }
    return ctx.state.doc?.tenantId === tenantId ? ctx.state.doc : null;
  }

  private live(ctx: RelayContext, doc: RelayDoc | null, session: number): doc is RelayDoc {
    return isLive(ctx.key, doc, session);
  }

  async connect(ctx: RelayContext, m: Msg<'connect'>): Promise<ConnectedRelay> {
    const { relays } = this.deps.db;
    const scope = { tenantId: m.tenantId };
    let doc = await this.load(ctx, m.tenantId);
    // A redelivered connect finds its own session already there, and finishes what its first delivery may not have.
    let connected = doc && doc.connectedBy === ctx.id ? doc : null;
    if (!connected) {
      const now = nowIso();
      if (!doc) {
        if (!m.registration) throw new AppError('not_found', 'relay not found');
        doc = {
          id: ctx.key,
          tenantId: m.tenantId,
          teamId: m.registration.teamId,
          name: m.name,
          status: 'offline',
          node: null,
          capacity: 0,
          phoneNumbers: m.phoneNumbers ?? [],
          lastHeartbeat: null,
          systemInfo: m.systemInfo,
          health: null,
          secretHash: m.registration.secretHash,
          inboundCursor: 0,
          session: 0,
          registeredAt: now,
          createdAt: now,
          updatedAt: now,
        };
        await relays.insertOne(scope, doc);
      }
      const session = doc.session + 1;
      const online = domainEvent(
        'relay.online',
        doc,
        { id: ctx.key, name: m.name, status: 'online' },
        changeEventId('relay.online', `${ctx.key}\u0000${session}`),
      );
      // The lines this relay is the primary of and that failed over come back to it; those waiting for a standby take it.
      const back = await onlineMoves(this.deps.db, doc, session);
      ({ doc: connected } = await this.deps.outbox.change(
        relays,
        scope,
        { id: ctx.key, session: doc.session },
        {
          $set: {
            status: 'online',
            node: m.node,
            capacity: 0,
            name: m.name,
            systemInfo: m.systemInfo,
            lastHeartbeat: now,
            updatedAt: now,
            session,
            connectedBy: ctx.id,
            ...(m.phoneNumbers ? { phoneNumbers: m.phoneNumbers } : {}),
          },
        },
        [online, ...back.events],
      ));
      if (!connected) throw new Error(`relay ${ctx.key} changed while connecting`);
      await back.apply();
      ctx.state.doc = connected;
      ctx.state.lastHeartbeatAt = Date.parse(now);
    }
    // What the relay held on its last session stays in flight (it still reports on it); credits are granted anew, from capacity 0 until its `ready`.
    ctx.state.credits.detach();
    ctx.state.credits.capacity = connected.capacity;
    const session = connected.session;
    await ctx.send(tenantProtocol, m.tenantId, { kind: 'relay-online', relayId: ctx.key, session });
    await ctx.send(
      relayProtocol,
      ctx.key,
      { kind: 'heartbeat-check', tenantId: m.tenantId, session },
      { delayMs: this.deps.heartbeatTimeoutMs },
    );
    ctx.log.info({ tenantId: m.tenantId, relayId: ctx.key, session }, 'relay online');
    return { session, inboundCursor: connected.inboundCursor };
  }

  /** Health and liveness: one write on the relay's own document, nothing for the tenant actor. */
  async heartbeat(ctx: RelayContext, m: Msg<'heartbeat'>): Promise<void> {
    const doc = await this.load(ctx, m.tenantId);
    if (!this.live(ctx, doc, m.session)) return;
    const now = nowIso();
    const updated = await this.deps.db.relays.updateOne(
      { tenantId: m.tenantId },
      { id: ctx.key, session: m.session },
      { $set: { lastHeartbeat: now, health: { ...m.health, reportedAt: now }, degraded: m.degraded ?? null } },
    );
    if (updated) ctx.state.doc = updated;
    ctx.state.lastHeartbeatAt = Date.parse(now);
  }

  async ready(ctx: RelayContext, m: Msg<'ready'>): Promise<void> {
    const doc = await this.load(ctx, m.tenantId);
    if (!this.live(ctx, doc, m.session)) return;
    const updated = await this.deps.db.relays.updateOne(
      { tenantId: m.tenantId },
      { id: ctx.key, session: m.session },
      { $set: { capacity: m.capacity } },
    );
    if (updated) ctx.state.doc = updated;
    ctx.state.credits.capacity = m.capacity;
    await this.deps.sends.grant(ctx, m.tenantId);
  }

  /** The timer armed at connect: a session silent for the timeout goes offline; otherwise it looks again when it would expire. */
  async heartbeatCheck(ctx: RelayContext, m: Msg<'heartbeat-check'>): Promise<void> {
    const doc = await this.load(ctx, m.tenantId);
    if (!this.live(ctx, doc, m.session)) return;
    const silentMs = Date.now() - ctx.state.lastHeartbeatAt;
    const timeout = this.deps.heartbeatTimeoutMs;
    if (silentMs >= timeout) return this.offline(ctx, m, 'heartbeat timeout');
    await ctx.send(
      relayProtocol,
      ctx.key,
      { kind: 'heartbeat-check', tenantId: m.tenantId, session: m.session },
      { delayMs: Math.max(50, timeout - silentMs) },
    );
  }

  async offline(ctx: RelayContext, m: { tenantId: string; session: number }, reason: string): Promise<void> {
    const doc = await this.load(ctx, m.tenantId);
    if (!this.live(ctx, doc, m.session)) return;
    // Before the document says offline: a crash in between leaves it online, and the redelivery hands back the rest.
    await this.deps.sends.handBackAll(ctx, m.tenantId);
    const event = domainEvent(
      'relay.offline',
      doc,
      { ...relayEventData(doc), status: 'offline' },
      changeEventId('relay.offline', `${ctx.key}\u0000${m.session}`),
    );
    // The lines this relay sends for move to the first other relay of their chain online.
    const moves = await offlineMoves(this.deps.db, doc, m.session);
    const { doc: updated } = await this.deps.outbox.change(
      this.deps.db.relays,
      { tenantId: m.tenantId },
      { id: ctx.key, session: m.session, status: 'online' },
      { $set: { status: 'offline', node: null, updatedAt: nowIso() } },
      [event, ...moves.events],
    );
    if (!updated) return;
    await moves.apply();
    ctx.state.doc = updated;
    await ctx.send(tenantProtocol, m.tenantId, { kind: 'relay-offline', relayId: ctx.key, session: m.session, reason });
    ctx.log.info({ tenantId: m.tenantId, relayId: ctx.key, session: m.session, reason }, 'relay offline');
  }
}

export function relayEventData(doc: RelayDoc) {
  return { id: doc.id, name: doc.name, status: doc.status };
}
