import { nowIso } from '../ids.ts';
import type { Collection, Update } from '../store/collection.ts';
import type { ConversationDoc, MessageDoc } from './message-store.ts';
import { chunks } from '../chunks.ts';

export interface ConversationTouch {
  tenantId: string;
  teamId: string;
  conversationId: string;
  participant: string;
  isGroup: boolean;
  lastMessage: string;
  lastMessageAt: string;
  /** 1 for a received message, 0 for a sent one. */
  unread: number;
}

/** Conversations written per bulk command: a 10,000-message job's touches go in a few commands, none of them huge. */
const touchesPerCommand = 1_000;

/** The touch a sent message makes: its conversation shows it as the latest, nothing unread. */
export function sentTouch(d: MessageDoc): ConversationTouch {
  return {
    tenantId: d.tenantId,
    teamId: d.teamId,
    conversationId: d.conversationId,
    participant: d.participant,
    isGroup: d.participant.startsWith('chat:'),
    lastMessage: d.body,
    lastMessageAt: d.createdAt,
    unread: 0,
  };
}

/**
 * A sent message's touch sets fixed values and counts the `sent` messages
 * the participant has not answered yet; a received one counts itself unread,
 * records when they last wrote and starts that count again. The line-health
 * rules of the dispatch read both back when it is activated
 * (actors/tenant/line-pacing.ts `seedReplies`).
 */
function touchUpdate(touch: ConversationTouch, now: string, sent: number): Update {
  const $set = { lastMessage: touch.lastMessage, lastMessageAt: touch.lastMessageAt, updatedAt: now };
  const created = { participant: touch.participant, isGroup: touch.isGroup, createdAt: now };
  if (touch.unread === 0) return { $set, $inc: { sentSinceReply: sent }, $setOnInsert: { ...created, unreadCount: 0 } };
  return {
    $set: { ...$set, lastInboundAt: touch.lastMessageAt, sentSinceReply: 0 },
    $inc: { unreadCount: touch.unread },
    $setOnInsert: created,
  };
}

/** Brings one conversation up to date with a new message, creating it on the first one. */
export function touchConversation(conversations: Collection<ConversationDoc>, touch: ConversationTouch): Promise<void> {
  return touchConversations(conversations, [touch]);
}

/**
 * Brings conversations up to date with new messages, creating each on its
 * first: one bulk write of upserts per team (the latest touch of each
 * conversation wins). Two writers racing to create one: the loser's upsert
 * conflicts, and it updates instead.
 */
export async function touchConversations(
  conversations: Collection<ConversationDoc>,
  touches: ConversationTouch[],
): Promise<void> {
  const latest = new Map<string, ConversationTouch>();
  const sent = new Map<ConversationTouch, number>();
  for (const t of touches) {
    const key = `${t.tenantId}\u0000${t.teamId}\u0000${t.conversationId}`;
    const before = latest.get(key);
    // Sent messages since the last received one in the batch (its touch starts the count again).
    sent.set(t, t.unread === 0 ? 1 + (before ? sent.get(before)! : 0) : 0);
    latest.set(key, t);
  }
  const byTeam = new Map<string, ConversationTouch[]>();
  for (const t of latest.values()) {
    const key = `${t.tenantId}\u0000${t.teamId}`;
    const team = byTeam.get(key);
    if (team) team.push(t);
    else byTeam.set(key, [t]);
  }
  const now = nowIso();
  await Promise.all(
    [...byTeam.values()].map(async (team) => {
      const scope = { tenantId: team[0]!.tenantId, teamId: team[0]!.teamId };
      for (const batch of chunks(team, touchesPerCommand)) {
        const ops = batch.map((t) => ({ filter: { id: t.conversationId }, update: touchUpdate(t, now, sent.get(t)!) }));
        const { conflicts } = await conversations.bulkWrite(
          scope,
          ops.map((op) => ({ updateOne: { ...op, upsert: true } })),
        );
        if (conflicts.length > 0)
          await conversations.bulkWrite(
            scope,
            conflicts.map((c) => ({ updateOne: ops[c]! })),
          );
      }
    }),
  );
}
