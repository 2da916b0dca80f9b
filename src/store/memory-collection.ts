import { AppError } from '../errors.ts';
import { scanPageSize, scopedDoc, scopedFilter, totalOrder, type Collection, type Doc, type Filter, type FindOptions, type IndexSpec, type ScanOptions, type Scope, type Update } from './collection.ts';
import { EqualityIndex, TenantIndex, indexable, sizeOf, sortedPage, valueAt } from './memory-index.ts';
import { sortedPages } from './memory-scan.ts';
import { applyUpdate, equalityFields, matches } from './query.ts';

export type Change = { op: 'put'; doc: Doc } | { op: 'del'; id: string };

/**
 * Documents in memory with unique indexes enforced; subclasses persist each
 * change (`persist`, called before memory changes, may refuse by throwing) and
 * say when the changes made so far are durable (`committed`).
 *
 * Invariant: a stored document is never changed in place; a write stores a
 * new object (an update shares the untouched parts of the old one). So a list
 * of stored documents is a point-in-time copy, indexes can hold the objects,
 * and only what crosses the port is cloned: a document on its way in, and
 * every document on its way out.
 *
 * Iteration order, which decides "the first match" and ties in a sort, is the
 * order of each document's last write, in `docs` and in every index bucket.
 */
export class MemoryCollection<T extends Doc> implements Collection<T> {
  private readonly docs = new Map<string, T>();
  private readonly unique: Array<{ spec: IndexSpec; paths: string[][]; owners: Map<string, string> }>;
  /** Each document's unique keys, so a write computes them once and a removal not at all. */
  private readonly uniqueKeysOf = new Map<string, string[]>();
  private readonly tenants = new TenantIndex<T>();
  /** On the second key of each declared index that leads with tenantId (teamId, status, ...). */
  private readonly equality: EqualityIndex<T>[];

  constructor(readonly name: string, indexes: IndexSpec[]) {
    this.unique = indexes.filter((i) => i.unique).map((spec) => ({ spec, paths: Object.keys(spec.keys).map((k) => k.split('.')), owners: new Map() }));
    const second = new Set<string>();
    for (const spec of indexes) {
      const keys = Object.keys(spec.keys);
      const [first, field] = keys;
      // A unique {tenantId, field} holds names, emails or numbers (a few per tenant) or sequences read by id: not worth a map entry per document.
      if (spec.unique && keys.length === 2) continue;
      if (first === 'tenantId' && field !== undefined && field !== 'id' && field !== 'tenantId') second.add(field);
    }
    this.equality = [...second].map((field) => new EqualityIndex<T>(field));
  }

  protected persist(_change: Change): void {}

  /** Settles once every change persisted so far is durable. */
  protected committed(): Promise<void> {
    return Promise.resolve();
  }

  protected get size(): number {
    return this.docs.size;
  }

  protected all(): IterableIterator<T> {
    return this.docs.values();
  }

  /** Puts a document as it was persisted (replaying a snapshot or log): no checks. */
  protected restore(doc: T): void {
    const old = this.docs.get(doc.id);
    if (old) this.unindex(old);
    this.index(doc, this.uniqueKeys(doc));
  }

  protected forget(id: string): void {
    const old = this.docs.get(id);
    if (old) this.unindex(old);
  }

  private uniqueKeys(doc: T): string[] {
    return this.unique.length === 0 ? [] : this.unique.map((u) => JSON.stringify(u.paths.map((path) => valueAt(doc, path) ?? null)));
  }

  private index(doc: T, keys: string[]): void {
    this.docs.set(doc.id, doc);
    if (keys.length > 0) {
      this.uniqueKeysOf.set(doc.id, keys);
      this.unique.forEach((u, i) => u.owners.set(keys[i]!, doc.id));
    }
    this.tenants.add(doc);
    for (const index of this.equality) index.add(doc);
  }

  private unindex(old: T): void {
    this.docs.delete(old.id);
    const keys = this.uniqueKeysOf.get(old.id);
    if (keys) {
      this.uniqueKeysOf.delete(old.id);
      this.unique.forEach((u, i) => {
        if (u.owners.get(keys[i]!) === old.id) u.owners.delete(keys[i]!);
      });
    }
    this.tenants.remove(old);
    for (const index of this.equality) index.remove(old);
  }

  private checkUnique(id: string, keys: string[]): void {
    this.unique.forEach((u, i) => {
      const owner = u.owners.get(keys[i]!);
      if (owner !== undefined && owner !== id) throw conflict(this.name, u.spec);
    });
  }

