import { memoryDigester, sha256 } from './secrets.ts';

interface Entry<T> {
  value: Promise<T>;
  /** Set once the load has settled: a hit then answers without waiting. */
  settled: boolean;
  result: T | undefined;
  expiresAt: number;
}

/**
 * What API keys seen lately resolved to, so that a known key is verified
 * from memory: one fast keyed digest of the presented key and a map lookup,
 * no store read and no slow hash (a key's 32 random bytes carry its entropy,
 * so nothing needs stretching). The SHA-256 the store indexes keys by is
 * computed only on a miss, and not kept.
 *
 * The map is keyed by SHA-256 of the presented key behind 32 random bytes
 * made when the process starts, never by the key itself: the raw key lives
 * only as long as the request that presented it, so a heap dump or core file
 * holds no working key, and what it does hold (digests, key ids) matches
 * nothing in the store or in another process. A lookup by digest compares
 * the whole key (a near miss finds nothing; there is no byte-by-byte compare
 * whose timing could leak), which is why there is no "key id plus compare":
 * a key carries no id of its own to look up by.
 *
 * A secret prefix rather than HMAC: the digest never leaves the process, so
 * length extension, the one weakness HMAC's nesting removes, gains nothing
 * (using an entry takes a key whose digest matches it, a preimage), while
 * `createHmac` builds an object per call and cost four times the one-shot
 * `hash` (1.7 µs against 0.4 µs), enough to show in the send path's profile.
 */
export class ApiKeyCache<T> {
  private readonly digest = memoryDigester();
  private readonly entries = new Map<string, Entry<T>>();
  /** The digest each loaded key is held under, by its key id: a revocation names the key id. */
  private readonly digests = new Map<string, string>();
  /** Digests whose load has not settled: whose key they are is not known yet. */
  private readonly loading = new Set<string>();

  constructor(
    /** How long an entry is trusted without hearing of a revocation: the bound for a process that missed one. */
    private readonly ttlMs: number,
    /** What a miss loads, from the key's stored hash. */
    private readonly load: (storedHash: string) => Promise<T>,
    /** The key id of what a load found (undefined for no key). */
    private readonly keyIdOf: (loaded: T) => string | undefined,
    /** Past this many entries the cache starts over (a flood of made-up keys must not grow it without end). */
    private readonly maxEntries = 50_000,
  ) {}

  /**
   * What `raw` resolves to: at once when known, else a promise; requests
   * arriving while it loads share one load (no stampede when an entry expires).
   */
  lookup(raw: string): T | Promise<T> {
    const digest = this.digest(raw);
    const now = Date.now();
    const hit = this.entries.get(digest);
    if (hit && hit.expiresAt > now) return hit.settled ? hit.result! : hit.value;
    const value = this.load(sha256(raw));
    if (this.entries.size >= this.maxEntries) this.clear();
    const entry: Entry<T> = { value, settled: false, result: undefined, expiresAt: now + this.ttlMs };
    this.entries.set(digest, entry);
    this.loading.add(digest);
    value.then(
      (result) => {
        entry.result = result;
        entry.settled = true;
        if (this.entries.get(digest) !== entry) return;
        this.loading.delete(digest);
        const keyId = this.keyIdOf(result);
        if (keyId !== undefined) this.digests.set(keyId, digest);
      },
      () => {
        if (this.entries.get(digest) !== entry) return;
        this.entries.delete(digest);
        this.loading.delete(digest);
      },
    );
    return value;
  }

  /**
   * A revoked key is looked up afresh next time. Loads still under way are
   * dropped too: one of them may have read the key before it was revoked,
   * and whose key each is will be known only when it settles.
   */
  forget(keyId: string): void {
    const digest = this.digests.get(keyId);
    if (digest !== undefined) this.entries.delete(digest);
    this.digests.delete(keyId);
    for (const pending of this.loading) this.entries.delete(pending);
    this.loading.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private clear(): void {
    this.entries.clear();
    this.digests.clear();
    this.loading.clear();
  }
}
