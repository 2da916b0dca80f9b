import { memoryDigester } from './secrets.ts';

interface Verified<C> {
  claims: C;
  /** The token's `exp`, in ms: past it the entry answers nothing, as the token verifies no more. */
  expiresAt: number;
}

/**
 * Access tokens this process verified lately, so that a request carrying a
 * known one is authenticated at once: a signature check is a job on the
 * crypto thread pool and a turn of the event loop to come back from, which
 * under load is the longest part of a request's authentication. A token's
 * claims, issuer, audience and signature never change, so a verification
 * holds until the token expires; what may change (the member's role, the
 * member removed) is looked up on every request, as before.
 *
 * Keyed as `ApiKeyCache` keys API keys (`memoryDigester`): a heap dump
 * holds no working token. Failures are not kept: a forged token
 * costs its verification every time, and finds nothing here.
 */
export class VerifiedTokens<C> {
  private readonly digest = memoryDigester();
  private readonly entries = new Map<string, Verified<C>>();

  constructor(
    /** Past this many entries the oldest is dropped (a flood of valid tokens must not grow it without end). */
    private readonly maxEntries = 10_000,
  ) {}

  /** The claims of `token` if this process verified it and it has not expired; undefined means: verify it. */
  known(token: string, now = Date.now()): C | undefined {
    const key = this.digest(token);
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    if (hit.expiresAt > now) return hit.claims;
    this.entries.delete(key);
    return undefined;
  }

  /** Keeps what a verification of `token` found, until `expSeconds` (the token's `exp`). */
  keep(token: string, claims: C, expSeconds: number): void {
    const key = this.digest(token);
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { claims, expiresAt: expSeconds * 1000 });
  }

  get size(): number {
    return this.entries.size;
  }
}
