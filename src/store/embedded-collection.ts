import { setImmediate as nextTurn } from 'node:timers/promises';
import type Database from 'libsql';
import { AppError } from '../errors.ts';
import {
  idList,
  scanPageSize,
  scopedDoc,
  scopedFilter,
  totalOrder,
  type Collection,
  type Doc,
  type Filter,
  type FindOptions,
  type IndexSpec,
  type ScanOptions,
  type Scope,
  type Update,
  type WriteOp,
  type BulkWriteResult,
} from './collection.ts';
import { applyUpdate, equalityFields, getPath, matches } from './query.ts';
import { CountCache, countKey, type CountCacheOptions, type KeptCount } from './count-cache.ts';
import { countedCommand, type StoreOperation } from './operation-count.ts';
import { jsonWork } from './store-work.ts';
import {
  after,
  keyColumn,
  keyOf,
  orderBy,
  quote,
  sortExpr,
  text,
  where,
  type Columns,
  type SqlValue,
} from './sql-filter.ts';

export type Statement = Database.Statement;

/** What a collection needs of the store: its statements and its group-committed writes. */
export interface Connection {
  statement(sql: string): Statement;
  /** Runs a write statement; after a failure (a constraint) the statement can be used again. */
  run(sql: string, params: SqlValue[]): void;
  /** The first row of a query, the statement reset after it (a statement left on a row holds a read open). */
  first(sql: string, params?: SqlValue[]): Record<string, SqlValue> | null;
  exec(sql: string): void;
  /** Runs `work` in this turn's transaction. */
  write<R>(what: string, work: () => R): R;
  /** Runs `work` once in this turn's transaction just before its COMMIT, however often it is asked for with the same `key`. */
  beforeCommit(key: object, work: () => void): void;
  /** Settles once everything written so far is committed. */
  committed(): Promise<void>;
  /** Throws service_unavailable once the store is closed. */
  assertOpen(what: string): void;
  /** Transactions rolled back so far. */
  readonly rollbacks: number;
  /** Which counts its collections keep. */
  readonly countCache: CountCacheOptions;
}

/** Rows rewritten per statement batch when a new index's key column is filled in. */
const backfillRows = 1_000;
/** Documents kept per collection for lookups by id (the most recently used), and their stored bytes at most. */
const cachedDocs = 1_000;
const cachedBytes = 1 << 20;
/** A document larger than this is not kept. */
const cachedDocMax = 8 << 10;

/** A document as stored, kept for lookups by id. */
interface Cached {
  rid: number;
  stored: Uint8Array | string;
}

export function createTable(store: Connection, name: string): void {
  const table = quote(name);
  store.exec(
    `CREATE TABLE IF NOT EXISTS ${table} (rid INTEGER PRIMARY KEY, id TEXT NOT NULL, tenant TEXT NOT NULL, doc TEXT NOT NULL)`,
  );
  store.exec(`CREATE UNIQUE INDEX IF NOT EXISTS ${quote(`${name}:id`)} ON ${table} (id)`);
}

function indexName(collection: string, spec: IndexSpec): string {
  return `${collection}:${Object.entries(spec.keys)
    .map(([k, d]) => `${k}${d === -1 ? '-' : ''}`)
    .join(',')}${spec.unique ? ':unique' : ''}${spec.sparse ? ':sparse' : ''}`;
}

function indexColumn(path: string): string {
  return path === 'tenantId' ? 'tenant' : path === 'id' ? 'id' : keyColumn(path);
}

/** A row as libsql's `all` and `iterate` give it: a BLOB comes as an ArrayBuffer (`get` gives a Buffer). */
interface Row {
  rid: number;
  doc: ArrayBuffer | Uint8Array | string;
}

/** Whether a document is in `scope`, as the SQL's tenant and team conditions would find. */
function inScope(scope: Scope, doc: Doc): boolean {
  return doc.tenantId === scope.tenantId && (scope.teamId === undefined || doc.teamId === scope.teamId);
}

/**
 * A document is stored as the UTF-8 bytes of its JSON (a blob), as every
 * earlier version of this store did: Buffer encodes them natively.
 */
