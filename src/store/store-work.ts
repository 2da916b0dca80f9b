import { Counter, register } from 'prom-client';
import type Database from 'libsql';
import type { SqlValue } from './sql-filter.ts';
import { everyCollection } from './operation-count.ts';

/**
 * What the embedded store does per message, counted where its statements run
 * (docs/performance-budget.md holds the budget; a test enforces it): every
 * statement by verb and table, the rows each write changed, the index entries
 * those rows wrote, the document bytes bound into writes, and the documents
 * encoded and parsed. The hot path only adds to plain numbers; the Prometheus
 * counters are brought up to them when scraped.
 */

export type Verb = 'select' | 'insert' | 'update' | 'delete' | 'begin' | 'commit' | 'rollback' | 'pragma' | 'schema';

interface Tally {
  n: number;
  exported: number;
}

interface TableWork {
  rows: Tally;
  indexEntries: Tally;
  /** Document bytes of new rows (what a table grows by), and of rows rewritten in place. */
  docBytes: { insert: Tally; update: Tally };
  /** The table's indexes, each as its columns and, for a partial index on `<column> IS NOT NULL`, that column; null until read, and again after a schema change. */
  indexes: Array<{ columns: string[]; notNull: string | null }> | null;
  /** Bumped whenever `indexes` is read again, so a statement's count of the indexes it touches follows. */
  version: number;
}

/** How one prepared statement is counted, worked out once from its SQL. */
interface Counted {
  statements: Tally;
  table: TableWork | null;
  verb: Verb;
  /** The columns an UPDATE sets: only the indexes on them are written. */
  sets: string[] | null;
  /** Index entries one changed row writes, for `table.version`: all of them but those of `partialParams`. */
  perRow: number;
  /** For an INSERT, where the column of each partial index (`<column> IS NOT NULL`) is bound: the row has an entry there only when it is not NULL. */
  partialParams: number[];
  /** The columns an INSERT names, in order. */
  columns: string[] | null;
  version: number;
  /** Where the document is among the bound values, or -1. */
  docParam: number;
}

const statementTallies = new Map<string, Tally>();
const tables = new Map<string, TableWork>();
/** Documents encoded to JSON and parsed from it by the embedded store. */
export const jsonWork = { encodes: 0, parses: 0 };
const jsonExported = { encodes: 0, parses: 0 };

function tally(key: string): Tally {
  let found = statementTallies.get(key);
  if (!found) statementTallies.set(key, (found = { n: 0, exported: 0 }));
  return found;
}

function tableWork(name: string): TableWork {
  let found = tables.get(name);
  if (!found) {
    const zero = () => ({ n: 0, exported: 0 });
    tables.set(
      name,
      (found = {
        rows: zero(),
        indexEntries: zero(),
        docBytes: { insert: zero(), update: zero() },
        indexes: null,
        version: 0,
      }),
    );
  }
  return found;
}

function unquote(name: string): string {
  return name.startsWith('"') ? name.slice(1, -1).replace(/""/g, '"') : name;
}

/** A quoted or bare identifier at the start of `sql`. */
const identifier = String.raw`("(?:[^"]|"")+"|[\w]+)`;
const insertInto = new RegExp(String.raw`^INSERT(?:\s+OR\s+\w+)?\s+INTO\s+${identifier}\s*\(([^)]*)\)`, 'i');
const updateSet = new RegExp(String.raw`^UPDATE\s+${identifier}\s+SET\s+(.*?)\s+WHERE\s`, 'is');
const deleteFrom = new RegExp(String.raw`^DELETE\s+FROM\s+${identifier}`, 'i');
const selectFrom = new RegExp(String.raw`\sFROM\s+${identifier}`, 'i');

function splitColumns(list: string): string[] {
  return list.split(',').map((c) => unquote(c.trim().split(/\s*=/)[0]!.trim()));
}

