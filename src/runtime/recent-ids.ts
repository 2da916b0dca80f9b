/** Ids seen within the last `ttlMs`, in memory: the embedded runtime's "emitted once" memory. */
export class RecentIds {
  private readonly seen = new Map<string, number>();

  constructor(private readonly ttlMs: number) {}

  /** False when `id` was added within the ttl. */
  add(id: string, now = Date.now()): boolean {
    // Insertion order is expiry order: only the head can be expired.
    for (const [old, expiresAt] of this.seen) {
      if (expiresAt > now) break;
      this.seen.delete(old);
    }
    if (this.seen.has(id)) return false;
    this.seen.set(id, now + this.ttlMs);
    return true;
  }
}
