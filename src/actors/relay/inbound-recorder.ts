import { AppError } from '../../errors.ts';
import { changeEventId, domainEvent, messageEventData } from '../../events/event-stream.ts';
import { withOutbox, type Outbox } from '../../events/outbox.ts';
import { digestId, nowIso } from '../../ids.ts';
import type { RelayLink } from '../../relays/relay-link.ts';
import type { RelayCollections, RelayDoc } from '../../relays/relay-store.ts';
import type { ActorContext } from '../../runtime/actor.ts';
import { touchConversation } from '../../messages/conversation-writer.ts';
import { tenantProtocol } from '../tenant/protocol.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import { RollupTally, type MessageRollups } from '../../messages/message-rollups.ts';
import { conversationIdOf, normalizeParticipant } from '../../messages/recipients.ts';
import type { InboundKeywords } from '../../suppressions/opt-out-keywords.ts';
import type { GroupEvent, InboundFile, InboundReaction } from '../../relay-protocol/frames.ts';
import { fileNameOf, receivedAttachments } from '../../messages/attachment-store.ts';
import type { ConversationDoc } from '../../messages/message-store.ts';

/** A message of the relay's chat.db a row points at (relay-protocol `messageReference`). */
export interface MessageReference {
  guid: string;
  messageId?: string;
}

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
  files?: InboundFile[];
  reaction?: InboundReaction;
  replyTo?: MessageReference;
  group?: GroupEvent;
}

export interface ChangeReport {
  relayId: string;
  session: number;
  rowId: number;
  guid: string;
  change: 'edited' | 'unsent';
  at: string;
  body?: string;
}

/** The id of a received message: from its organization and Messages GUID, so a replay finds the stored one. */
export function receivedMessageId(tenantId: string, guid: string): string {
  return `msg_in_${digestId(`${tenantId}\u0000${guid}`, 24)}`;
}

