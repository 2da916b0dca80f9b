import { changeEventId, domainEvent, messageEventData } from '../../events/event-stream.ts';
import type { Outbox } from '../../events/outbox.ts';
import { nowIso } from '../../ids.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import { awaitsUndeliveredFallback, smsFallbackMaxSeconds } from '../../messages/sms-fallback.ts';
import { queueItemOf } from './protocol.ts';
import { takeDue, tenantScope, type TenantContext, type TenantState } from './tenant-state.ts';

/*
 * A send with `fallback: {sms: 'if_undelivered', afterSeconds}` that is sent
 * over iMessage and not delivered within its window is queued once more, as
 * SMS (`viaSms`, as the `not_registered` retry does): one extra attempt.
 *
 * As the undelivered watch does, and beside it: the tenant actor, which writes
 * every `sent`, keeps the deadline of each sent message that asked for it in
 * memory, and its periodic sweep queues those past it again (one read of their
 * documents and one bulk write per sweep that finds any; nothing for a message
 * delivered in time, nor for one without the fallback). So the SMS goes up to
 * one sweep (`tenantSweepMs`) after the window. An activation reads the
 * deadlines back from the store once.
 *
 * A delivery of the iMessage reported after the deadline and before the SMS
 * attempt is claimed cancels the SMS (status-fold.ts); one reported later is
 * not recorded: the recipient then has both.
 */

/** Sent messages read back at an activation at most. */
const rebuildLimit = 10_000;

/**
 * Deadlines followed in memory at most, as the undelivered watch bounds its
 * set: past it a new one is not followed, and its SMS goes only if an
 * activation reads it back.
 */
const fallbacksKept = 100_000;

/** A message just sent: its deadline is followed if it asked for `if_undelivered` (called by undelivered-watch.ts). */
export function followFallback(state: TenantState, m: MessageDoc, sentAtMs: number): void {
  if (!awaitsUndeliveredFallback(m)) return;
  if (state.smsFallbackDue.size >= fallbacksKept && !state.smsFallbackDue.has(m.id)) return;
  state.smsFallbackDue.set(m.id, sentAtMs + windowMsOf(m));
}

/** At activation: the deadlines of the sent `if_undelivered` messages whose SMS is not asked for yet, as the store has them. */
export async function readFallbacksDue(
  messages: MessagingCollections['messages'],
  tenantId: string,
  state: TenantState,
): Promise<void> {
  const since = new Date(Date.now() - 2 * smsFallbackMaxSeconds * 1000).toISOString();
  const sent = await messages.find(
    tenantScope(tenantId),
    { status: 'sent', 'fallback.sms': 'if_undelivered', viaSms: { $exists: false }, sentAt: { $gte: since } },
    { limit: rebuildLimit },
  );
  state.smsFallbackDue.clear();
  for (const m of sent) if (m.sentAt) state.smsFallbackDue.set(m.id, Date.parse(m.sentAt) + windowMsOf(m));
}

/**
 * The sweep: every followed message past its deadline, if it is still only
 * sent, is queued again to go as SMS, with a `message.checkpoint` event
 * (`sms_fallback`) in the same write. Returns how many were.
 */
export async function queueDueAsSms(
  ctx: TenantContext,
  state: TenantState,
  deps: { db: Pick<MessagingCollections, 'messages'>; outbox: Outbox },
  nowMs = Date.now(),
): Promise<number> {
  const due = takeDue(state.smsFallbackDue, (atMs) => atMs <= nowMs);
  if (due.length === 0) return 0;
  const scope = tenantScope(ctx.key);
  const { messages } = deps.db;
  // A cancelled bulk job's message is not sent again: its job hands nothing out any more.
  const open = (m: MessageDoc) => !state.closedSources.has(m.jobId ?? m.parentId ?? '');
  const docs = (await messages.find(scope, { id: { $in: due }, status: 'sent' }, { limit: due.length })).filter(
    (m) => awaitsUndeliveredFallback(m) && open(m),
  );
  const now = nowIso();
  const changes = docs.map((m) => ({
    filter: { id: m.id, status: 'sent', relayId: m.relayId, attempts: m.attempts, viaSms: { $exists: false } },
    // The relay of the iMessage attempt stays named until the SMS is claimed: its delivery may still cancel the SMS.
    update: { $set: { status: 'queued', viaSms: true, smsFallbackAt: now, updatedAt: now } },
    events: [fallbackEvent(m, now, 'undelivered')],
    exclusive: Object.keys(m.outbox ?? {}).length === 0,
  }));
  const applied = await deps.outbox.changeMany(messages, scope, changes);
  docs.forEach((m, i) => {
    if (applied[i]) state.queue.push(queueItemOf(m, 'accepted'));
  });
  const queued = applied.filter(Boolean).length;
  if (queued > 0)
    ctx.log.info({ tenantId: ctx.key, messages: queued }, 'iMessages not delivered within their window go as SMS');
  return queued;
}

/** The window of a message's `if_undelivered` fallback, in ms. */
function windowMsOf(m: MessageDoc): number {
  return m.fallback?.sms === 'if_undelivered' ? m.fallback.afterSeconds * 1000 : 0;
}

/**
 * The one `message.checkpoint` of a message given up on iMessage (`hop:
 * sms_fallback`, with why: `undelivered` or `not_registered`), under an id
 * derived from it: a sweep run twice makes the same event.
 */
export function fallbackEvent(m: MessageDoc, at: string, reason: 'undelivered' | 'not_registered') {
  const data = {
    ...messageEventData({ ...m, status: 'queued' }),
    hop: 'sms_fallback',
    at,
    attempt: m.attempts,
    reason,
  };
  return domainEvent('message.checkpoint', m, data, changeEventId('message.checkpoint', `${m.id}:sms_fallback`));
}
