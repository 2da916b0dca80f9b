import { AppError } from '../errors.ts';
import {
  scopedDoc,
  type BulkWriteResult,
  type Collection,
  type Doc,
  type Filter,
  type FindOptions,
  type GroupCount,
  type IndexSpec,
  type ScanOptions,
  type Scope,
  type TenantFigure,
  type TenantMeasure,
  type Update,
  type WriteOp,
} from './collection.ts';
import type { KeptCount } from './count-cache.ts';
import { EmbeddedCache } from './embedded-cache.ts';
import { EmbeddedQuery } from './embedded-query.ts';
import { EmbeddedSchema, type Connection, type RowReader } from './embedded-schema.ts';
import type { StoredForm } from './stored-form.ts';
import { countedCommand, type StoreOperation } from './operation-count.ts';
import { applyUpdate, equalityFields, matches } from './query.ts';
import { keyOf, text, type SqlValue } from './sql-filter.ts';

/**
 * One collection as a table (its layout in `embedded-schema.ts`), read by
 * `embedded-query.ts` and written here, in the store's group-committed
 * transaction, with what it keeps in memory (`embedded-cache.ts`) kept exact
 * by every write.
 */
export class EmbeddedCollection<T extends Doc> implements Collection<T> {
  private readonly schema: EmbeddedSchema<T>;
  private readonly cache: EmbeddedCache<T>;
  private readonly query: EmbeddedQuery<T>;

  constructor(
    private readonly store: Connection,
    readonly name: string,
  ) {
    this.schema = new EmbeddedSchema(store, name);
    this.cache = new EmbeddedCache(store, name, this.schema);
    this.query = new EmbeddedQuery(store, this.schema, this.cache);
  }

  /** How its rows are read by SQL of its own. */
  get rows(): RowReader {
    return this.schema;
  }

  /** What its rows' JSON leaves out. */
  set form(form: StoredForm) {
    this.schema.form = form;
  }

  /** Creates the table, the key columns and the indexes `indexes` need; a new key column is filled in for the rows already stored. */
  declare(indexes: IndexSpec[]): void {
    this.schema.declare(indexes);
  }

  private insertRow(doc: T): void {
    const values = this.schema.values(doc);
    try {
      this.store.run(this.schema.insertSql, [
        text(doc.id),
        text(doc.tenantId),
        this.schema.encode(doc),
        ...values.map(keyOf),
      ]);
    } catch (err) {
      throw this.schema.conflict(err);
    }
    this.cache.forget(doc.id);
    this.cache.kept().moved(doc.tenantId, undefined, doc);
    this.cache.countsChanged();
    this.schema.noteArrays(values);
  }

  /** Rewrites a row; only the key columns whose value changed are set, so only their indexes are touched. `was`: the kept counts it was in. */
  private replaceRow(rid: number, before: SqlValue[], was: KeptCount[] | undefined, doc: T): void {
    const values = this.schema.values(doc);
    const keys = values.map(keyOf);
    const changed = keys.map((_, i) => i).filter((i) => !sameKey(before[i]!, keys[i]!));
    const stored = this.schema.encode(doc);
    try {
      this.store.run(this.schema.updateStatement(changed), [stored, ...changed.map((i) => keys[i]!), rid]);
    } catch (err) {
      this.cache.forget(doc.id);
      throw this.schema.conflict(err);
    }
    this.cache.remember(doc.id, rid, stored, text(doc.tenantId), this.schema.toldBy(keys));
    this.cache.kept().moved(doc.tenantId, was, doc);
    this.cache.countsChanged();
    this.schema.noteArrays(values);
  }

  private deleteRow(rid: number, doc: T): void {
    const was = this.cache.kept().holding(doc);
    this.cache.forget(doc.id);
    this.store.run(`DELETE FROM ${this.schema.table} WHERE rid = ?`, [rid]);
    this.cache.counts.moved(doc.tenantId, was, undefined);
    this.cache.countsChanged();
  }

  private select(
    operation: StoreOperation | null,
    scope: Scope,
    filter: Filter,
    opts: FindOptions = {},
  ): Array<{ rid: number; doc: T }> {
    return this.query.select(operation, scope, filter, opts);
  }

