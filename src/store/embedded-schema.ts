import type Database from 'libsql';
import { AppError } from '../errors.ts';
import type { Doc, IndexSpec } from './collection.ts';
import type { CountCacheOptions } from './count-cache.ts';
import { getPath } from './query.ts';
import { keyColumn, keyOf, keyValue, quote, type Columns, type SqlValue } from './sql-filter.ts';
import { jsonField, StoredForm } from './stored-form.ts';

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

/** How a collection's rows are read in SQL of its own: what to select, and the document of a row so selected. */
export type RowReader = Pick<EmbeddedSchema<Doc>, 'rowColumns' | 'toldColumns' | 'decodeRow'>;

/** A row as libsql's `all` and `iterate` give it: a BLOB comes as an ArrayBuffer (`get` gives a Buffer). */
export interface Row {
  rid: number;
  id: string;
  tenant: string;
  doc: ArrayBuffer | Uint8Array | string;
  /** A key column a read selected (`rowColumns`), by its name. */
  [column: string]: unknown;
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

/** `spec` with every key in the opposite order: the same index read backwards. */
function reversed(spec: IndexSpec): IndexSpec {
  const keys = Object.fromEntries(Object.entries(spec.keys).map(([path, dir]) => [path, dir === 1 ? -1 : 1]));
  return { ...spec, keys: keys as IndexSpec['keys'], newestFirst: false };
}

function indexColumn(path: string): string {
  return path === 'tenantId' ? 'tenant' : path === 'id' ? 'id' : keyColumn(path);
}

/** A column's value as it is bound again (a key) or kept: a BLOB as bytes. */
export function fromColumn<V>(value: V | ArrayBuffer): V | Buffer {
  return value instanceof ArrayBuffer ? Buffer.from(value) : value;
}

/**
 * The layout of one collection's table: `rid` (the row), `id`, `tenant`, the
 * document as JSON, and a key column per field a declared index names (see
 * `sql-filter.ts`), with the SQL that writes a row and the fields known to
 * have held an array.
 */
export class EmbeddedSchema<T extends Doc> implements Columns {
  readonly table: string;
  /** Field paths with a key column, in column order. */
  private fields: string[] = [];
  /** `fields`, split at the dots once. */
  private paths: string[][] = [];
  private readonly fieldSet = new Set<string>();
  private readonly arrays = new Set<string>();
  private readonly uniques: IndexSpec[] = [];
  /** The INSERT of a whole row, with every key column. */
  insertSql: string;
  private loaded = false;
  private storedForm = StoredForm.whole;
  /** The top-level key fields whose column tells their value (the form's `keyColumns`), with their place in `fields`. */
  private told: Array<{ field: string; column: string; at: number; member: string }> = [];
  private toldFields: ReadonlySet<string> = new Set();
  /** What a read selects of a row: `rid`, `id`, `tenant`, `doc` and the columns of the told fields (`toldColumns`). */
  rowColumns = 'rid, id, tenant, doc';
  /** The key columns a read selects beside the JSON, quoted. */
  toldColumns: string[] = [];

  constructor(
    private readonly store: Connection,
    readonly name: string,
  ) {
    this.table = quote(name);
    this.insertSql = this.insertStatement();
  }

  has(path: string): boolean {
    return this.fieldSet.has(path);
  }

  multikey(path: string): boolean {
    return this.arrays.has(path);
  }

  docField(path: string): string {
    return this.storedForm.field(path, (p) => (this.toldFields.has(p) ? keyColumn(p) : jsonField(p)));
  }

  /** What the rows' JSON leaves out (`StoredFormSpec`): given with the collection. */
  set form(form: StoredForm) {
    this.storedForm = form;
    this.tell();
  }

  /** Whether a document read back may lack `path` in its JSON: SQL cannot read it with `json_extract` alone. */
  omits(path: string): boolean {
    return this.storedForm.omits(path) || this.toldFields.has(path);
  }

  /** The stored form of `doc`. */
  encode(doc: T): Uint8Array {
    return this.storedForm.encode(doc, this.toldFields);
  }

  /** The document of a row read with `rowColumns`. */
  decodeRow<D = T>(row: Row): D {
    return this.storedForm.decode<D>(row.doc, row.id, row.tenant, this.told.length === 0 ? '' : this.toldBy(row));
  }

  /**
   * What a row tells of its document beside its JSON, as JSON members each
   * after a comma (`,"status":"queued"`), from its key columns' values
   * (`keys`, as bound) or from a row read with `rowColumns`.
   */
  toldBy(source: SqlValue[] | Row): string {
    let told = '';
    const keys = Array.isArray(source) ? source : undefined;
    for (const t of this.told) {
      const raw = keys ? keys[t.at] : (source as Row)[t.column];
      if (raw === null) continue;
      const value = keyValue(raw);
      if (value !== undefined) told += `,${t.member}${JSON.stringify(value)}`;
    }
    return told;
  }