/** The verb and table of a statement, the columns it writes and where its document is bound. */
function classify(sql: string): {
  verb: Verb;
  table: string | null;
  sets: string[] | null;
  docParam: number;
  columns?: string[];
} {
  const text = sql.trimStart();
  let m = insertInto.exec(text);
  if (m) {
    const columns = splitColumns(m[2]!);
    return { verb: 'insert', table: unquote(m[1]!), sets: null, docParam: columns.indexOf('doc'), columns };
  }
  if ((m = updateSet.exec(text))) {
    const sets = splitColumns(m[2]!);
    // Every value of this store's SET clauses is one bound parameter, in order.
    return { verb: 'update', table: unquote(m[1]!), sets, docParam: sets.indexOf('doc') };
  }
  if ((m = deleteFrom.exec(text))) return { verb: 'delete', table: unquote(m[1]!), sets: null, docParam: -1 };
  const first = /^\w+/.exec(text)?.[0]?.toLowerCase() ?? '';
  if (first === 'select' || first === 'with')
    return { verb: 'select', table: (m = selectFrom.exec(text)) ? unquote(m[1]!) : null, sets: null, docParam: -1 };
  if (first === 'begin' || first === 'commit' || first === 'rollback')
    return { verb: first, table: everyCollection, sets: null, docParam: -1 };
  if (first === 'pragma') return { verb: 'pragma', table: everyCollection, sets: null, docParam: -1 };
  return { verb: 'schema', table: everyCollection, sets: null, docParam: -1 };
}

/** The column of a partial index's `WHERE <column> IS NOT NULL` (a sparse index of this store), or null. */
const notNullWhere = new RegExp(String.raw`\sWHERE\s+${identifier}\s+IS\s+NOT\s+NULL\s*$`, 'i');

/**
 * Index entries one changed row writes: every index of the table, or for an
 * UPDATE those on a column it sets (this store sets a key column only when
 * its value changed, so a partial index on it gains, loses or moves an entry
 * either way). A row an INSERT writes has an entry in a sparse index
 * (`<column> IS NOT NULL`) only when that column is bound a value, and is
 * counted so; a DELETE, and any other partial index, is counted as written.
 */
function entriesPerRow(db: Database.Database, counted: Counted, params: unknown): number {
  const table = counted.table!;
  if (table.indexes === null) {
    table.indexes = (
      db
        .prepare(
          "SELECT il.name AS name, json_group_array(ii.name) AS columns, (SELECT sql FROM sqlite_master WHERE type = 'index' AND name = il.name) AS sql FROM pragma_index_list(?) il JOIN pragma_index_info(il.name) ii GROUP BY il.name",
        )
        .all([tableName(counted)]) as Array<{ name: string; columns: string; sql: string | null }>
    ).map((row) => {
      const where = row.sql ? notNullWhere.exec(row.sql) : null;
      return { columns: JSON.parse(row.columns) as string[], notNull: where ? unquote(where[1]!) : null };
    });
    table.version++;
  }
  if (counted.version !== table.version) {
    const { sets, columns } = counted;
    const partial = columns ? table.indexes.filter((index) => index.notNull !== null) : [];
    counted.partialParams = partial.map((index) => columns!.indexOf(index.notNull!));
    counted.perRow =
      (sets
        ? table.indexes.filter((index) => index.columns.some((c) => sets.includes(c))).length
        : table.indexes.length) - partial.length;
    counted.version = table.version;
  }
  let entries = counted.perRow;
  for (const at of counted.partialParams) if (at >= 0 && Array.isArray(params) && params[at] !== null) entries++;
  return entries;
}

const names = new WeakMap<Counted, string>();
const tableName = (counted: Counted) => names.get(counted)!;

function byteLength(value: SqlValue | undefined): number {
  if (value instanceof Uint8Array) return value.byteLength;
  return typeof value === 'string' ? Buffer.byteLength(value) : 0;
}

/** Counts the work of `run` after it ran: the rows SQLite says it changed, their index entries, the document bound. */
function wrote(db: Database.Database, counted: Counted, params: unknown, changes: number): void {
  const table = counted.table;
  if (!table || changes === 0) return;
  table.rows.n += changes;
  table.indexEntries.n += changes * entriesPerRow(db, counted, params);
  if (counted.docParam >= 0 && Array.isArray(params))
    table.docBytes[counted.verb === 'insert' ? 'insert' : 'update'].n += byteLength(params[counted.docParam]);
}

/**
 * A statement of `db`, prepared and counted: each run, get, all and iterate
 * is one statement executed; a run's changed rows are the rows written.
 */