/** Where a sender's reaction is kept on the message it is on: one per sender, as Messages has it. */
function reactionField(from: string): string {
  return `reactions.${digestId(from, 16)}`;
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
    const relay = await this.deps.db.relays.findOne({ tenantId }, { id: report.relayId });
    if (!relay) return;
    if (report.reaction) await this.reaction(tenantId, report, report.reaction);
    else if (report.group) await this.groupEvent(tenantId, relay, report, report.group);
    else await this.message(ctx, tenantId, relay, report);
    await this.deps.db.relays.updateOne(
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

  /**
   * An edit or unsend of a received message: the message gets the edited text
   * (or none) and its flag, with its `message.edited` or `message.unsent`
   * event in the same write; the event's id comes from the message and the
   * change's time, so a change read again makes none. A change of a message
   * not stored (history before the relay, or a row the server never got) is
   * acknowledged and dropped.
   */
  async change(tenantId: string, report: ChangeReport): Promise<void> {
    const { db } = this.deps;
    const relay = await db.relays.findOne({ tenantId }, { id: report.relayId });
    if (!relay) return;
    const scope = { tenantId };
    const doc = await db.messages.findOne(scope, { id: receivedMessageId(tenantId, report.guid) });
    if (doc) {
      const now = nowIso();
      const [set, event] =
        report.change === 'edited'
          ? [
              { body: report.body ?? '', edited: true, editedAt: report.at, updatedAt: now },
              domainEvent(
                'message.edited',
                doc,
                { ...messageEventData({ ...doc, body: report.body ?? '' }), editedAt: report.at },
                changeEventId('message.edited', `${doc.id}\u0000${report.at}`),
              ),
            ]
          : [
              { body: '', unsent: true, unsentAt: report.at, updatedAt: now },
              domainEvent(
                'message.unsent',
                doc,
                { id: doc.id, from: doc.from, conversationId: doc.conversationId, unsentAt: report.at },
                changeEventId('message.unsent', doc.id),
              ),
            ];
      await this.deps.outbox.change(db.messages, scope, { id: doc.id }, { $set: set }, [event]);
      // The conversation shows the latest text of its last message.
      await db.conversations.updateOne(
        { tenantId, teamId: doc.teamId },
        { id: doc.conversationId, lastMessageAt: doc.createdAt },
        { $set: { lastMessage: set.body, updatedAt: now } },
      );
    }
    if (relay.node && relay.session === report.session && relay.status === 'online') {
      await this.deps.link.deliver(
        { id: relay.id, node: relay.node, session: relay.session },
        { type: 'ack', of: 'change', guid: report.guid, at: report.at },
      );
    }
  }

  /** The stored message a row points at, in this organization only; null for one the server never stored. */
  private target(tenantId: string, ref: MessageReference): Promise<MessageDoc | null> {
    const id = ref.messageId ?? receivedMessageId(tenantId, ref.guid);
    return this.deps.db.messages.findOne({ tenantId }, { id });
  }

  /**
   * A tapback on a stored message: kept on it, one per sender (a removal
   * takes the sender's off), with its `message.reaction` event in the same
   * write; the event's id comes from the tapback row's guid, so a replay
   * makes none. A tapback on a message the server never stored is dropped.
   */
  private async reaction(tenantId: string, report: InboundReport, reaction: InboundReaction): Promise<void> {
    const target = await this.target(tenantId, reaction);
    if (!target) return;
    const field = reactionField(report.from);
    const emoji = reaction.emoji ? { emoji: reaction.emoji } : {};
    const now = nowIso();
    const update = reaction.removed
      ? { $set: { updatedAt: now }, $unset: { [field]: '' } }
      : {
          $set: {
            [field]: { reaction: reaction.kind, ...emoji, from: report.from, at: report.receivedAt },
            updatedAt: now,
          },
        };
    const event = domainEvent(
      'message.reaction',
      target,
      {
        messageId: target.id,
        reaction: reaction.kind,
        ...emoji,
        from: report.from,
        removed: reaction.removed,
        conversationId: target.conversationId,
        at: report.receivedAt,
      },
      changeEventId('message.reaction', `${target.id}\u0000${report.guid}`),
    );
    await this.deps.outbox.change(this.deps.db.messages, { tenantId }, { id: target.id }, update, [event]);
  }

  /**
   * A group chat renamed, or a member added or gone: its conversation
   * (created if it has no message yet) takes the name and the members the
   * relay read with the event, with `conversation.updated` in the same
   * write; the event's id comes from the row's guid, so a replay makes none.
   */
  private async groupEvent(tenantId: string, relay: RelayDoc, report: InboundReport, group: GroupEvent) {
    if (!report.chatGuid) return;
    const { db } = this.deps;
    const participant = `chat:${report.chatGuid}`;
    const scope = { tenantId, teamId: relay.teamId };
    const conversationId = conversationIdOf(tenantId, relay.teamId, participant);
    const now = nowIso();
    const created = { participant, isGroup: true, lastMessage: '', lastMessageAt: report.receivedAt, unreadCount: 0 };
    try {
      await db.conversations.updateOne(
        scope,
        { id: conversationId },
        { $setOnInsert: { ...created, createdAt: now, updatedAt: now } },
        { upsert: true },
      );
    } catch (err) {
      if (!(err instanceof AppError && err.code === 'conflict')) throw err; // created beside us by a message
    }
    const set: Record<string, unknown> = { updatedAt: now };
    if (group.change === 'renamed') set.name = group.name ?? '';
    if (group.participants) set.participants = group.participants;
    const data = {
      conversationId,
      change: group.change,
      ...(group.name !== undefined ? { name: group.name } : {}),
      ...(group.handle !== undefined ? { handle: group.handle } : {}),
      by: report.from,
      ...(group.participants ? { participants: group.participants } : {}),
      at: report.receivedAt,
    };
    const event = domainEvent(
      'conversation.updated',
      scope,
      data,
      changeEventId('conversation.updated', `${conversationId}\u0000${report.guid}`),
    );
    const { published } = await this.deps.outbox.change<ConversationDoc>(
      db.conversations,
      scope,
      { id: conversationId },
      { $set: set },
      [event],
    );
    // The conversations have no outbox sweep: an event not published is made again by the relay's replay.
    if (!published) throw new Error('conversation.updated could not be published; the relay replays the row');
  }

  private async message(
    ctx: ActorContext<unknown>,
    tenantId: string,
    relay: RelayDoc,
    report: InboundReport,
  ): Promise<void> {
    const { db } = this.deps;
    const teamId = relay.teamId;
    const isGroup = Boolean(report.chatGuid && report.isGroup);
    const sender = normalizeParticipant(report.from);
    const participant = isGroup ? `chat:${report.chatGuid}` : (sender ?? report.from);
    const now = nowIso();
    const doc: MessageDoc = {
      id: receivedMessageId(tenantId, report.guid),
      tenantId,
      teamId,
      direction: 'received',
      status: 'delivered',
      to: relay.phoneNumbers[0] ?? relay.name,
      from: report.from,
      participant,
      conversationId: conversationIdOf(tenantId, teamId, participant),
      body: report.body,
      // Names only: a path on the Mac is never kept. The bytes come later, uploaded by the relay (attachment-store.ts).
      attachments: report.files
        ? report.files.map((f) => fileNameOf(f.name))
        : (report.attachments ?? []).map(fileNameOf),
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
    const replyTo = report.replyTo ? (await this.target(tenantId, report.replyTo))?.id : undefined;
    if (replyTo) doc.replyTo = replyTo;
    const scope = { tenantId, teamId };
    // Stored with its message.received event in its outbox: one write, so neither exists without the other.
    const written = withOutbox(doc, [
      domainEvent(
        'message.received',
        doc,
        { ...messageEventData(doc), ...(replyTo ? { replyTo } : {}) },
        changeEventId('message.received', doc.id),
      ),
    ]);
    // Both Macs of a line (a primary and its standby, one Apple ID) read the same message: by its guid it is one id;
    // a copy under another guid is the same recipient's text at the same time, from another relay, and is dropped.
    const twin = await db.messages.findOne(scope, {
      conversationId: doc.conversationId,
      createdAt: doc.createdAt,
      direction: 'received',
      body: doc.body,
      relayId: { $ne: relay.id },
    });
    let fresh = !twin || twin.id === doc.id;
    if (fresh) {
      try {
        await db.messages.insertOne(scope, written.doc);
      } catch (err) {
        if (!(err instanceof AppError && err.code === 'conflict')) throw err;
        fresh = false; // replayed after a reconnect, or read by another relay of the line: stored already
      }
    }
    // Before the relay's cursor moves: a replay records any the first pass did not (each id from its guid, once).
    await this.recordAttachments(tenantId, relay, report, doc);
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
  }

  /** The message's attachments, `pending` until their relay uploads them; those stored already are left as they are. */
  private async recordAttachments(tenantId: string, relay: RelayDoc, report: InboundReport, doc: MessageDoc) {
    const docs = receivedAttachments(
      {
        tenantId,
        teamId: doc.teamId,
        messageId: doc.id,
        messageGuid: report.guid,
        relayId: relay.id,
        at: doc.createdAt,
      },
      report.files,
      report.attachments,
    );
    if (docs.length === 0) return;
    const scope = { tenantId, teamId: doc.teamId };
    // A unique-key refusal (in `conflicts`) is one recorded beside us by another relay of the same account: stored already.
    await this.deps.db.attachments.bulkWrite(
      scope,
      docs.map(({ id, ...rest }) => ({
        updateOne: { filter: { id }, update: { $setOnInsert: rest }, upsert: true },
      })),
    );
  }
}