  /** Stores a new version of a document; `fresh` says its id is not stored yet. */
  private write(doc: T, fresh: boolean): void {
    const keys = this.uniqueKeys(doc);
    this.checkUnique(doc.id, keys);
    this.persist({ op: 'put', doc });
    if (!fresh) this.unindex(this.docs.get(doc.id)!);
    this.index(doc, keys);
  }

  private remove(doc: T): void {
    this.persist({ op: 'del', id: doc.id });
    this.unindex(doc);
  }

  private insertNow(scope: Scope, doc: T): T {
    if (this.docs.has(doc.id)) throw new AppError('conflict', `a ${this.name} record with this id already exists`);
    const stored = cloneDoc(doc);
    stored.tenantId = scope.tenantId;
    if (scope.teamId !== undefined) stored.teamId = scope.teamId;
    this.write(stored, true);
    return stored;
  }

  /**
   * Up to `max` matches, in iteration order. Candidates come from the id, or
   * from the smallest index bucket the filter's equalities select; what that
   * bucket already guarantees is not checked again. With `anyOrder` (the
   * caller sorts, counts or deletes) an `id: {$in}` is answered by lookups, in
   * the list's order; so ties in a sort over an id list follow the list (no
   * order is promised for them: MongoDB promises none either).
   */
  private matching(scope: Scope, filter: Filter, max = Infinity, anyOrder = false): T[] {
    const { candidates, test } = this.plan(scope, filter, anyOrder);
    const out: T[] = [];
    for (const doc of candidates) {
      if (out.length >= max) break;
      if (test(doc)) out.push(doc);
    }
    return out;
  }

  /** The candidates of `matching` and the test of what their selection does not already guarantee. */
  private plan(scope: Scope, filter: Filter, anyOrder: boolean): { candidates: Iterable<T>; test: (doc: T) => boolean } {
    const scoped = scopedFilter(scope, filter);
    let candidates: Iterable<T>;
    let rest: Filter = scoped;
    const ids = anyOrder ? idList(scoped.id) : undefined;
    if (typeof scoped.id === 'string') {
      const doc = this.docs.get(scoped.id);
      candidates = doc ? [doc] : [];
    } else if (ids) {
      candidates = ids.map((id) => this.docs.get(id)).filter((doc) => doc !== undefined);
      rest = { ...scoped };
      delete rest.id;
    } else {
      const tenantId = scoped.tenantId as string;
      let best: ReadonlySet<T> | readonly T[] = this.tenants.lookup(tenantId);
      let covered = 'tenantId';
      for (const index of this.equality) {
        const value = scoped[index.field];
        if (!indexable(value)) continue;
        const docs = index.lookup(tenantId, value);
        if (sizeOf(docs) < sizeOf(best)) [best, covered] = [docs, index.field];
      }
      candidates = best;
      rest = { ...scoped };
      delete rest.tenantId;
      delete rest[covered];
    }
    // Plain equalities on a primitive are checked inline; `matches` gets the rest.
    const equalities: Array<{ path: string[]; value: string | number | boolean }> = [];
    const others: Filter = {};
    for (const [key, cond] of Object.entries(rest)) {
      if (!key.startsWith('$') && indexable(cond)) equalities.push({ path: key.split('.'), value: cond });
      else others[key] = cond;
    }
    const checkOthers = Object.keys(others).length > 0;
    return { candidates, test: (doc) => equalities.every((e) => equals(valueAt(doc, e.path), e.value)) && (!checkOthers || matches(doc, others)) };
  }

  /** The changes made before a failure are kept (and awaited) too. */
  private async settle(work: () => void): Promise<void> {
    try {
      work();
    } catch (err) {
      await this.committed();
      throw err;
    }
    await this.committed();
  }

  async insertOne(scope: Scope, doc: T): Promise<void> {
    this.insertNow(scope, doc);
    await this.committed();
  }

  async insertMany(scope: Scope, docs: T[]): Promise<void> {
    await this.settle(() => {
      for (const doc of docs) this.insertNow(scope, doc);
    });
  }

  async findOne(scope: Scope, filter: Filter): Promise<T | null> {
    const doc = this.matching(scope, filter, 1)[0];
    return doc ? cloneDoc(doc) : null;
  }

  async find(scope: Scope, filter: Filter, opts: FindOptions = {}): Promise<T[]> {
    const start = opts.skip ?? 0;
    const end = opts.limit ? start + opts.limit : undefined;
    const page = opts.sort ? sortedPage(this.matching(scope, filter, Infinity, true), opts.sort, start, end) : this.matching(scope, filter, end).slice(start);
    return page.map((d) => cloneDoc(d));
  }