export function countedStatement(db: Database.Database, sql: string): Database.Statement {
  const stmt = db.prepare(sql);
  const { verb, table, sets, docParam, columns } = classify(sql);
  const counted: Counted = {
    statements: tally(`${verb}\u0000${table ?? ''}`),
    table: table && table !== everyCollection && verb !== 'select' ? tableWork(table) : null,
    verb,
    sets,
    perRow: 0,
    partialParams: [],
    columns: verb === 'insert' ? (columns ?? null) : null,
    version: -1,
    docParam,
  };
  if (table) names.set(counted, table);
  const { run, get, all, iterate } = stmt;
  const statements = counted.statements;
  stmt.run = ((...args: unknown[]) => {
    statements.n++;
    const info = run.apply(stmt, args) as { changes: number };
    wrote(db, counted, args[0], info.changes);
    return info;
  }) as typeof run;
  stmt.get = ((...args: unknown[]) => (statements.n++, get.apply(stmt, args))) as typeof get;
  stmt.all = ((...args: unknown[]) => (statements.n++, all.apply(stmt, args))) as typeof all;
  stmt.iterate = ((...args: unknown[]) => (statements.n++, iterate.apply(stmt, args))) as typeof iterate;
  return stmt;
}

/** Runs SQL text without binding (transactions, pragmas, schema), counted; a schema change has the indexes read again. */
export function countedExec(db: Database.Database, sql: string): void {
  const { verb, table } = classify(sql);
  tally(`${verb}\u0000${table ?? ''}`).n++;
  db.exec(sql);
  if (verb === 'schema') for (const work of tables.values()) work.indexes = null;
}

/** Every counted figure so far in this process, for a bench or a test to difference. */
export interface StoreWorkTotals {
  /** `verb table` → statements executed. */
  statements: Record<string, number>;
  rows: Record<string, number>;
  indexEntries: Record<string, number>;
  /** `insert table` or `update table` → document bytes. */
  docBytes: Record<string, number>;
  jsonEncodes: number;
  jsonParses: number;
}

export function storeWorkTotals(): StoreWorkTotals {
  const out: StoreWorkTotals = {
    statements: {},
    rows: {},
    indexEntries: {},
    docBytes: {},
    jsonEncodes: jsonWork.encodes,
    jsonParses: jsonWork.parses,
  };
  for (const [key, t] of statementTallies) if (t.n > 0) out.statements[key.replace('\u0000', ' ')] = t.n;
  for (const [name, t] of tables) {
    if (t.rows.n === 0) continue;
    out.rows[name] = t.rows.n;
    out.indexEntries[name] = t.indexEntries.n;
    for (const verb of ['insert', 'update'] as const)
      if (t.docBytes[verb].n > 0) out.docBytes[`${verb} ${name}`] = t.docBytes[verb].n;
  }
  return out;
}

function singleton(name: string, help: string, labelNames: string[], collect: (this: Counter) => void): Counter {
  return (register.getSingleMetric(name) as Counter | undefined) ?? new Counter({ name, help, labelNames, collect });
}

/** Brings a labelled counter up to its tally (counters only grow). */
function bringUp(metric: Counter, labels: Record<string, string>, t: Tally): void {
  if (t.n === t.exported) return;
  metric.inc(labels, t.n - t.exported);
  t.exported = t.n;
}

singleton(
  'relaybox_store_statements_total',
  'SQL statements the embedded store executed, by verb and table (* for transactions, pragmas and schema)',
  ['verb', 'table'],
  function () {
    for (const [key, t] of statementTallies) {
      const [verb, table] = key.split('\u0000') as [string, string];
      bringUp(this, { verb, table }, t);
    }
  },
);
singleton(
  'relaybox_store_rows_written_total',
  'Rows the embedded store inserted, updated or deleted, by table',
  ['table'],
  function () {
    for (const [table, t] of tables) bringUp(this, { table }, t.rows);
  },
);
singleton(
  'relaybox_store_index_entries_written_total',
  "Index entries the embedded store's writes touched (rows times the indexes on the columns written), by table",
  ['table'],
  function () {
    for (const [table, t] of tables) bringUp(this, { table }, t.indexEntries);
  },
);
singleton(
  'relaybox_store_document_bytes_written_total',
  'Bytes of document JSON the embedded store wrote, by table and verb (insert: new rows, update: rows rewritten)',
  ['table', 'verb'],
  function () {
    for (const [table, t] of tables)
      for (const verb of ['insert', 'update'] as const) bringUp(this, { table, verb }, t.docBytes[verb]);
  },
);
singleton(
  'relaybox_store_json_documents_total',
  'Documents the embedded store encoded to JSON or parsed from it',
  ['op'],
  function () {
    for (const op of ['encodes', 'parses'] as const) {
      if (jsonWork[op] === jsonExported[op]) continue;
      this.inc({ op: op === 'encodes' ? 'encode' : 'parse' }, jsonWork[op] - jsonExported[op]);
      jsonExported[op] = jsonWork[op];
    }
  },
);