export function encode(doc: Doc): Uint8Array {
  jsonWork.encodes++;
  return Buffer.from(JSON.stringify(doc));
}

/** A column's value as it is bound again (a key) or kept: a BLOB as bytes. */
function fromColumn<V>(value: V | ArrayBuffer): V | Buffer {
  return value instanceof ArrayBuffer ? Buffer.from(value) : value;
}

function decode<T>(stored: ArrayBuffer | Uint8Array | string): T {
  jsonWork.parses++;
  if (typeof stored === 'string') return JSON.parse(stored) as T;
  return JSON.parse(
    stored instanceof ArrayBuffer
      ? Buffer.from(stored).toString()
      : Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength).toString(),
  ) as T;
}

/**
 * One collection as a table: `rid` (the row), `id`, `tenant`, the document as
 * JSON, and a key column per field a declared index names (see `sql-filter.ts`).
 */
export class EmbeddedCollection<T extends Doc> implements Collection<T>, Columns {
  private readonly table: string;
  /** Field paths with a key column, in column order. */
  private fields: string[] = [];
  /** `fields`, split at the dots once. */
  private paths: string[][] = [];
  private readonly fieldSet = new Set<string>();
  private readonly arrays = new Set<string>();
  private readonly uniques: IndexSpec[] = [];
  private insertSql: string;
  private loaded = false;
  private readonly counts: CountCache;
  /** The store's rollbacks when what this collection holds in memory was last made current (-1: not yet). */
  private rollbacksSeen = -1;
  /**
   * Documents recently read or rewritten, by id, as stored: a lookup by id of
   * one of them (a conversation touched per send, a message whose status
   * changes) skips SQLite. Exact because this process is the file's only
   * writer and every write here updates or drops its entry; emptied when a
   * commit is rolled back.
   */
  private readonly docs = new Map<string, Cached>();
  private docBytes = 0;

  constructor(
    private readonly store: Connection,
    readonly name: string,
  ) {
    this.table = quote(name);
    this.insertSql = this.insertStatement();
    this.counts = new CountCache(store.countCache);
  }

  /** The kept counts, current (see `current`). */
  private kept(): CountCache {
    this.current();
    return this.counts;
  }

  /**
   * What this collection holds in memory, made current the first time and
   * after a rollback (which took back writes that memory had seen): the kept
   * documents are dropped, the kept counts read back from the store (whose
   * stored counts rolled back with the writes).
   */
  private current(): void {
    if (this.rollbacksSeen === this.store.rollbacks) return;
    this.rollbacksSeen = this.store.rollbacks;
    this.docs.clear();
    this.docBytes = 0;
    this.counts.clear();
    const rows = this.store
      .statement('SELECT tenant, key, filter, n FROM relaybox_counts WHERE collection = ? ORDER BY rowid')
      .all([this.name]) as Array<{ tenant: string; key: ArrayBuffer; filter: string; n: number }>;
    this.counts.load(
      rows.map((row) => ({
        tenant: row.tenant,
        key: Buffer.from(row.key).toString(),
        filter: JSON.parse(row.filter) as Filter,
        n: row.n,
      })),
    );
    this.countsChanged(); // what load dropped over the limits
  }

  /** Stores the counts that changed, in the transaction of the writes that changed them. */
  private countsChanged(): void {
    if (this.counts.pending) this.store.beforeCommit(this.counts, () => this.writeCounts());
  }

  /** A count's key is stored as bytes: it holds NUL separators, which a bound string would end at. */
  private writeCounts(): void {
    const changes = this.counts.changes();
    if (!changes) return;
    for (const c of changes.drop)
      this.store.run('DELETE FROM relaybox_counts WHERE collection = ? AND key = ?', [this.name, Buffer.from(c.key)]);
    for (const c of changes.write) {
      this.store.run(
        'INSERT INTO relaybox_counts (collection, key, tenant, filter, n) VALUES (?, ?, ?, ?, ?) ON CONFLICT (collection, key) DO UPDATE SET n = excluded.n',
        [this.name, Buffer.from(c.key), c.tenant, JSON.stringify(c.filter), c.n],
      );
    }
  }

  has(path: string): boolean {
    return this.fieldSet.has(path);
  }

