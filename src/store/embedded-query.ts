import { setImmediate as nextTurn } from 'node:timers/promises';
import {
  idList,
  scanPageSize,
  scopedFilter,
  totalOrder,
  type Doc,
  type Filter,
  type FindOptions,
  type GroupCount,
  type ScanOptions,
  type Scope,
  type TenantFigure,
  type TenantMeasure,
} from './collection.ts';
import { countKey } from './count-cache.ts';
import type { EmbeddedCache } from './embedded-cache.ts';
import { fromColumn, type Connection, type EmbeddedSchema, type Row, type Statement } from './embedded-schema.ts';
import { countedCommand, type StoreOperation } from './operation-count.ts';
import { getPath, matches } from './query.ts';
import { after, keyValue, orderBy, sortExpr, untext, where, type SqlValue } from './sql-filter.ts';

/**
 * The reads of one collection: a filter becomes SQL on its key columns
 * (`sql-filter.ts`), what SQL cannot say is checked on each document, and a
 * lookup by id of kept documents is answered from memory.
 */
export class EmbeddedQuery<T extends Doc> {
  private readonly name: string;
  private readonly table: string;

  constructor(
    private readonly store: Connection,
    private readonly schema: EmbeddedSchema<T>,
    private readonly cache: EmbeddedCache<T>,
  ) {
    this.name = schema.name;
    this.table = schema.table;
  }

