import { AppError } from '../errors.ts';
import { scopedDoc, scopedFilter, type Collection, type Doc, type Filter, type FindOptions, type IndexSpec, type Scope, type Update } from './collection.ts';
import { applyUpdate, equalityFields, getPath, matches, sortDocs } from './query.ts';

type Change = { op: 'put'; doc: Doc } | { op: 'del'; id: string };

/** Documents in memory with unique indexes enforced; subclasses persist each change. */
export class MemoryCollection<T extends Doc> implements Collection<T> {
  private readonly docs = new Map<string, T>();
  private readonly unique: Array<{ spec: IndexSpec; owners: Map<string, string> }>;

  constructor(readonly name: string, indexes: IndexSpec[]) {
    this.unique = indexes.filter((i) => i.unique).map((spec) => ({ spec, owners: new Map() }));
  }

  protected persist(_change: Change): void {}

  protected get size(): number {
    return this.docs.size;
  }

  protected all(): IterableIterator<T> {
    return this.docs.values();
  }

  protected restore(doc: T): void {
    this.forget(doc.id);
    this.docs.set(doc.id, doc);
    for (const u of this.unique) u.owners.set(uniqueKey(doc, u.spec), doc.id);
  }

  protected forget(id: string): void {
    const old = this.docs.get(id);
    if (!old) return;
    this.docs.delete(id);
    for (const u of this.unique) {
      const key = uniqueKey(old, u.spec);
      if (u.owners.get(key) === id) u.owners.delete(key);
    }
  }

  private checkUnique(doc: T): void {
    for (const u of this.unique) {
      const owner = u.owners.get(uniqueKey(doc, u.spec));
      if (owner !== undefined && owner !== doc.id) throw conflict(this.name, u.spec);
    }
  }

  private write(doc: T): void {
    this.restore(doc);
    this.persist({ op: 'put', doc });
  }

  async insertOne(scope: Scope, doc: T): Promise<void> {
    const stored = structuredClone(scopedDoc(scope, doc));
    if (this.docs.has(stored.id)) throw new AppError('conflict', `a ${this.name} record with this id already exists`);
    this.checkUnique(stored);
    this.write(stored);
  }

  async insertMany(scope: Scope, docs: T[]): Promise<void> {
    for (const doc of docs) await this.insertOne(scope, doc);
  }

  private matching(scope: Scope, filter: Filter): T[] {
    const scoped = scopedFilter(scope, filter);
    if (typeof scoped.id === 'string') {
      const doc = this.docs.get(scoped.id);
      return doc && matches(doc, scoped) ? [doc] : [];
    }
    const out: T[] = [];
    for (const doc of this.docs.values()) if (matches(doc, scoped)) out.push(doc);
    return out;
  }

  async findOne(scope: Scope, filter: Filter): Promise<T | null> {
    const doc = this.matching(scope, filter)[0];
    return doc ? structuredClone(doc) : null;
  }

  async find(scope: Scope, filter: Filter, opts: FindOptions = {}): Promise<T[]> {
    const sorted = sortDocs(this.matching(scope, filter), opts.sort);
    const start = opts.skip ?? 0;
    const end = opts.limit ? start + opts.limit : undefined;
    return sorted.slice(start, end).map((d) => structuredClone(d));
  }

  async count(scope: Scope, filter: Filter): Promise<number> {
    return this.matching(scope, filter).length;
  }

  async updateOne(scope: Scope, filter: Filter, update: Update, opts: { upsert?: boolean } = {}): Promise<T | null> {
    const current = this.matching(scope, filter)[0];
    if (!current) {
      if (!opts.upsert) return null;
      const fresh = scopedDoc(scope, equalityFields(filter) as T);
      applyUpdate(fresh, update, true);
      await this.insertOne(scope, fresh);
      return structuredClone(this.docs.get(fresh.id)!);
    }
    const next = structuredClone(current);
    applyUpdate(next, update, false);
    const stored = scopedDoc(scope, { ...next, id: current.id, tenantId: current.tenantId } as T);
    if (current.teamId !== undefined && scope.teamId === undefined) stored.teamId = current.teamId;
    this.checkUnique(stored);
    this.write(stored);
    return structuredClone(stored);
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    const targets = this.matching(scope, filter);
    for (const doc of targets) await this.updateOne(scope, { id: doc.id }, update);
    return targets.length;
  }

  async deleteOne(scope: Scope, filter: Filter): Promise<boolean> {
    const doc = this.matching(scope, filter)[0];
    if (!doc) return false;
    this.forget(doc.id);
    this.persist({ op: 'del', id: doc.id });
    return true;
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    const targets = this.matching(scope, filter);
    for (const doc of targets) {
      this.forget(doc.id);
      this.persist({ op: 'del', id: doc.id });
    }
    return targets.length;
  }
}

export function uniqueKey(doc: Record<string, unknown>, spec: IndexSpec): string {
  return JSON.stringify(Object.keys(spec.keys).map((k) => getPath(doc, k) ?? null));
}

export function conflict(collection: string, spec: IndexSpec): AppError {
  return new AppError('conflict', `a ${collection} record with the same ${Object.keys(spec.keys).filter((k) => k !== 'tenantId' && k !== 'teamId').join(', ') || 'id'} already exists`);
}