  multikey(path: string): boolean {
    return this.arrays.has(path);
  }

  /** Creates the table, the key columns and the indexes `indexes` need; a new key column is filled in for the rows already stored. */
  declare(indexes: IndexSpec[]): void {
    createTable(this.store, this.name);
    if (!this.loaded) {
      this.loaded = true;
      for (const info of this.store
        .statement(`SELECT name FROM pragma_table_info('${this.name.replace(/'/g, "''")}')`)
        .all() as Array<{ name: string }>) {
        if (info.name.startsWith('f:')) this.addField(info.name.slice(2));
      }
      for (const row of this.store
        .statement('SELECT field FROM relaybox_multikey WHERE collection = ?')
        .all([this.name]) as Array<{ field: string }>)
        this.arrays.add(row.field);
    }
    const missing = [...new Set(indexes.flatMap((spec) => Object.keys(spec.keys)))].filter(
      (path) => path !== 'tenantId' && path !== 'id' && !this.fieldSet.has(path),
    );
    if (missing.length > 0) this.store.write(this.name, () => this.addColumns(missing));
    for (const spec of indexes) {
      const columns = Object.entries(spec.keys).map(
        ([path, dir]) => `${indexColumn(path)}${dir === -1 ? ' DESC' : ''}`,
      );
      const sparse = spec.sparse ? Object.keys(spec.keys).find((path) => path !== 'tenantId') : undefined;
      const only = sparse ? ` WHERE ${indexColumn(sparse)} IS NOT NULL` : '';
      this.store.exec(
        `CREATE ${spec.unique ? 'UNIQUE ' : ''}INDEX IF NOT EXISTS ${quote(indexName(this.name, spec))} ON ${this.table} (${columns.join(', ')})${only}`,
      );
      if (spec.unique && !this.uniques.some((u) => indexName(this.name, u) === indexName(this.name, spec)))
        this.uniques.push(spec);
    }
  }

  private addField(path: string): void {
    this.fields.push(path);
    this.paths.push(path.split('.'));
    this.fieldSet.add(path);
    this.insertSql = this.insertStatement();
  }

  private insertStatement(): string {
    return `INSERT INTO ${this.table} (id, tenant, doc${this.fields.map((f) => `, ${keyColumn(f)}`).join('')}) VALUES (?, ?, ?${', ?'.repeat(this.fields.length)})`;
  }

  private addColumns(paths: string[]): void {
    for (const path of paths) {
      this.store.exec(`ALTER TABLE ${this.table} ADD COLUMN ${keyColumn(path)}`);
      this.addField(path);
    }
    const select = this.store.statement(
      `SELECT rid, doc FROM ${this.table} WHERE rid > ? ORDER BY rid LIMIT ${backfillRows}`,
    );
    const update = this.store.statement(
      `UPDATE ${this.table} SET ${paths.map((p) => `${keyColumn(p)} = ?`).join(', ')} WHERE rid = ?`,
    );
    for (let last = -Infinity; ;) {
      const rows = select.all([last]) as unknown as Row[];
      if (rows.length === 0) break;
      for (const row of rows) {
        const doc = decode<T>(row.doc);
        const values = paths.map((p) => getPath(doc, p));
        update.run([...values.map(keyOf), row.rid]);
        this.noteArrays(values, paths);
      }
      last = rows[rows.length - 1]!.rid;
    }
  }

  /** The values of the key fields in `doc`. */
  private values(doc: T): unknown[] {
    return this.paths.map((path) => valueAt(doc, path));
  }

  /** Remembers (durably, with the write) that a field held an array, so equalities on it also consider array documents. */
  private noteArrays(values: unknown[], fields: string[] = this.fields): void {
    values.forEach((value, i) => {
      const path = fields[i]!;
      if (!Array.isArray(value) || this.arrays.has(path)) return;
      this.store.run('INSERT OR IGNORE INTO relaybox_multikey (collection, field) VALUES (?, ?)', [this.name, path]);
      this.arrays.add(path);
    });
  }