  /** The statements of one call, in this turn's transaction: one counted batch. */
  private batch(operation: StoreOperation, work: () => void): void {
    countedCommand(this.name, operation, () => this.store.write(this.name, work));
  }

  /** The changes made before a failure are kept (and awaited) too. */
  private async settle(operation: StoreOperation, work: () => void): Promise<void> {
    try {
      this.batch(operation, work);
    } catch (err) {
      await this.store.committed();
      throw err;
    }
    await this.store.committed();
  }

  async insertOne(scope: Scope, doc: T): Promise<void> {
    this.batch('insertOne', () => this.insertRow(scopedDoc(scope, doc)));
    await this.store.committed();
  }

  async insertMany(scope: Scope, docs: T[]): Promise<void> {
    if (docs.length === 0) return;
    await this.settle('insertMany', () => {
      for (const doc of docs) this.insertRow(scopedDoc(scope, doc));
    });
  }

  async findOne(scope: Scope, filter: Filter): Promise<T | null> {
    return this.select('findOne', scope, filter, { limit: 1 })[0]?.doc ?? null;
  }

  async find(scope: Scope, filter: Filter, opts: FindOptions = {}): Promise<T[]> {
    return this.select('find', scope, filter, opts).map((r) => r.doc);
  }

  count(scope: Scope, filter: Filter): Promise<number> {
    return this.query.count(scope, filter);
  }

  topTenants(filter: Filter, measure: TenantMeasure, limit: number): Promise<TenantFigure[]> {
    return Promise.resolve(this.query.topTenants(filter, measure, limit));
  }

  countBy(scope: Scope, filter: Filter, fields: string[]): Promise<GroupCount[]> {
    return Promise.resolve(this.query.countBy(scope, filter, fields));
  }

  scan(scope: Scope, filter: Filter, opts: ScanOptions): AsyncGenerator<T[]> {
    return this.query.scan(scope, filter, opts);
  }

  /**
   * Every operation read and written in this turn's transaction, so the batch
   * commits whole: one counted command. A unique-key refusal of one operation
   * is reported and the others still apply, as MongoDB's unordered bulkWrite does.
   */
  async bulkWrite(scope: Scope, ops: WriteOp[]): Promise<BulkWriteResult> {
    const result: BulkWriteResult = { matched: 0, upserted: 0, deleted: 0, conflicts: [] };
    if (ops.length === 0) return result;
    this.batch('bulkWrite', () => {
      const named = this.upsertsNamed(scope, ops);
      ops.forEach((op, i) => {
        try {
          this.applyOp(scope, op, result, named);
        } catch (err) {
          if (!(err instanceof AppError && err.code === 'conflict')) throw err;
          result.conflicts.push(i);
        }
      });
    });
    await this.store.committed();
    return result;
  }

  /**
   * The documents named by the batch's upserts (by `id`, possibly with
   * further conditions), looked up in one statement rather than one per
   * operation (a job's conversations): the ids no document has, and the
   * documents found, which the operations that follow take instead of
   * reading them again (once each: after its first operation a document is
   * read as written).
   */
  private upsertsNamed(scope: Scope, ops: WriteOp[]): Prefetched<T> {
    const ids = new Set<string>();
    for (const op of ops)
      if ('updateOne' in op && op.updateOne.upsert && typeof op.updateOne.filter.id === 'string')
        ids.add(op.updateOne.filter.id);
    const found = new Map<string, { rid: number; doc: T }>();
    if (ids.size < 2) return { absent: new Set(), found };
    for (const row of this.select(null, scope, { id: { $in: [...ids] } })) {
      ids.delete(row.doc.id);
      found.set(row.doc.id, row);
    }
    return { absent: ids, found };
  }

  /**
   * The document `filter` names, if any: taken from what the batch read
   * ahead when it is there (checked against the filter's other conditions,
   * as a read would), else read. An operation whose filter names no single
   * id may change any document, so what was read ahead is no longer used.
   */
  private target(scope: Scope, filter: Filter, named: Prefetched<T>): { rid: number; doc: T } | undefined {
    const id = filter.id;
    if (typeof id !== 'string') named.found.clear();
    else {
      const ahead = named.found.get(id);
      if (ahead) {
        named.found.delete(id);
        const { id: _, ...rest } = filter;
        return matches(ahead.doc, rest) ? ahead : undefined;
      }
    }
    return this.select(null, scope, filter, { limit: 1 })[0];
  }