  /** A point-in-time read: the matches as stored when the scan starts (stored documents are never changed in place). */
  async *scan(scope: Scope, filter: Filter, opts: ScanOptions): AsyncGenerator<T[]> {
    const { candidates, test } = this.plan(scope, filter, true);
    for await (const page of sortedPages(Array.from(candidates), test, totalOrder(opts.sort), opts.pageSize ?? scanPageSize)) yield page.map((d) => cloneDoc(d));
  }

  async count(scope: Scope, filter: Filter): Promise<number> {
    return this.matching(scope, filter, Infinity, true).length;
  }

  async updateOne(scope: Scope, filter: Filter, update: Update, opts: { upsert?: boolean } = {}): Promise<T | null> {
    const current = this.matching(scope, filter, 1)[0];
    let stored: T;
    if (current) {
      stored = updated(scope, current, update);
      this.write(stored, false);
    } else {
      if (!opts.upsert) return null;
      const fresh = scopedDoc(scope, equalityFields(filter) as T);
      applyUpdate(fresh, update, true);
      stored = this.insertNow(scope, fresh);
    }
    const out = cloneDoc(stored);
    await this.committed();
    return out;
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    // Every match is updated, in no particular order: an `id: {$in}` is answered by lookups, not a scan.
    const targets = this.matching(scope, filter, Infinity, true);
    await this.settle(() => {
      for (const doc of targets) this.write(updated(scope, doc, update), false);
    });
    return targets.length;
  }

  async deleteOne(scope: Scope, filter: Filter): Promise<boolean> {
    const doc = this.matching(scope, filter, 1)[0];
    if (!doc) return false;
    this.remove(doc);
    await this.committed();
    return true;
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    const targets = this.matching(scope, filter, Infinity, true);
    await this.settle(() => {
      for (const doc of targets) this.remove(doc);
    });
    return targets.length;
  }
}

/** The distinct ids of an `{$in: [ids]}` condition and nothing else. */
function idList(cond: unknown): string[] | undefined {
  if (cond === null || typeof cond !== 'object' || Array.isArray(cond)) return undefined;
  const keys = Object.keys(cond);
  const list = (cond as { $in?: unknown }).$in;
  if (keys.length !== 1 || !Array.isArray(list) || !list.every((id) => typeof id === 'string')) return undefined;
  return [...new Set(list as string[])];
}

/** `matches` for `{field: value}` with an `indexable` value: the value itself or an array element (MongoDB's implicit array match). */
function equals(field: unknown, value: string | number | boolean): boolean {
  return field === value || (Array.isArray(field) && field.includes(value));
}

/** The next version of `current`; id, tenant and team never change. */
function updated<T extends Doc>(scope: Scope, current: T, update: Update): T {
  const next = copyForUpdate(current, update);
  applyUpdate(next, update, false);
  next.id = current.id;
  next.tenantId = scope.tenantId;
  if (scope.teamId !== undefined) next.teamId = scope.teamId;
  else if (current.teamId !== undefined) next.teamId = current.teamId;
  return next;
}

/**
 * A copy `applyUpdate` may change without touching `current`: shallow, except
 * that a top-level field reached through a dotted path is cloned (undotted
 * paths are replaced wholesale by `applyUpdate`, never changed in place).
 */
function copyForUpdate<T extends Doc>(current: T, update: Update): T {
  const next: Record<string, unknown> = { ...current };
  for (const fields of Object.values(update)) {
    for (const path of Object.keys(fields ?? {})) {
      const dot = path.indexOf('.');
      if (dot < 0) continue;
      const top = path.slice(0, dot);
      const value = current[top];
      if (value !== null && typeof value === 'object' && next[top] === value) next[top] = cloneDoc(value);
    }
  }
  return next as T;
}

/**
 * A deep copy of JSON-like data (what documents are), several times faster
 * than structuredClone; anything else (a Date, a Map) is left to structuredClone.
 */
export function cloneDoc<V>(value: V): V {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(cloneDoc) as V;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return structuredClone(value);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const v = cloneDoc((value as Record<string, unknown>)[key]);
    if (key === '__proto__') Object.defineProperty(out, key, { value: v, enumerable: true, writable: true, configurable: true });
    else out[key] = v;
  }
  return out as V;
}

export function conflict(collection: string, spec: IndexSpec): AppError {
  return new AppError('conflict', `a ${collection} record with the same ${Object.keys(spec.keys).filter((k) => k !== 'tenantId' && k !== 'teamId').join(', ') || 'id'} already exists`);
}
