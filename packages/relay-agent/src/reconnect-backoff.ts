/**
 * Exponential backoff with full jitter: the n-th consecutive failure waits a
 * uniformly random time in [0, min(cap, base·2ⁿ)], so a fleet of relays that
 * lost the server together does not come back in lockstep.
 */
export class ReconnectBackoff {
  private attempt = 0;

  constructor(
    private readonly baseMs: number,
    private readonly capMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  nextDelayMs(): number {
    const ceiling = Math.min(this.capMs, this.baseMs * 2 ** Math.min(this.attempt, 30));
    this.attempt += 1;
    return Math.floor(this.random() * ceiling);
  }

  /** After a connection that stayed up: the next failure starts from the base again. */
  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}
