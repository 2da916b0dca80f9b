import { changeEventId, domainEvent, messageEventData } from '../../events/event-stream.ts';
import type { Outbox } from '../../events/outbox.ts';
import { nowIso } from '../../ids.ts';
import type { MessageDoc, MessagingCollections } from '../../messages/message-store.ts';
import type { StatusChange } from './status-fold.ts';
import { followFallback } from './sms-fallback-watch.ts';
import { takeDue, tenantScope, type TenantContext, type TenantState } from './tenant-state.ts';

/*
 * Sent and not delivered within the organization's window: the message's
 * record says `undeliveredAt`, and one `message.undelivered` event goes out.
 * It is not a failure: a delivery reported later still applies.
 *
 * No per-message timer and no store read per message: the tenant actor,
 * which writes every `sent`, keeps the sent messages not yet delivered in
 * memory (id and sent time) as it writes them, and its periodic sweep marks
 * those past the window: one read of their documents and one bulk write per
 * sweep that finds any, and nothing for a message delivered in time. An
 * activation reads the followed set back from the store once.
 */

/**
 * Sent messages followed in memory at most: past it a new one is not
 * followed (and logged), so a flood of sends that never deliver cannot grow
 * the tenant actor without bound. At the default 10-minute window that is
 * 160 sends a second that none is delivered, sustained.
 */
export const awaitingDeliveryKept = 100_000;

/** Sent messages read back at an activation at most: those the previous activation followed. */
const rebuildLimit = 10_000;

/** How far back an activation looks for sent messages not yet delivered, beyond the window itself. */
const rebuildLookbackMs = 24 * 3_600_000;

/**
 * Follows what the applied changes sent without delivering, and forgets what
 * they delivered; the same for the deadlines of `if_undelivered` SMS
 * fallbacks (sms-fallback-watch.ts), for which `read` has the messages as read.
 */
export function followDeliveries(
  ctx: TenantContext,
  state: TenantState,
  changes: StatusChange[],
  applied: boolean[],
  read: Map<string, MessageDoc> = new Map(),
): void {
  const awaiting = state.awaitingDelivery;
  changes.forEach((c, i) => {
    if (!applied[i]) return;
    const id = String(c.filter.id);
    if (c.reached.includes('delivered')) {
      awaiting.delete(id);
      state.smsFallbackDue.delete(id);
    } else if (c.reached.includes('sent')) {
      const sentAtMs = Date.parse(String(c.set.sentAt));
      if (!Number.isFinite(sentAtMs)) return;
      follow(ctx, awaiting, id, sentAtMs);
      const m = read.get(id);
      if (m) followFallback(state, m, sentAtMs);
    }
  });
}

/** At activation: the sent messages not yet delivered nor marked, as the store has them. */
export async function readAwaitingDelivery(
  messages: MessagingCollections['messages'],
  tenantId: string,
  state: TenantState,
): Promise<void> {
  const since = new Date(Date.now() - state.undeliveredAfterMs - rebuildLookbackMs).toISOString();
  const sent = await messages.find(
    tenantScope(tenantId),
    { status: 'sent', undeliveredAt: { $exists: false }, sentAt: { $gte: since } },
    { limit: rebuildLimit },
  );
  state.awaitingDelivery.clear();
  for (const m of sent) if (m.sentAt) state.awaitingDelivery.set(m.id, Date.parse(m.sentAt));
}

/** The sweep: every followed message past the window is marked undelivered, if it is still only sent. Returns how many were. */
export async function markUndelivered(
  ctx: TenantContext,
  state: TenantState,
  deps: { db: Pick<MessagingCollections, 'messages'>; outbox: Outbox },
  nowMs = Date.now(),
): Promise<number> {
  const due = takeDue(state.awaitingDelivery, (sentAtMs) => nowMs - sentAtMs >= state.undeliveredAfterMs);
  if (due.length === 0) return 0;
  const scope = tenantScope(ctx.key);
  const { messages } = deps.db;
  const docs = await messages.find(scope, { id: { $in: due }, status: 'sent' }, { limit: due.length });
  const now = nowIso();
  const changes = docs
    .filter((m) => m.undeliveredAt === undefined)
    .map((m) => ({
      filter: { id: m.id, status: 'sent', attempts: m.attempts, undeliveredAt: { $exists: false } },
      update: { $set: { undeliveredAt: now, updatedAt: now } },
      events: [undeliveredEvent(m, now, state.undeliveredAfterMs)],
      exclusive: Object.keys(m.outbox ?? {}).length === 0,
    }));
  const applied = await deps.outbox.changeMany(messages, scope, changes);
  const marked = applied.filter(Boolean).length;
  if (marked > 0)
    ctx.log.info({ tenantId: ctx.key, messages: marked }, 'sent messages not delivered within the window');
  return marked;
}

function follow(ctx: TenantContext, awaiting: Map<string, number>, id: string, sentAtMs: number): void {
  if (!Number.isFinite(sentAtMs)) return;
  if (awaiting.size >= awaitingDeliveryKept && !awaiting.has(id)) {
    ctx.log.warn(
      { tenantId: ctx.key, messageId: id, kept: awaitingDeliveryKept },
      'too many sent messages awaiting delivery: this one is not watched for undelivered',
    );
    return;
  }
  awaiting.set(id, sentAtMs);
}

/** The one `message.undelivered` of a message, under an id derived from it: a sweep run twice makes the same event. */
function undeliveredEvent(m: MessageDoc, at: string, windowMs: number) {
  const data = {
    ...messageEventData(m),
    sentAt: m.sentAt,
    undeliveredAt: at,
    windowSeconds: Math.round(windowMs / 1000),
    ...(m.service ? { service: m.service } : {}),
  };
  return domainEvent('message.undelivered', m, data, changeEventId('message.undelivered', m.id));
}
