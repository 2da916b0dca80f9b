import type { CreditGrant } from '../tenant/protocol.ts';

/**
 * A relay's sends in flight (handed to it and not yet reported on) and the
 * credits it has granted its tenant actor. One credit is one send the tenant
 * actor may hand over; the relay grants exactly `capacity - inFlight` less
 * what is granted and unused, so the tenant never holds more than the relay
 * can take. Granted credits belong to one join (`epoch`) of one tenant
 * actor activation to one relay session: a new join resets the count, since
 * the relay actor's messages arrive in order and every hand-over made with
 * the old join's credits has been counted by then.
 */
export class RelayCredits {
  /** messageId → the attempt in flight. */
  private readonly sends = new Map<string, number>();
  private grant: { session: number; epoch: string; outstanding: number } | undefined;
  capacity = 0;

  get size(): number {
    return this.sends.size;
  }

  /** The messages in flight, with their attempts. */
  entries(): [string, number][] {
    return [...this.sends.entries()];
  }

  has(messageId: string, attempt?: number): boolean {
    const held = this.sends.get(messageId);
    return held !== undefined && (attempt === undefined || held === attempt);
  }

  add(messageId: string, attempt: number): void {
    this.sends.set(messageId, attempt);
  }

  /** The relay is done with this attempt (reported, timed out or handed back); false if it was not in flight. */
  settle(messageId: string, attempt: number): boolean {
    if (this.sends.get(messageId) !== attempt) return false;
    this.sends.delete(messageId);
    return true;
  }

  clear(): void {
    this.sends.clear();
  }

  /** A tenant actor joins this session and asks for credits: it holds none, so counting starts again. */
  attach(session: number, epoch: string): void {
    this.grant = { session, epoch, outstanding: 0 };
  }

  /** No join holds credits any more (a new session, or the relay left). */
  detach(): void {
    this.grant = undefined;
  }

  /** The join `epoch` used `count` credits to hand sends over. Those of another join were never counted. */
  consumed(epoch: string, count: number): void {
    if (this.grant?.epoch === epoch) this.grant.outstanding -= count;
  }

  /** The grant that brings the tenant's credits to what is free now; undefined when nothing changes or nobody is attached. */
  due(): CreditGrant | undefined {
    const grant = this.grant;
    if (!grant) return undefined;
    const credits = this.capacity - this.sends.size - grant.outstanding;
    if (credits === 0) return undefined;
    grant.outstanding += credits;
    return { session: grant.session, epoch: grant.epoch, credits, capacity: this.capacity };
  }
}
