import { changeEventId, domainEvent, messageEventData, type DomainEvent } from '../../events/event-stream.ts';
import type { MessageDoc } from '../../messages/message-store.ts';
import type { Filter } from '../../store/collection.ts';
import type { StatusReport } from './protocol.ts';

/** One message's status change, as one compare-and-set on the message as it was read, with the events it causes. */
export interface StatusChange {
  filter: Filter;
  set: Record<string, unknown>;
  events: DomainEvent[];
  /** The message's outbox was empty when read: once published, the events may take the outbox marker with them. */
  exclusive: boolean;
  /** The statuses this change makes the message reach, in order (a folded sent and delivered reach both). */
  reached: Array<'sent' | 'delivered'>;
}

/** A message's one `message.sent`, built before the write that records it (with the status that write sets). */
export function sentEvent(m: MessageDoc, status: 'sent' | 'delivered'): DomainEvent {
  return domainEvent('message.sent', m, messageEventData({ ...m, status }), changeEventId('message.sent', m.id));
}

/**
 * What a report of a send changes on the message as it stands, as the
 * one-by-one path writes it: only the message's current attempt on the
 * reporting relay counts, and no report moves a message backwards. Null
 * when it changes nothing. `failed` is not folded (it schedules a retry).
 */
export function reportChange(m: MessageDoc, r: StatusReport, now: string): { set: Record<string, unknown>; events: DomainEvent[]; reached: StatusChange['reached'] } | null {
  if (m.relayId !== r.relayId || m.attempts !== r.attempt) return null;
  const guid = r.guid ? { guid: r.guid } : {};
  if (r.status === 'sent') {
    if (m.status !== 'processing') return null;
    return { set: { status: 'sent', sentAt: r.at, lastError: null, updatedAt: now, ...guid }, events: [sentEvent(m, 'sent')], reached: ['sent'] };
  }
  if (r.status === 'delivered') {
    if (m.status !== 'processing' && m.status !== 'sent') return null;
    // Delivered with no sent report before it: it was sent, so the same write says so, once.
    const unsent = m.sentAt === null;
    return { set: { status: 'delivered', deliveredAt: r.at, updatedAt: now, ...guid, ...(unsent ? { sentAt: r.at } : {}) }, events: unsent ? [sentEvent(m, 'delivered')] : [], reached: unsent ? ['sent', 'delivered'] : ['delivered'] };
  }
  if (r.status === 'read') {
    if ((m.status !== 'sent' && m.status !== 'delivered') || m.readAt !== null) return null;
    return { set: { readAt: r.at, updatedAt: now }, events: [], reached: [] };
  }
  return null;
}

/**
 * Reports, in the order they came, folded over the messages as read: one
 * change per message carrying what all its reports did (a `sent` and its
 * `delivered` in one batch are one write and one event), guarded by the
 * status, relay, attempt and read time it was read with.
 */
export function foldReports(read: Map<string, MessageDoc>, reports: StatusReport[], now: string): StatusChange[] {
  const changes = new Map<string, StatusChange>();
  const current = new Map<string, MessageDoc>();
  for (const r of reports) {
    const m = current.get(r.messageId) ?? read.get(r.messageId);
    if (!m) continue;
    const change = reportChange(m, r, now);
    if (!change) continue;
    const first = read.get(r.messageId)!;
    const folded = changes.get(r.messageId) ?? {
      filter: { id: first.id, relayId: first.relayId, attempts: first.attempts, status: first.status, readAt: first.readAt },
      set: {},
      events: [],
      exclusive: Object.keys((first as { outbox?: object }).outbox ?? {}).length === 0,
      reached: [],
    };
    Object.assign(folded.set, change.set);
    folded.events.push(...change.events);
    folded.reached.push(...change.reached);
    changes.set(r.messageId, folded);
    current.set(r.messageId, { ...m, ...change.set } as MessageDoc);
  }
  return [...changes.values()];
}