  /** The matches in `sort` order (or the order SQL finds them in), `skip` and `limit` applied; each a fresh object. One counted statement unless kept. */
  select(
    operation: StoreOperation | null,
    scope: Scope,
    filter: Filter,
    opts: FindOptions = {},
  ): Array<{ rid: number; doc: T }> {
    this.store.assertOpen(this.name);
    const kept = this.cache.byId(scope, filter, opts);
    if (kept) return kept;
    const { sql, params, rest } = where(this.schema, scopedFilter(scope, filter));
    const exact = Object.keys(rest).length === 0;
    const skip = opts.skip ?? 0;
    const limit = opts.limit || undefined;
    let text = `SELECT ${this.schema.rowColumns} FROM ${this.table} WHERE ${sql}`;
    if (opts.sort && Object.keys(opts.sort).length > 0) text += ` ORDER BY ${orderBy(this.schema, opts.sort)}`;
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
        const doc = this.schema.decodeRow(row);
        if (!exact && !matches(doc, rest)) return true;
        if (skipped < skip) {
          skipped++;
          return true;
        }
        out.push({ rid: row.rid, doc });
        if (byIds) this.cache.remember(doc.id, row.rid, fromColumn(row.doc), row.tenant, this.schema.toldBy(row));
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

  async count(scope: Scope, filter: Filter): Promise<number> {
    this.store.assertOpen(this.name);
    const scoped = scopedFilter(scope, filter);
    const { sql, params, rest } = where(this.schema, scoped);
    if (Object.keys(rest).length > 0) return this.select('count', scope, filter).length;
    const counts = this.cache.kept();
    const key = countKey(sql, params);
    const kept = counts.get(scope.tenantId, key);
    if (kept !== undefined) return kept;
    const row = countedCommand(this.name, 'count', () =>
      this.store.first(`SELECT count(*) AS n FROM ${this.table} WHERE ${sql}`, params),
    ) as { n: number };
    if (row.n >= counts.min && storable(scoped)) {
      counts.keep(scope.tenantId, key, structuredClone(scoped), row.n);
      this.cache.countsChanged();
    }
    return row.n;
  }

  /**
   * Across organizations, grouped by the `tenant` column in SQL: GROUP BY,
   * ORDER BY the figure and LIMIT. A sum or an earliest time is read from
   * each match's JSON (`json_extract`), so the field needs no key column.
   * A filter SQL cannot say exactly (`rest`) is grouped here instead, over
   * the rows its SQL part selects.
   */
  topTenants(filter: Filter, measure: TenantMeasure, limit: number): TenantFigure[] {
    this.store.assertOpen(this.name);
    const { sql, params, rest } = where(this.schema, filter);
    const field = 'count' in measure ? undefined : 'sum' in measure ? measure.sum : measure.earliest;
    const desc = !('earliest' in measure);
    if (Object.keys(rest).length > 0 || (field !== undefined && this.schema.omits(field))) {
      return countedCommand(this.name, 'aggregate', () => {
        const figures = new Map<string, number | string>();
        for (const row of this.store
          .statement(`SELECT ${this.schema.rowColumns} FROM ${this.table} WHERE ${sql}`)
          .all(params) as Row[]) {
          const doc = this.schema.decodeRow(row);
          if (matches(doc, rest))
            addFigure(figures, doc.tenantId, measure, field === undefined ? undefined : getPath(doc, field));
        }
        return ranked(figures, desc, limit);
      });
    }
    const json = `json_extract(CAST(doc AS TEXT), ?)`;
    const value = field === undefined ? 'count(*)' : desc ? `sum(${json})` : `min(${json})`;
    const rows = countedCommand(this.name, 'aggregate', () =>
      this.store
        .statement(
          `SELECT tenant, ${value} AS value FROM ${this.table} WHERE ${sql} GROUP BY tenant HAVING value IS NOT NULL ORDER BY value ${desc ? 'DESC' : 'ASC'}, tenant LIMIT ?`,
        )
        .all([...(field === undefined ? [] : [jsonPath(field)]), ...params, limit]),
    ) as Array<{ tenant: string; value: number | string }>;
    return rows.filter((row) => row.value !== 0).map((row) => ({ tenantId: untext(row.tenant), value: row.value }));
  }

  /**
   * Grouped by the fields' key columns in SQL (GROUP BY): the index that
   * leads with the filter's equalities and holds the fields is read, no
   * document. A field without a key column, or a filter SQL cannot say
   * exactly, is grouped here instead, over the documents read.
   */
  countBy(scope: Scope, filter: Filter, fields: string[]): GroupCount[] {
    this.store.assertOpen(this.name);
    const { sql, params, rest } = where(this.schema, scopedFilter(scope, filter));
    if (Object.keys(rest).length > 0 || !fields.every((f) => this.schema.has(f) && !this.schema.multikey(f))) {
      const groups = new Map<string, GroupCount>();
      for (const { doc } of this.select('aggregate', scope, filter)) {
        const values = fields.map((f) => getPath(doc, f) ?? null);
        const key = JSON.stringify(values);
        const group = groups.get(key) ?? { values, count: 0 };
        group.count++;
        groups.set(key, group);
      }
      return [...groups.values()];
    }
    const columns = fields.map((f) => sortExpr(this.schema, f));
    const rows = countedCommand(this.name, 'aggregate', () =>
      this.store
        .statement(
          `SELECT ${columns.map((c, i) => `${c} AS g${i}`).join(', ')}, count(*) AS n FROM ${this.table} WHERE ${sql} GROUP BY ${columns.join(', ')}`,
        )
        .all(params),
    ) as Array<Record<string, SqlValue | ArrayBuffer>>;
    return rows.map((row) => ({ values: fields.map((_, i) => keyValue(row[`g${i}`]) ?? null), count: Number(row.n) }));
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
    const { sql, params, rest } = where(this.schema, scopedFilter(scope, filter));
    const exact = Object.keys(rest).length === 0;
    const keys = Object.keys(sort)
      .map((path, i) => `${sortExpr(this.schema, path)} AS s${i}`)
      .join(', ');
    const order = orderBy(this.schema, sort);
    let last: SqlValue[] | null = null;
    let page: T[] = [];
    for (;;) {
      this.store.assertOpen(this.name);
      const next: { sql: string; params: SqlValue[] } | null = last ? after(this.schema, sort, last) : null;
      const { rows, full } = countedCommand(this.name, 'scan_page', () => {
        const stmt = this.store.statement(
          `SELECT ${this.schema.rowColumns}, ${keys} FROM ${this.table} WHERE ${sql}${next ? ` AND ${next.sql}` : ''} ORDER BY ${order} LIMIT ?`,
        );
        let rows = 0;
        // A page at most (LIMIT), read whole, so the statement runs to its end and holds no read between pages.
        for (const row of stmt.all([...params, ...(next?.params ?? []), pageSize]) as Array<
          Row & Record<string, SqlValue | ArrayBuffer>
        >) {
          rows++;
          last = Object.keys(sort).map((_, i): SqlValue => fromColumn(row[`s${i}`] ?? null));
          const doc = this.schema.decodeRow(row);
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

/** A dotted field path as SQLite's JSON path (`latency.sent` → `$."latency"."sent"`). */
function jsonPath(path: string): string {
  return (
    '$' +
    path
      .split('.')
      .map((part) => `."${part.replace(/"/g, '""')}"`)
      .join('')
  );
}

/** Adds one match to its organization's figure (the grouping SQL does, for a filter it cannot say). */
function addFigure(
  figures: Map<string, number | string>,
  tenantId: string,
  measure: TenantMeasure,
  value: unknown,
): void {
  const had = figures.get(tenantId);
  if ('count' in measure) figures.set(tenantId, ((had as number | undefined) ?? 0) + 1);
  else if ('sum' in measure)
    figures.set(tenantId, ((had as number | undefined) ?? 0) + (typeof value === 'number' ? value : 0));
  else if (typeof value === 'string' && (had === undefined || value < (had as string))) figures.set(tenantId, value);
}

function ranked(figures: Map<string, number | string>, desc: boolean, limit: number): TenantFigure[] {
  return [...figures]
    .filter(([, value]) => value !== 0)
    .sort(([a, x], [b, y]) => (x === y ? (a < b ? -1 : 1) : x < y === desc ? 1 : -1))
    .slice(0, limit)
    .map(([tenantId, value]) => ({ tenantId, value }));
}

/** Whether a filter reads back from JSON as itself (no undefined, Date or RegExp in it), so its count can be stored. */
function storable(value: unknown): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(storable);
  if (typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false;
  return Object.values(value).every(storable);
}
