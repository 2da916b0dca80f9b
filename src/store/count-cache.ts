import type { Doc, Filter } from './collection.ts';
import { matches } from './query.ts';
import type { SqlValue } from './sql-filter.ts';

export interface CountCacheOptions {
  /** Counts of at least this many documents are kept; smaller ones cost little to count again. */
  min?: number;
  /** Kept counts per tenant (the least recently used go first). */
  perTenant?: number;
}

/** Tenants with kept counts, per collection (the least recently used go first). */
const tenantsKept = 1_000;

/** A kept count: `filter` is the whole filter, tenant and team included. */
export interface KeptCount {
  tenant: string;
  key: string;
  filter: Filter;
  n: number;
}

/** What changed since the last `changes()`: counts to store (new or moved), counts no longer kept. */
export interface CountChanges {
  write: KeptCount[];
  drop: KeptCount[];
}

/**
 * Large counts of one collection by filter, kept exact by the collection's
 * own writes: this process is the store's only writer (the file is locked), so
 * a write that moves a document into or out of a kept count's filter adds or
 * takes one there. A team's history total then costs a lookup instead of a
 * walk over the team's index entries. Only filters SQL answers exactly are
 * kept, and the document test is the store's own matcher (`query.ts`), the
 * same semantics SQL is translated from.
 *
 * The store keeps them durably too (`changes()` is written in the same
 * transaction as the writes that moved them), so a restart starts from the
 * counts kept before it, not from a walk per team.
 */
export class CountCache {
  private readonly byTenant = new Map<string, Map<string, KeptCount>>();
  readonly min: number;
  private readonly perTenant: number;
  private dirty = new Set<KeptCount>();
  private dropped: KeptCount[] = [];

  constructor(opts: CountCacheOptions = {}) {
    this.min = opts.min ?? 1_000;
    this.perTenant = opts.perTenant ?? 8;
  }

  get(tenant: string, key: string): number | undefined {
    const counts = this.byTenant.get(tenant);
    const kept = counts?.get(key);
    if (!counts || !kept) return undefined;
    this.byTenant.delete(tenant);
    this.byTenant.set(tenant, counts);
    return kept.n;
  }

  /** Keeps `n` for `filter` when it is large enough to be worth it. */
  keep(tenant: string, key: string, filter: Filter, n: number): void {
    if (n < this.min) return;
    this.dirty.add(this.add({ tenant, key, filter, n }));
  }

  /** Counts kept before (read back from the store): they are kept again as they were, nothing to write. */
  load(kept: KeptCount[]): void {
    for (const c of kept) this.add(c);
  }

  private add(kept: KeptCount): KeptCount {
    let counts = this.byTenant.get(kept.tenant);
    if (!counts) {
      if (this.byTenant.size >= tenantsKept) {
        const [oldest, gone] = this.byTenant.entries().next().value!;
        this.byTenant.delete(oldest);
        for (const c of gone.values()) this.drop(c);
      }
      counts = new Map();
      this.byTenant.set(kept.tenant, counts);
    }
    const replaced = counts.get(kept.key);
    if (replaced) this.dirty.delete(replaced);
    else if (counts.size >= this.perTenant) {
      const [oldest, gone] = counts.entries().next().value!;
      counts.delete(oldest);
      this.drop(gone);
    }
    counts.delete(kept.key);
    counts.set(kept.key, kept);
    return kept;
  }

  private drop(kept: KeptCount): void {
    this.dirty.delete(kept);
    this.dropped.push(kept);
  }

  /** Whether there are changes to take. */
  get pending(): boolean {
    return this.dirty.size > 0 || this.dropped.length > 0;
  }

  /** The counts to store and to forget since the last call (forget first: a key can be dropped and kept again). */
  changes(): CountChanges | undefined {
    if (this.dirty.size === 0 && this.dropped.length === 0) return undefined;
    const changes = { write: [...this.dirty], drop: this.dropped };
    this.dirty = new Set();
    this.dropped = [];
    return changes;
  }

  /** The kept counts `doc` is in: hand them to `moved` once its change is written. */
  holding(doc: Doc): KeptCount[] | undefined {
    const counts = this.byTenant.get(doc.tenantId);
    if (!counts) return undefined;
    return [...counts.values()].filter((c) => matches(doc, c.filter));
  }

  /**
   * A document of `tenant` was written: it leaves the counts it was in
   * (`was`; none when it is new) and joins those it matches now (none when it
   * was deleted).
   */
  moved(tenant: string, was: KeptCount[] | undefined, now: Doc | undefined): void {
    for (const c of was ?? []) {
      c.n--;
      if (this.byTenant.get(tenant)?.get(c.key) === c) this.dirty.add(c);
    }
    if (!now) return;
    const counts = this.byTenant.get(tenant);
    if (!counts) return;
    for (const c of counts.values()) {
      if (!matches(now, c.filter)) continue;
      c.n++;
      this.dirty.add(c);
    }
  }

  /** Forgets everything, changes not yet taken included (they were rolled back). */
  clear(): void {
    this.byTenant.clear();
    this.dirty = new Set();
    this.dropped = [];
  }
}

/** A kept count's key: the SQL and its parameters, each with its type, so 1, '1' and a null key differ. */
export function countKey(sql: string, params: SqlValue[]): string {
  return `${sql}\u0000${params.map((p) => (p instanceof Uint8Array ? `b${Buffer.from(p).toString('hex')}` : p === null ? 'n' : `${typeof p === 'number' ? 'd' : 's'}${String(p)}`)).join('\u0000')}`;
}
