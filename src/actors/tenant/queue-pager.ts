import { nowIso } from '../../ids.ts';
import type { MessagingCollections } from '../../messages/message-store.ts';
import { lineGroups, drainedBy } from './pace-forecast.ts';
import { queueItemOf } from './protocol.ts';
import type { SendQueue } from './send-queue.ts';
import { tenantScope, type TenantState } from './tenant-state.ts';

/** Messages of a bulk job read to estimate the share of each sender line and of new recipients: the rest is scaled from them. */
const estimateSample = 1_000;

/** Queued messages that are not waiting for a retry's backoff. */
export function dueQueued() {
  return {
    status: 'queued',
    fanout: { $ne: true },
    $or: [{ nextAttemptAt: null }, { nextAttemptAt: { $exists: false } }, { nextAttemptAt: { $lte: nowIso() } }],
  };
}

/**
 * Reads each sender line's head back from the store, in queue order
 * (priority, then acceptance), as the line's held messages run low; and
 * answers from the store what the heads alone cannot. The messages index
 * (tenant, status, priority, acceptance) serves every read.
 */
export class QueuePager {
  constructor(private readonly messages: MessagingCollections['messages']) {}

  /** Every paged line whose head is at most half full is read back to its head size, or until the store has no more of it. */
  async refill(tenantId: string, queue: SendQueue): Promise<void> {
    for (const [line, priority] of [...queue.paged]) {
      if (queue.heldOf(line) > queue.headSize / 2) continue;
      await this.refillLine(tenantId, queue, line, priority);
    }
  }

  private async refillLine(tenantId: string, queue: SendQueue, line: string, priority: number): Promise<void> {
    const filter = { ...dueQueued(), fromNumber: line === '' ? null : line, priority: { $lte: priority } };
    for await (const page of this.messages.scan(tenantScope(tenantId), filter, {
      sort: { priority: -1, createdAt: 1 },
    })) {
      for (const m of page) {
        if (queue.knows(m.id)) continue;
        queue.pageIn(queueItemOf(m, 'accepted'));
        if (queue.heldOf(line) >= queue.headSize) return queue.repage(line, m.priority);
      }
    }
    queue.unpage(line);
  }

  /** A queued message that is not held, as the queue knows it; null when the store has no such message due. */
  async queued(tenantId: string, messageId: string) {
    const doc = await this.messages.findOne(tenantScope(tenantId), { ...dueQueued(), id: messageId });
    return doc ? queueItemOf(doc, 'accepted') : null;
  }

  /**
   * `estimateAt` (pace-forecast.ts) while messages are paged out: the job's
   * count and the messages ahead on each line are counted in the store; the
   * share of each line and of new recipients comes from the job's first
   * `estimateSample` messages, scaled to its count.
   */
  async estimate(tenantId: string, state: TenantState, source: string, now: number): Promise<number | null> {
    const scope = tenantScope(tenantId);
    const mineFilter = { $and: [dueQueued(), { $or: [{ jobId: source }, { parentId: source }] }] };
    const sample = await this.messages.find(scope, mineFilter, { limit: estimateSample });
    const groups = lineGroups(state, sample, now);
    if (!groups) return null;
    const count = sample.length < estimateSample ? sample.length : await this.messages.count(scope, mineFilter);
    const ahead = new Map<string | null, number>();
    for (const [fromNumber, group] of groups.byLine) {
      group.fresh = Math.round((group.fresh * count) / sample.length);
      group.count = Math.round((group.count * count) / sample.length);
      ahead.set(
        fromNumber,
        await this.messages.count(scope, { ...dueQueued(), fromNumber, priority: { $gte: group.lowest } }),
      );
    }
    return drainedBy(state, groups, (fromNumber) => ahead.get(fromNumber) ?? 0, now);
  }
}
