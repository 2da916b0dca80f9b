/** Callers waiting for one key's call. */
interface Gathered<T> {
  items: T[];
  waiting: Array<{ resolve(): void; reject(err: unknown): void }>;
}

/**
 * Gathers what callers add under a key and hands each key's items to `send`
 * once a tick (`setImmediate`, after the I/O callbacks of the loop's turn):
 * work that ends at about the same time (handlers run concurrently, replies
 * of one round trip) goes to Redis in one call per key, not one per caller.
 * Each caller's promise settles with its key's call: a failed call fails
 * every caller whose items it held.
 */
export class TickBatches<T> {
  private gathered = new Map<string, Gathered<T>>();
  private scheduled: NodeJS.Immediate | undefined;
  private readonly sending = new Set<Promise<void>>();

  constructor(private readonly send: (key: string, items: T[]) => Promise<void>) {}

  add(key: string, items: T[]): Promise<void> {
    return new Promise((resolve, reject) => {
      let batch = this.gathered.get(key);
      if (!batch) this.gathered.set(key, (batch = { items: [], waiting: [] }));
      batch.items.push(...items);
      batch.waiting.push({ resolve, reject });
      this.scheduled ??= setImmediate(() => void this.flush());
    });
  }

  /** Sends what is gathered now, and resolves once every call under way has ended. */
  async flush(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    const batches = this.gathered;
    this.gathered = new Map();
    for (const [key, { items, waiting }] of batches) {
      const call = this.send(key, items).then(
        () => waiting.forEach((w) => w.resolve()),
        (err: unknown) => waiting.forEach((w) => w.reject(err)),
      );
      const kept = call.finally(() => this.sending.delete(kept));
      this.sending.add(kept);
    }
    await Promise.all(this.sending);
  }
}
