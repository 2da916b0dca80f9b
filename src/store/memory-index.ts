import type { Doc, Sort } from './collection.ts';
import { compareValues } from './query.ts';

/**
 * The secondary indexes of the in-memory collection and the sort of a page.
 * Buckets hold the stored document objects themselves (a stored document is
 * replaced on every write, never changed), so a lookup needs no second step.
 */

const none: ReadonlySet<never> = new Set();

/** An equality on this value can be answered from an index bucket (NaN never equals itself, so it cannot). */
export function indexable(v: unknown): v is string | number | boolean {
  return typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && !Number.isNaN(v));
}

/** `getPath` with the path split once. */
export function valueAt(doc: Record<string, unknown>, path: string[]): unknown {
  let value: unknown = doc;
  for (const part of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Documents per tenant; every query is tenant-scoped, so this alone bounds a scan to one tenant. */
export class TenantIndex<T extends Doc> {
  private readonly byTenant = new Map<string, Set<T>>();

  add(doc: T): void {
    let docs = this.byTenant.get(doc.tenantId);
    if (!docs) this.byTenant.set(doc.tenantId, (docs = new Set()));
    docs.add(doc);
  }

  remove(doc: T): void {
    const docs = this.byTenant.get(doc.tenantId);
    if (!docs) return;
    docs.delete(doc);
    if (docs.size === 0) this.byTenant.delete(doc.tenantId);
  }

  lookup(tenantId: string): ReadonlySet<T> {
    return this.byTenant.get(tenantId) ?? none;
  }
}

/** The documents filed under one value: most values of a high-cardinality field have one, kept without a Set. */
type Bucket<T> = T | Set<T>;

/**
 * Documents by the value of one field, per tenant. A document is filed under
 * its value, or under each element when the value is an array (MongoDB's
 * implicit array match), so the bucket of an `indexable` value holds exactly
 * the tenant's documents that an equality on that value matches.
 */
export class EqualityIndex<T extends Doc> {
  private readonly byTenant = new Map<string, Map<unknown, Bucket<T>>>();
  private readonly path: string[];

  constructor(readonly field: string) {
    this.path = field.split('.');
  }

  add(doc: T): void {
    const value = valueAt(doc, this.path);
    if (indexable(value)) this.file(doc, value);
    else if (Array.isArray(value)) for (const v of value) if (indexable(v)) this.file(doc, v);
  }

  remove(doc: T): void {
    const values = this.byTenant.get(doc.tenantId);
    if (!values) return;
    const value = valueAt(doc, this.path);
    if (indexable(value)) unfile(values, doc, value);
    else if (Array.isArray(value)) for (const v of value) if (indexable(v)) unfile(values, doc, v);
    if (values.size === 0) this.byTenant.delete(doc.tenantId);
  }

  lookup(tenantId: string, value: string | number | boolean): ReadonlySet<T> | readonly T[] {
    const bucket = this.byTenant.get(tenantId)?.get(value);
    return bucket === undefined ? none : bucket instanceof Set ? bucket : [bucket];
  }

  private file(doc: T, value: unknown): void {
    let values = this.byTenant.get(doc.tenantId);
    if (!values) this.byTenant.set(doc.tenantId, (values = new Map()));
    const bucket = values.get(value);
    if (bucket === undefined) values.set(value, doc);
    else if (bucket instanceof Set) bucket.add(doc);
    else if (bucket !== doc) values.set(value, new Set([bucket, doc]));
  }
}

function unfile<T>(values: Map<unknown, Bucket<T>>, doc: T, value: unknown): void {
  const bucket = values.get(value);
  if (bucket === doc) values.delete(value);
  else if (bucket instanceof Set) {
    bucket.delete(doc);
    if (bucket.size === 0) values.delete(value);
  }
}

/** How many documents a lookup found. */
export function sizeOf<T>(found: ReadonlySet<T> | readonly T[]): number {
  return 'size' in found ? found.size : found.length;
}

/**
 * `docs[start, end)` in `sort` order, ties in input order (as the stable sort
 * of `sortDocs`). Each sort key is read once per document, and a small page
 * of many matches is selected without sorting them all.
 */
export function sortedPage<T extends Doc>(docs: T[], sort: Sort, start: number, end: number | undefined): T[] {
  const fields = Object.entries(sort).map(([field, dir]) => ({ path: field.split('.'), dir }));
  const keys = docs.map((doc) => fields.map((f) => valueAt(doc, f.path)));
  const compare = (a: number, b: number): number => {
    for (let f = 0; f < fields.length; f++) {
      const c = compareValues(keys[a]![f], keys[b]![f]);
      if (c !== 0) return c * fields[f]!.dir;
    }
    return a - b;
  };
  let order: number[];
  if (end !== undefined && end * 8 < docs.length) {
    order = [];
    for (let i = 0; i < docs.length; i++) {
      if (order.length === end && compare(i, order[end - 1]!) > 0) continue;
      let lo = 0;
      let hi = order.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (compare(order[mid]!, i) < 0) lo = mid + 1;
        else hi = mid;
      }
      order.splice(lo, 0, i);
      if (order.length > end) order.pop();
    }
  } else {
    order = docs.map((_, i) => i).sort(compare);
  }
  return order.slice(start, end).map((i) => docs[i]!);
}
