import { nowIso } from '../ids.ts';
import type { Collection } from '../store/collection.ts';
import { orgScope, type DeliveryDoc } from './webhook-store.ts';
import { chunks } from '../chunks.ts';

interface Success {
  delivery: DeliveryDoc;
  responseStatus: number | null;
  done(err?: unknown): void;
}

/** Deliveries per write: one `$in` list stays a small command. */
const writeChunk = 500;

/**
 * Group commit of successful attempts into the delivery log. Every success
 * reported while a write is under way goes into the next one, as one
 * `updateMany` per organization, attempt count and response status: under
 * load one database round trip records a batch, where one per delivery made
 * the MongoDB wire server the limit (bench/webhooks.ts). Each delivery is
 * still matched by its own compare-and-set (`pending`, with the attempt
 * count its attempt started from), so an attempt made twice records once.
 * A success resolves once it is stored; a failed write rejects every
 * success in it, which stay pending for the sweep (at least once).
 */
export class DeliveryLog {
  private pending: Success[] = [];
  private flushing = false;
  private idle: Array<() => void> = [];

  constructor(private readonly deliveries: Collection<DeliveryDoc>) {}

  succeeded(delivery: DeliveryDoc, responseStatus: number | null): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending.push({ delivery, responseStatus, done: (err) => (err ? reject(err) : resolve()) });
      this.schedule();
    });
  }

  /**
   * Resolves once every success reported so far is written (or its write
   * failed, leaving it pending for the sweep): what a clean stop waits for
   * before closing the store, so no record is lost.
   */
  flushed(): Promise<void> {
    if (!this.flushing && this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private schedule(): void {
    if (this.flushing || this.pending.length === 0) return;
    this.flushing = true;
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    const groups = new Map<string, Success[]>();
    for (const s of batch) {
      const key = `${s.delivery.tenantId}\u0000${s.delivery.attempts}\u0000${s.responseStatus}`;
      const group = groups.get(key);
      if (group) group.push(s);
      else groups.set(key, [s]);
    }
    const now = nowIso();
    // One write after the other: side by side they would only contend for the same collection (a MongoDB wire server on SQLite refuses them).
    for (const group of [...groups.values()].flatMap((g) => chunks(g, writeChunk))) {
      const { tenantId, attempts } = group[0]!.delivery;
      try {
        await this.deliveries.updateMany(
          orgScope(tenantId),
          { id: { $in: group.map((s) => s.delivery.id) }, status: 'pending', attempts },
          {
            $set: {
              status: 'succeeded',
              responseStatus: group[0]!.responseStatus,
              lastError: null,
              nextAttemptAt: null,
              updatedAt: now,
            },
            $inc: { attempts: 1 },
          },
        );
        for (const s of group) s.done();
      } catch (err) {
        for (const s of group) s.done(err);
      }
    }
    this.flushing = false;
    if (this.pending.length === 0) {
      const waiting = this.idle;
      this.idle = [];
      for (const resolve of waiting) resolve();
    }
    this.schedule();
  }
}
