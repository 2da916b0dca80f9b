import { AppError } from '../errors.ts';
import { nowIso } from '../ids.ts';
import type { Collection } from '../store/collection.ts';
import type { ConversationDoc } from './message-store.ts';

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

/**
 * Brings a conversation up to date with a new message, creating it on the
 * first one. Two writers racing to create it: the loser's insert conflicts
 * and it updates instead.
 */
export async function touchConversation(conversations: Collection<ConversationDoc>, touch: ConversationTouch): Promise<void> {
  const scope = { tenantId: touch.tenantId, teamId: touch.teamId };
  const now = nowIso();
  const update = {
    $set: { lastMessage: touch.lastMessage, lastMessageAt: touch.lastMessageAt, updatedAt: now },
    $inc: { unreadCount: touch.unread },
    $setOnInsert: { participant: touch.participant, isGroup: touch.isGroup, createdAt: now },
  };
  try {
    await conversations.updateOne(scope, { id: touch.conversationId }, update, { upsert: true });
  } catch (err) {
    if (!(err instanceof AppError && err.code === 'conflict')) throw err;
    await conversations.updateOne(scope, { id: touch.conversationId }, update);
  }
}
