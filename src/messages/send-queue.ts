export interface QueuedMessage {
  id: string;
  priority: number;
  fromNumber: string | null;
}

const levels = 101;

/**
 * A tenant's send queue: higher priority first, first in first out within a
 * priority. One FIFO per priority level (0 to 100) keeps every operation cheap.
 */
export class SendQueue {
  private readonly buckets: QueuedMessage[][] = Array.from({ length: levels }, () => []);
  private readonly ids = new Set<string>();

  get size(): number {
    return this.ids.size;
  }

  has(id: string): boolean {
    return this.ids.has(id);
  }

  push(item: QueuedMessage): void {
    if (this.ids.has(item.id)) return;
    this.ids.add(item.id);
    this.buckets[clamp(item.priority)]!.push(item);
  }

  /** Back to the head of its priority: a message handed back by a relay goes before younger ones. */
  pushFront(item: QueuedMessage): void {
    if (this.ids.has(item.id)) return;
    this.ids.add(item.id);
    this.buckets[clamp(item.priority)]!.unshift(item);
  }

  /**
   * Removes and returns, in queue order, the messages `pick` accepts; `pick`
   * returns 'stop' to end the scan. At most `scanLimit` messages are looked at.
   */
  take(pick: (item: QueuedMessage) => boolean | 'stop', scanLimit = 10_000): QueuedMessage[] {
    const taken: QueuedMessage[] = [];
    let scanned = 0;
    for (let level = levels - 1; level >= 0; level--) {
      const bucket = this.buckets[level]!;
      if (bucket.length === 0) continue;
      const kept: QueuedMessage[] = [];
      let stopped = false;
      for (let i = 0; i < bucket.length; i++) {
        const item = bucket[i]!;
        if (stopped || scanned >= scanLimit) {
          kept.push(item);
          continue;
        }
        scanned++;
        const verdict = pick(item);
        if (verdict === 'stop') {
          stopped = true;
          kept.push(item);
        } else if (verdict) {
          taken.push(item);
          this.ids.delete(item.id);
        } else {
          kept.push(item);
        }
      }
      if (kept.length !== bucket.length) this.buckets[level] = kept;
      if (stopped || scanned >= scanLimit) break;
    }
    return taken;
  }

  clear(): void {
    for (const bucket of this.buckets) bucket.length = 0;
    this.ids.clear();
  }
}

function clamp(priority: number): number {
  return Math.min(levels - 1, Math.max(0, Math.trunc(priority)));
}
