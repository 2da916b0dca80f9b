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
  filter: Filter;
  n: number;
}

/**
 * Large counts of one collection by filter, kept exact by the collection's
 * own writes: this process is the store's only writer (the file is locked), so
 * a write that moves a document into or out of a kept count's filter adds or
 * takes one there. A team's history total then costs a lookup instead of a
 * walk over the team's index entries. Only filters SQL answers exactly are
 * kept, and the document test is the store's own matcher (`query.ts`), the
 * same semantics SQL is translated from.
 */
export class CountCache {
  private readonly byTenant = new Map<string, Map<string, KeptCount>>();
  readonly min: number;
  private readonly perTenant: number;

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
    let counts = this.byTenant.get(tenant);
    if (!counts) {
      if (this.byTenant.size >= tenantsKept) this.byTenant.delete(this.byTenant.keys().next().value!);
      counts = new Map();
      this.byTenant.set(tenant, counts);
    }
    if (counts.size >= this.perTenant) counts.delete(counts.keys().next().value!);
    counts.set(key, { filter, n });
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
    for (const c of was ?? []) c.n--;
    if (!now) return;
    const counts = this.byTenant.get(tenant);
    if (!counts) return;
    for (const c of counts.values()) if (matches(now, c.filter)) c.n++;
  }

  clear(): void {
    this.byTenant.clear();
  }
}

/** A kept count's key: the SQL and its parameters, each with its type, so 1, '1' and a null key differ. */
export function countKey(sql: string, params: SqlValue[]): string {
  return `${sql}\u0000${params.map((p) => (p instanceof Uint8Array ? `b${Buffer.from(p).toString('hex')}` : p === null ? 'n' : `${typeof p === 'number' ? 'd' : 's'}${String(p)}`)).join('\u0000')}`;
}
