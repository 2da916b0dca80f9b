import type { FileStore } from './file-store.ts';

/**
 * The storage port. Every read and write takes a scope, and the adapters merge
 * it into every filter and every stored document: there is no unscoped access.
 */
export interface Scope {
  tenantId: string;
  teamId?: string;
}

/**
 * The one namespace that is not a customer tenant: platform lookups made before
 * the tenant is known (a login by email, an API key by its hash).
 */
export const platformScope: Scope = { tenantId: '_platform' };

export interface Doc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  teamId?: string;
}

/**
 * A portable subset of the MongoDB query language that both adapters implement
 * alike: equality (dotted paths, array elements), $eq $ne $in $nin $gt $gte
 * $lt $lte $exists $all $regex (+ $options 'i'), $or, $and.
 */
export type Filter = Record<string, unknown>;

/** $set $unset $inc $push $pull $addToSet $setOnInsert */
export type Update = Partial<
  Record<'$set' | '$unset' | '$inc' | '$push' | '$pull' | '$addToSet' | '$setOnInsert', Record<string, unknown>>
>;

export type Sort = Record<string, 1 | -1>;

export interface FindOptions {
  sort?: Sort;
  skip?: number;
  limit?: number;
}

/**
 * Documents per page of a scan: large enough that the per-page round trip is
 * noise, small enough that one page (read, cloned, written out) holds the
 * event loop for a few milliseconds.
 */
export const scanPageSize = 500;

export interface ScanOptions {
  /** The order pages follow; `id` is added as the last key when absent, so the order is total. Pick an order a declared index covers. */
  sort: Sort;
  pageSize?: number;
}

/** `sort` made total: `id` (in the last key's direction) ends it unless it is there already. */
export function totalOrder(sort: Sort): Sort {
  if ('id' in sort) return sort;
  const dirs = Object.values(sort);
  return { ...sort, id: dirs[dirs.length - 1] ?? 1 };
}

/**
 * The documents after the one whose sort keys (in `sort`'s order) were
 * `values`, in `sort` order (keyset), in the port's filter language:
 * `(a, b) > (x, y)` is `a > x or (a = x and b > y)`, with `$lt` for a
 * descending key. With `id` as the last key, each document is after a given
 * one or before it, never both.
 */
export function afterKeys(sort: Sort, values: unknown[]): Filter {
  const keys = Object.entries(sort);
  return {
    $or: keys.map(([key, dir], i) => {
      const branch: Filter = {};
      keys.slice(0, i).forEach(([before], j) => (branch[before] = values[j]));
      branch[key] = { [dir === 1 ? '$gt' : '$lt']: values[i] };
      return branch;
    }),
  };
}

/** A value a field's default can be: a scalar, or the empty list. */
export type StoredDefault = string | number | boolean | null | readonly [];

/**
 * What a collection's documents leave out of their stored JSON on the
 * embedded store, because the row can tell it again: fields at their
 * default, and fields that repeat another field. Only for top-level fields
 * every document of the collection has (a document without one reads back
 * with it).
 */
export interface StoredFormSpec {
  /** A field at this value is not stored; read back without it, a document has it. */
  defaults?: Record<string, StoredDefault>;
  /** A field holding the same string or number as the field named is not stored; read back, it is that field's value. */
  copies?: Record<string, string>;
  /** A top-level field whose key column (a declared index names it) holds its value, a scalar, is not stored either: read back from the column. */
  keyColumns?: boolean;
}

export interface IndexSpec {
  keys: Record<string, 1 | -1>;
  unique?: boolean;
  /**
   * Only documents that have the first field after tenantId are indexed (as
   * MongoDB's sparse indexes): for a field most documents lack, so writes to
   * those documents maintain one index fewer. A query uses it only when it
   * needs that field to exist (an equality or a range on it). The embedded
   * store honours it; the MongoDB adapter builds a full index.
   */
  sparse?: boolean;
  /**
   * Newest first: its first descending key grows with each new document (a
   * creation time, a version). The embedded store keeps the index in the
   * opposite order of every key, which serves the same orders read backwards,
   * so new entries land at the end of their range: a descending B-tree fed at
   * its front splits every page in half and leaves it half empty. MongoDB
   * builds it as declared.
   */
  newestFirst?: boolean;
}

/**
 * One write of a `bulkWrite`: a compare-and-set (or upsert) on the first
 * match, or a delete of the first match. The operations of one call touch
 * different documents: they may run in any order.
 */
export type WriteOp =
  | {
      updateOne: {
        filter: Filter;
        update: Update;
        upsert?: boolean;
        /**
         * Called while the write is made, in its transaction, if this update
         * applied (matched or upserted): the embedded store only, whose event
         * stream appends commit with its writes (`EventStream.appendWithWrite`).
         * Other stores never call it.
         */
        applied?: () => void;
      };
    }
  | { deleteOne: { filter: Filter } };

export interface BulkWriteResult {
  /** Update operations whose filter matched a document. */
  matched: number;
  /** Update operations that inserted (an upsert that matched nothing). */
  upserted: number;
  deleted: number;
  /** Indexes of the operations refused for a unique key (an upsert that lost a race to insert): the others were applied. */
  conflicts: number[];
}

/**
 * What `topTenants` ranks organizations by: how many documents match, the sum
 * of a numeric field over them (a missing field adds 0), or the earliest ISO
 * time a string field holds among them.
 */
export type TenantMeasure = { count: true } | { sum: string } | { earliest: string };

/** One organization's figure in a `topTenants` answer. */
export interface TenantFigure {
  tenantId: string;
  /** A count or a sum; for `earliest`, the ISO time. */
  value: number | string;
}