  private conflict(err: unknown): unknown {
    const message = err instanceof Error ? err.message : '';
    if (!message.includes('UNIQUE constraint failed')) return err;
    if (message.endsWith(`${this.name}.id`))
      return new AppError('conflict', `a ${this.name} record with this id already exists`);
    const spec = this.uniques.find((u) =>
      Object.keys(u.keys).every((k) =>
        message.includes(`${this.name}.${k === 'tenantId' ? 'tenant' : k === 'id' ? 'id' : `f:${k}`}`),
      ),
    );
    const fields = spec
      ? Object.keys(spec.keys)
          .filter((k) => k !== 'tenantId' && k !== 'teamId')
          .join(', ')
      : 'key';
    return new AppError('conflict', `a ${this.name} record with the same ${fields || 'id'} already exists`);
  }

  private insertRow(doc: T): void {
    const values = this.values(doc);
    try {
      this.store.run(this.insertSql, [text(doc.id), text(doc.tenantId), encode(doc), ...values.map(keyOf)]);
    } catch (err) {
      throw this.conflict(err);
    }
    this.forget(doc.id);
    this.kept().moved(doc.tenantId, undefined, doc);
    this.countsChanged();
    this.noteArrays(values);
  }

  /** Rewrites a row; only the key columns whose value changed are set, so only their indexes are touched. `was`: the kept counts it was in. */
  private replaceRow(rid: number, before: SqlValue[], was: KeptCount[] | undefined, doc: T): void {
    const values = this.values(doc);
    const keys = values.map(keyOf);
    const changed = keys.map((_, i) => i).filter((i) => !sameKey(before[i]!, keys[i]!));
    const sql = `UPDATE ${this.table} SET doc = ?${changed.map((i) => `, ${keyColumn(this.fields[i]!)} = ?`).join('')} WHERE rid = ?`;
    const stored = encode(doc);
    try {
      this.store.run(sql, [stored, ...changed.map((i) => keys[i]!), rid]);
    } catch (err) {
      this.forget(doc.id);
      throw this.conflict(err);
    }
    this.remember(doc.id, rid, stored);
    this.kept().moved(doc.tenantId, was, doc);
    this.countsChanged();
    this.noteArrays(values);
  }

  private deleteRow(rid: number, doc: T): void {
    const was = this.kept().holding(doc);
    this.forget(doc.id);
    this.store.run(`DELETE FROM ${this.table} WHERE rid = ?`, [rid]);
    this.counts.moved(doc.tenantId, was, undefined);
    this.countsChanged();
  }

  private keys(doc: T): SqlValue[] {
    return this.values(doc).map(keyOf);
  }

  private remember(id: string, rid: number, stored: Uint8Array | string): void {
    this.current();
    this.forget(id);
    if (stored.length > cachedDocMax) return;
    this.docs.set(id, { rid, stored });
    this.docBytes += stored.length;
    while (this.docs.size > cachedDocs || this.docBytes > cachedBytes) this.forget(this.docs.keys().next().value!);
  }

  private forget(id: string): void {
    const gone = this.docs.get(id);
    if (!gone) return;
    this.docs.delete(id);
    this.docBytes -= gone.stored.length;
  }

  /**
   * A lookup by id of kept documents, answered from memory: one id, or a
   * list of ids all kept (unsorted), with any further conditions checked on
   * each document as MongoDB would (what the SQL path matches too), and the
   * scope as the SQL would. Undefined when SQL must answer.
   */
  private byId(scope: Scope, filter: Filter, opts: FindOptions): Array<{ rid: number; doc: T }> | undefined {
    const id = filter.id;
    if (opts.skip) return undefined;
    const ids = typeof id === 'string' ? [id] : opts.sort ? undefined : idList(id);
    if (!ids) return undefined;
    const hits: Cached[] = [];
    for (const each of ids) {
      const hit = this.keptDoc(each);
      if (!hit) return undefined;
      hits.push(hit);
    }
    const { id: _, ...rest } = filter;
    const out: Array<{ rid: number; doc: T }> = [];
    for (const hit of hits) {
      const doc = decode<T>(hit.stored);
      if (inScope(scope, doc) && matches(doc, rest)) out.push({ rid: hit.rid, doc });
      if (opts.limit && out.length === opts.limit) break;
    }
    return out;
  }

