import { createHash } from 'node:crypto';
import { AppError } from '../../errors.ts';
import { changeEventId, domainEvent, messageEventData } from '../../events/event-stream.ts';
import { withOutbox, type Outbox } from '../../events/outbox.ts';
import { nowIso } from '../../ids.ts';
import type { RelayLink } from '../../relays/relay-link.ts';
import type { RelayCollections } from '../../relays/relay-store.ts';
import type { ActorContext } from '../../runtime/actor.ts';
import { touchConversation } from '../../messages/conversation-writer.ts';
import { tenantProtocol } from '../tenant/protocol.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import { RollupTally, type MessageRollups } from '../../messages/message-rollups.ts';
import { conversationIdOf, normalizeParticipant } from '../../messages/recipients.ts';
import type { InboundKeywords } from '../../suppressions/opt-out-keywords.ts';

export interface InboundReport {
  relayId: string;
  session: number;
  rowId: number;
  guid: string;
  from: string;
  chatGuid?: string;
  isGroup: boolean;
  body: string;
  receivedAt: string;
  attachments?: string[];
}

/**
 * Stores what a relay read from its Messages database as received messages,
 * once per Messages GUID, then acknowledges the relay's cursor so a
 * reconnect replays only what was not stored. Run by the relay actor, the
 * one writer of the relay's document (its cursor).
 */
export class InboundRecorder {
  constructor(
    private readonly deps: {
      db: MessagingCollections & RelayCollections;
      outbox: Outbox;
      rollups: MessageRollups;
      link: RelayLink;
      /** Run for every received one-to-one message once stored, before the relay's cursor moves: a failure replays it. */
      keywords?: InboundKeywords;
    },
  ) {}

  async record(ctx: ActorContext<unknown>, tenantId: string, report: InboundReport): Promise<void> {
    const { db } = this.deps;
    const relay = await db.relays.findOne({ tenantId }, { id: report.relayId });
    if (!relay) return;
    const teamId = relay.teamId;
    const isGroup = Boolean(report.chatGuid && report.isGroup);
    const sender = normalizeParticipant(report.from);
    const participant = isGroup ? `chat:${report.chatGuid}` : (sender ?? report.from);
    const now = nowIso();
    const doc: MessageDoc = {
      id: `msg_in_${createHash('sha256').update(`${tenantId}\u0000${report.guid}`).digest('base64url').slice(0, 24)}`,
      tenantId,
      teamId,
      direction: 'received',
      status: 'delivered',
      to: relay.phoneNumbers[0] ?? relay.name,
      from: report.from,
      participant,
      conversationId: conversationIdOf(tenantId, teamId, participant),
      body: report.body,
      attachments: report.attachments ?? [],
      priority: 0,
      fromNumber: null,
      attempts: 0,
      lastError: null,
      relayId: relay.id,
      guid: report.guid,
      queuedAt: null,
      sentAt: null,
      deliveredAt: report.receivedAt,
      readAt: null,
      createdAt: report.receivedAt,
      updatedAt: now,
    };
    const scope = { tenantId, teamId };
    // Stored with its message.received event in its outbox: one write, so neither exists without the other.
    const written = withOutbox(doc, [
      domainEvent('message.received', doc, messageEventData(doc), changeEventId('message.received', doc.id)),
    ]);
    let fresh = true;
    try {
      await db.messages.insertOne(scope, written.doc);
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'conflict')) throw err;
      fresh = false; // replayed after a reconnect: stored already
    }
    if (fresh) {
      const tally = new RollupTally();
      tally.add(tenantId, 'received', Date.parse(now), { phoneNumber: relay.phoneNumbers[0], relayId: relay.id });
      await Promise.all([
        touchConversation(db.conversations, {
          tenantId,
          teamId,
          conversationId: doc.conversationId,
          participant,
          isGroup: report.isGroup,
          lastMessage: doc.body,
          lastMessageAt: doc.createdAt,
          unread: 1,
        }),
        this.deps.rollups.write(tally),
      ]);
      await this.deps.outbox.publish(db.messages, scope, [written.entry]);
    } else {
      // Stored by a writer that died (or could not publish) before its event went out: it goes out now, under its stored id.
      await this.deps.outbox.publishPending(
        db.messages,
        scope,
        await db.messages.findOne(scope, { id: doc.id, outboxAt: { $exists: true } }),
      );
    }
    // The dispatch lifts what waited for their reply (actors/tenant/line-pacing.ts), a group chat's for a message in
    // it; a replay tells it again, which changes nothing.
    if (isGroup || sender !== undefined) {
      const at = Date.parse(report.receivedAt);
      await ctx.send(tenantProtocol, tenantId, {
        kind: 'inbound',
        from: participant,
        at: Number.isFinite(at) && at > 0 ? Math.min(at, Date.now()) : Date.now(),
      });
    }
    if (this.deps.keywords && !isGroup && sender !== undefined)
      await this.deps.keywords.received({
        tenantId,
        teamId,
        messageId: doc.id,
        handle: participant,
        body: doc.body,
        fresh,
      });
    await db.relays.updateOne(
      { tenantId },
      { id: relay.id, inboundCursor: { $lt: report.rowId } },
      { $set: { inboundCursor: report.rowId } },
    );
    if (relay.node && relay.session === report.session && relay.status === 'online') {
      await this.deps.link.deliver(
        { id: relay.id, node: relay.node, session: relay.session },
        { type: 'ack', of: 'inbound', cursor: report.rowId },
      );
    }
  }
}