export interface Collection<T extends Doc> {
  readonly name: string;
  insertOne(scope: Scope, doc: T): Promise<void>;
  /** One round trip for many documents (group commit); stops at the first conflict. */
  insertMany(scope: Scope, docs: T[]): Promise<void>;
  findOne(scope: Scope, filter: Filter): Promise<T | null>;
  find(scope: Scope, filter: Filter, opts?: FindOptions): Promise<T[]>;
  count(scope: Scope, filter: Filter): Promise<number>;
  /**
   * Every match, a page at a time, in `sort` order: the way to read "all of
   * them". Each page continues from where the previous one ended (never by
   * offset), so a whole scan costs O(n), and the event loop runs between
   * pages. A document whose sort keys do not change comes at most once; one
   * written while the scan runs may or may not come.
   */
  scan(scope: Scope, filter: Filter, opts: ScanOptions): AsyncIterable<T[]>;
  /**
   * Updates the first match and returns it as it is after the update, or null
   * when nothing matched: the compare-and-set primitive (put the expected state
   * in the filter).
   */
  updateOne(scope: Scope, filter: Filter, update: Update, opts?: { upsert?: boolean }): Promise<T | null>;
  updateMany(scope: Scope, filter: Filter, update: Update): Promise<number>;
  /**
   * Updates every match and returns them as they are after the update (in no
   * set order): a claim of many documents. `changed` is a filter that only
   * the documents this update changed match (a marker the update sets), by
   * which a store that cannot return what it wrote reads them back: MongoDB
   * in two round trips (`updateMany`, then one read); the embedded store and
   * the single-id path of FerretDB 1.x return what they wrote, with no read.
   */
  updateManyReturning(scope: Scope, filter: Filter, update: Update, changed: Filter): Promise<T[]>;
  deleteOne(scope: Scope, filter: Filter): Promise<boolean>;
  deleteMany(scope: Scope, filter: Filter): Promise<number>;
  /**
   * Many independent writes in one database round trip (MongoDB's unordered
   * `bulkWrite`; one transaction on the embedded store): the way a batch of
   * compare-and-sets is written. Every operation is tried; a unique-key
   * refusal is reported in `conflicts`, any other failure is thrown.
   */
  bulkWrite(scope: Scope, ops: WriteOp[]): Promise<BulkWriteResult>;
  /**
   * The one read across organizations, for platform operators only (the
   * admin feature): the `limit` organizations whose matches of `filter` rank
   * first by `measure` (largest count or sum, earliest time), ties by id,
   * grouped and ranked by the database in one command (MongoDB `aggregate`
   * with $group, $sort and $limit; SQL GROUP BY, ORDER BY and LIMIT). An
   * organization without a match, or whose sum is 0, is not in the answer.
   */
  topTenants(filter: Filter, measure: TenantMeasure, limit: number): Promise<TenantFigure[]>;
  /**
   * The matches counted for each distinct combination of the values of
   * `fields` (a missing field counts as null), in one command: SQL GROUP BY
   * on the fields' key columns, MongoDB `aggregate` with $group. The way to
   * count a long list by its kinds without reading it.
   */
  countBy(scope: Scope, filter: Filter, fields: string[]): Promise<GroupCount[]>;
}

/** One group of a `countBy` answer: the fields' values, in the order asked, and its count. */
export interface GroupCount {
  values: unknown[];
  count: number;
}

export interface Store {
  readonly kind: 'mongodb' | 'embedded';
  /**
   * Whether an update's filter and its write are one atomic step, so two
   * concurrent updates with the same filter never both apply (MongoDB, the
   * embedded store). FerretDB 1.x reads the matches, then writes them back
   * by id: there two such updates both apply, and only a unique key (an
   * insert of the same id) decides between two writers. Known once `init`
   * has connected.
   */
  readonly updatesCompareAndSet: boolean;
  /** Files too large for a document, in a bucket of their own (file-store.ts): a directory of the data dir, or GridFS. */
  files(bucket: string): FileStore;
  /** Declares a collection and its indexes; indexes are created by `init`. */
  /** `form`: what the embedded store leaves out of a document's stored JSON (`StoredFormSpec`); MongoDB stores it whole. */
  collection<T extends Doc>(name: string, indexes?: IndexSpec[], form?: StoredFormSpec): Collection<T>;
  init(): Promise<void>;
  /** Throws when the database does not answer (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Matches `text` literally and case-insensitively: a search string is never run as a pattern. */
export function literalContains(text: string): { $regex: string; $options: 'i' } {
  return { $regex: text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), $options: 'i' };
}

/** The distinct ids of an `{$in: [ids]}` condition (a filter's `id` naming its documents) and nothing else. */
export function idList(cond: unknown): string[] | undefined {
  if (cond === null || typeof cond !== 'object' || Array.isArray(cond)) return undefined;
  const list = (cond as { $in?: unknown }).$in;
  if (Object.keys(cond).length !== 1 || !Array.isArray(list) || !list.every((id) => typeof id === 'string'))
    return undefined;
  return [...new Set(list as string[])];
}

export function scopedFilter(scope: Scope, filter: Filter): Filter {
  const scoped: Filter = { ...filter, tenantId: scope.tenantId };
  if (scope.teamId !== undefined) scoped.teamId = scope.teamId;
  return scoped;
}

export function scopedDoc<T extends Doc>(scope: Scope, doc: T): T {
  const scoped = { ...doc, tenantId: scope.tenantId };
  if (scope.teamId !== undefined) scoped.teamId = scope.teamId;
  return scoped;
}