  private applyOp(scope: Scope, op: WriteOp, result: BulkWriteResult, named: Prefetched<T>): void {
    if ('deleteOne' in op) {
      const target = this.target(scope, op.deleteOne.filter, named);
      if (target) {
        this.deleteRow(target.rid, target.doc);
        result.deleted++;
      }
      return;
    }
    const { filter, update, upsert, applied } = op.updateOne;
    // An id no document had when the batch began, unless an earlier operation of it made one.
    const known = typeof filter.id === 'string' && named.absent.delete(filter.id);
    const current = known ? undefined : this.target(scope, filter, named);
    if (current) {
      const before = this.schema.keys(current.doc);
      const was = this.cache.kept().holding(current.doc);
      this.replaceRow(current.rid, before, was, updated(scope, current.doc, update));
      result.matched++;
      applied?.();
    } else if (upsert) {
      const stored = scopedDoc(scope, equalityFields(filter) as T);
      applyUpdate(stored, update, true);
      this.insertRow(stored);
      result.upserted++;
      applied?.();
    }
  }

  async updateOne(scope: Scope, filter: Filter, update: Update, opts: { upsert?: boolean } = {}): Promise<T | null> {
    const [current] = this.select('updateOne', scope, filter, { limit: 1 });
    let stored: T;
    if (current) {
      const before = this.schema.keys(current.doc);
      const was = this.cache.kept().holding(current.doc);
      stored = updated(scope, current.doc, update);
      this.batch('updateOne', () => this.replaceRow(current.rid, before, was, stored));
    } else {
      if (!opts.upsert) return null;
      stored = scopedDoc(scope, equalityFields(filter) as T);
      applyUpdate(stored, update, true);
      this.batch('updateOne', () => this.insertRow(stored));
    }
    await this.store.committed();
    return stored; // stored as text: this object is the caller's
  }

  async updateMany(scope: Scope, filter: Filter, update: Update): Promise<number> {
    return (await this.updateManyReturning(scope, filter, update)).length;
  }

  /** The documents as written: nothing is read back. */
  async updateManyReturning(scope: Scope, filter: Filter, update: Update): Promise<T[]> {
    const targets = this.select('updateMany', scope, filter);
    const written: T[] = [];
    await this.settle('updateMany', () => {
      for (const { rid, doc } of targets) {
        const before = this.schema.keys(doc);
        const was = this.cache.kept().holding(doc);
        const stored = updated(scope, doc, update);
        this.replaceRow(rid, before, was, stored);
        written.push(stored); // stored as text: this object is the caller's
      }
    });
    return written;
  }

  async deleteOne(scope: Scope, filter: Filter): Promise<boolean> {
    const [target] = this.select('deleteOne', scope, filter, { limit: 1 });
    if (!target) return false;
    this.batch('deleteOne', () => this.deleteRow(target.rid, target.doc));
    await this.store.committed();
    return true;
  }

  async deleteMany(scope: Scope, filter: Filter): Promise<number> {
    const targets = this.select('deleteMany', scope, filter);
    await this.settle('deleteMany', () => {
      for (const { rid, doc } of targets) this.deleteRow(rid, doc);
    });
    return targets.length;
  }
}

/** What a bulk write read ahead for its upserts (`upsertsNamed`). */
interface Prefetched<T extends Doc> {
  absent: Set<string>;
  found: Map<string, { rid: number; doc: T }>;
}

function sameKey(a: SqlValue, b: SqlValue): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) return a[0] === b[0];
  return a === b;
}

/** `current` after `update` (changed in place: it is a fresh copy); id, tenant and team never change. */
function updated<T extends Doc>(scope: Scope, current: T, update: Update): T {
  const { id, teamId } = current;
  applyUpdate(current, update, false);
  current.id = id;
  current.tenantId = scope.tenantId;
  if (scope.teamId !== undefined) current.teamId = scope.teamId;
  else if (teamId !== undefined) current.teamId = teamId;
  else delete current.teamId;
  return current;
}