  /** A kept document, now the most recently used. */
  private keptDoc(id: string): Cached | undefined {
    this.current();
    const hit = this.docs.get(id);
    if (!hit) return undefined;
    this.docs.delete(id);
    this.docs.set(id, hit);
    return hit;
  }

  /** The matches in `sort` order (or the order SQL finds them in), `skip` and `limit` applied; each a fresh object. One counted statement unless kept. */
  private select(
    operation: StoreOperation | null,
    scope: Scope,
    filter: Filter,
    opts: FindOptions = {},
  ): Array<{ rid: number; doc: T }> {
    this.store.assertOpen(this.name);
    const kept = this.byId(scope, filter, opts);
    if (kept) return kept;
    const { sql, params, rest } = where(this, scopedFilter(scope, filter));
    const exact = Object.keys(rest).length === 0;
    const skip = opts.skip ?? 0;
    const limit = opts.limit || undefined;
    let text = `SELECT rid, doc FROM ${this.table} WHERE ${sql}`;
    if (opts.sort && Object.keys(opts.sort).length > 0) text += ` ORDER BY ${orderBy(this, opts.sort)}`;
    const bound = [...params];
    if (exact && (limit !== undefined || skip > 0)) {
      text += ' LIMIT ? OFFSET ?';
      bound.push(limit ?? -1, skip);
    }
    // Documents read by id are kept: a status change reads its message by id, then writes it.
    const byIds = typeof filter.id === 'string' || idList(filter.id) !== undefined;
    const run = () => {
      const stmt = this.store.statement(text);
      const out: Array<{ rid: number; doc: T }> = [];
      let skipped = exact ? skip : 0;
      const take = (row: Row): boolean => {
        const doc = decode<T>(row.doc);
        if (!exact && !matches(doc, rest)) return true;
        if (skipped < skip) {
          skipped++;
          return true;
        }
        out.push({ rid: row.rid, doc });
        if (byIds) this.remember(doc.id, row.rid, fromColumn(row.doc));
        return limit === undefined || out.length < limit;
      };
      // Exact: SQL applies the limit, so every row is taken and the statement runs to its end.
      if (exact) (stmt.all(bound) as Row[]).forEach(take);
      else takeUntil(stmt, bound, take);
      return out;
    };
    // Inside a bulk write the whole batch is the one counted command.
    return operation === null ? run() : countedCommand(this.name, operation, run);
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

  async count(scope: Scope, filter: Filter): Promise<number> {
    this.store.assertOpen(this.name);
    const scoped = scopedFilter(scope, filter);
    const { sql, params, rest } = where(this, scoped);
    if (Object.keys(rest).length > 0) return this.select('count', scope, filter).length;
    const counts = this.kept();
    const key = countKey(sql, params);
    const kept = counts.get(scope.tenantId, key);
    if (kept !== undefined) return kept;
    const row = countedCommand(this.name, 'count', () =>
      this.store.first(`SELECT count(*) AS n FROM ${this.table} WHERE ${sql}`, params),
    ) as { n: number };
    if (row.n >= counts.min && storable(scoped)) {
      counts.keep(scope.tenantId, key, structuredClone(scoped), row.n);
      this.countsChanged();
    }
    return row.n;
  }

  /**
   * Keyset pages: each page is one query that starts after the previous
   * page's last sort keys (`after`), on the index that covers the order when
   * one does, so a whole scan is O(n) and no page holds the event loop for
   * more than one page's work.
   */
  async *scan(scope: Scope, filter: Filter, opts: ScanOptions): AsyncGenerator<T[]> {
    const sort = totalOrder(opts.sort);
    const pageSize = opts.pageSize ?? scanPageSize;
    const { sql, params, rest } = where(this, scopedFilter(scope, filter));
    const exact = Object.keys(rest).length === 0;
    const keys = Object.keys(sort)
      .map((path, i) => `${sortExpr(this, path)} AS s${i}`)
      .join(', ');
    const order = orderBy(this, sort);
    let last: SqlValue[] | null = null;
    let page: T[] = [];
    for (;;) {
      this.store.assertOpen(this.name);
      const next: { sql: string; params: SqlValue[] } | null = last ? after(this, sort, last) : null;
      const { rows, full } = countedCommand(this.name, 'scan_page', () => {
        const stmt = this.store.statement(
          `SELECT rid, doc, ${keys} FROM ${this.table} WHERE ${sql}${next ? ` AND ${next.sql}` : ''} ORDER BY ${order} LIMIT ?`,
        );
        let rows = 0;
        // A page at most (LIMIT), read whole, so the statement runs to its end and holds no read between pages.
        for (const row of stmt.all([...params, ...(next?.params ?? []), pageSize]) as Array<
          Row & Record<string, SqlValue | ArrayBuffer>
        >) {
          rows++;
          last = Object.keys(sort).map((_, i): SqlValue => fromColumn(row[`s${i}`] ?? null));
          const doc = decode<T>(row.doc);
          if (exact || matches(doc, rest)) page.push(doc);
          if (page.length === pageSize) return { rows, full: true };
        }
        return { rows, full: false };
      });
      const end = !full && rows < pageSize;
      if (full || (end && page.length > 0)) {
        yield page;
        page = [];
      }
      if (end) return;
      await nextTurn();
    }
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
      const absent = this.absentIds(scope, ops);
      ops.forEach((op, i) => {
        try {
          this.applyOp(scope, op, result, absent);
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
   * The ids named by the batch's upserts (by `id`, possibly with further
   * conditions) that no document has: looked up in one statement rather
   * than one per operation (a job's new conversations), the documents found
   * kept in memory for the operations that follow.
   */
  private absentIds(scope: Scope, ops: WriteOp[]): Set<string> {
    const named = new Set<string>();
    for (const op of ops)
      if ('updateOne' in op && op.updateOne.upsert && typeof op.updateOne.filter.id === 'string')
        named.add(op.updateOne.filter.id);
    if (named.size < 2) return new Set();
    const ids = [...named];
    for (const found of this.select(null, scope, { id: { $in: ids } })) named.delete(found.doc.id);
    return named;
  }

  private applyOp(scope: Scope, op: WriteOp, result: BulkWriteResult, absent: Set<string>): void {
    if ('deleteOne' in op) {
      const [target] = this.select(null, scope, op.deleteOne.filter, { limit: 1 });
      if (target) {
        this.deleteRow(target.rid, target.doc);
        result.deleted++;
      }
      return;
    }
    const { filter, update, upsert, applied } = op.updateOne;
    // An id no document had when the batch began, unless an earlier operation of it made one.
    const known = typeof filter.id === 'string' && absent.delete(filter.id);
    const [current] = known ? [] : this.select(null, scope, filter, { limit: 1 });
    if (current) {
      const before = this.keys(current.doc);
      const was = this.kept().holding(current.doc);
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
      const before = this.keys(current.doc);
      const was = this.kept().holding(current.doc);
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
    const targets = this.select('updateMany', scope, filter);
    await this.settle('updateMany', () => {
      for (const { rid, doc } of targets) {
        const before = this.keys(doc);
        const was = this.kept().holding(doc);
        this.replaceRow(rid, before, was, updated(scope, doc, update));
      }
    });
    return targets.length;
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

/**
 * Runs `stmt` over its rows until `take` returns false. libsql 0.5 has no
 * reset, and a statement stopped on a row holds a read open (no checkpoint can
 * fold the log back past it) until its next run; its `get` takes one more row
 * and then resets it, so a stop early ends with one.
 */
function takeUntil(stmt: Statement, params: SqlValue[], take: (row: Row) => boolean): void {
  const rows = stmt.iterate(params) as IterableIterator<Row>;
  for (let next = rows.next(); !next.done; next = rows.next()) {
    if (!take(next.value)) {
      stmt.get();
      return;
    }
  }
}

/** `getPath` with the path split once. */
function valueAt(doc: Record<string, unknown>, path: string[]): unknown {
  let value: unknown = doc;
  for (const part of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** Whether a filter reads back from JSON as itself (no undefined, Date or RegExp in it), so its count can be stored. */
function storable(value: unknown): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(storable);
  if (typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false;
  return Object.values(value).every(storable);
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