  /** The document of kept bytes and what its row told beside them (`toldBy`). */
  decodeKept(stored: Uint8Array | string, id: string, tenant: string, told: string): T {
    return this.storedForm.decode<T>(stored, id, tenant, told);
  }

  /** The told fields (see `told`), again after a key column or the form changed. */
  private tell(): void {
    this.told = this.storedForm.keyColumns
      ? this.fields.flatMap((field, at) =>
          field.includes('.') ? [] : [{ field, column: `f:${field}`, at, member: `${JSON.stringify(field)}:` }],
        )
      : [];
    this.toldFields = new Set(this.told.map((t) => t.field));
    this.toldColumns = this.told.map((t) => quote(t.column));
    this.rowColumns = `rid, id, tenant, doc${this.toldColumns.map((c) => `, ${c}`).join('')}`;
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
    for (const declared of indexes) {
      const spec = declared.newestFirst ? reversed(declared) : declared;
      const columns = Object.entries(spec.keys).map(
        ([path, dir]) => `${indexColumn(path)}${dir === -1 ? ' DESC' : ''}`,
      );
      const sparse = spec.sparse ? Object.keys(spec.keys).find((path) => path !== 'tenantId') : undefined;
      const only = sparse ? ` WHERE ${indexColumn(sparse)} IS NOT NULL` : '';
      this.store.exec(
        `CREATE ${spec.unique ? 'UNIQUE ' : ''}INDEX IF NOT EXISTS ${quote(indexName(this.name, spec))} ON ${this.table} (${columns.join(', ')})${only}`,
      );
      // The index as earlier versions built it, in the declared order: replaced by the one above.
      if (declared.newestFirst) this.store.exec(`DROP INDEX IF EXISTS ${quote(indexName(this.name, declared))}`);
      if (spec.unique && !this.uniques.some((u) => indexName(this.name, u) === indexName(this.name, spec)))
        this.uniques.push(spec);
    }
  }

  private addField(path: string): void {
    this.fields.push(path);
    this.paths.push(path.split('.'));
    this.fieldSet.add(path);
    this.insertSql = this.insertStatement();
    this.tell();
  }

  private insertStatement(): string {
    return `INSERT INTO ${this.table} (id, tenant, doc${this.fields.map((f) => `, ${keyColumn(f)}`).join('')}) VALUES (?, ?, ?${', ?'.repeat(this.fields.length)})`;
  }

  /** The UPDATE of a row's document and of the key columns at `changed` (indexes into the key fields). */
  updateStatement(changed: number[]): string {
    return `UPDATE ${this.table} SET doc = ?${changed.map((i) => `, ${keyColumn(this.fields[i]!)} = ?`).join('')} WHERE rid = ?`;
  }

  private addColumns(paths: string[]): void {
    for (const path of paths) {
      this.store.exec(`ALTER TABLE ${this.table} ADD COLUMN ${keyColumn(path)}`);
      this.addField(path);
    }
    const select = this.store.statement(
      `SELECT ${this.rowColumns} FROM ${this.table} WHERE rid > ? ORDER BY rid LIMIT ${backfillRows}`,
    );
    const update = this.store.statement(
      `UPDATE ${this.table} SET ${paths.map((p) => `${keyColumn(p)} = ?`).join(', ')} WHERE rid = ?`,
    );
    for (let last = -Infinity; ;) {
      const rows = select.all([last]) as unknown as Row[];
      if (rows.length === 0) break;
      for (const row of rows) {
        const doc = this.decodeRow(row);
        const values = paths.map((p) => getPath(doc, p));
        update.run([...values.map(keyOf), row.rid]);
        this.noteArrays(values, paths);
      }
      last = rows[rows.length - 1]!.rid;
    }
  }

  /** The values of the key fields in `doc`. */
  values(doc: T): unknown[] {
    return this.paths.map((path) => valueAt(doc, path));
  }

  /** The key columns' values of `doc`, as bound. */
  keys(doc: T): SqlValue[] {
    return this.values(doc).map(keyOf);
  }

  /** Remembers (durably, with the write) that a field held an array, so equalities on it also consider array documents. */
  noteArrays(values: unknown[], fields: string[] = this.fields): void {
    values.forEach((value, i) => {
      const path = fields[i]!;
      if (!Array.isArray(value) || this.arrays.has(path)) return;
      this.store.run('INSERT OR IGNORE INTO relaybox_multikey (collection, field) VALUES (?, ?)', [this.name, path]);
      this.arrays.add(path);
    });
  }

  /** A unique-key refusal of SQLite as the store's conflict error, naming the fields of the index refused; any other error as it is. */
  conflict(err: unknown): unknown {
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
