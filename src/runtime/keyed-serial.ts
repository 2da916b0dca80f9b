/**
 * Runs work one at a time per key, in the order it was queued, while
 * different keys run concurrently. This is what gives an actor its
 * one-message-at-a-time guarantee inside one process.
 */
export class KeyedSerial {
  private readonly tails = new Map<string, Promise<void>>();
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];

  run(key: string, work: () => Promise<void>): Promise<void> {
    this.inFlight++;
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous.then(work).catch(() => undefined).finally(() => {
      this.inFlight--;
      if (this.tails.get(key) === next) this.tails.delete(key);
      if (this.inFlight === 0) this.wakeIdle();
    });
    this.tails.set(key, next);
    return next;
  }

  get size(): number {
    return this.inFlight;
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private wakeIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }
}
