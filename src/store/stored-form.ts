import type { Doc, StoredDefault, StoredFormSpec } from './collection.ts';
import { untext } from './sql-filter.ts';
import { jsonWork } from './store-work.ts';

/**
 * A document's stored form: the UTF-8 bytes of its JSON (a blob), as every
 * earlier version of this store wrote it. Its `id` and `tenantId` are the
 * row's columns, so the JSON leaves them out (rows written before hold them
 * in both: the same values), and so does it what `StoredFormSpec` says the
 * row tells again. Rows written before a field was left out hold it, and
 * read as they are.
 */
export class StoredForm {
  static readonly whole = new StoredForm({});
  /** Whether the values the row's key columns hold stay out of the JSON (`StoredFormSpec.keyColumns`). */
  readonly keyColumns: boolean;
  private readonly defaults: Map<string, StoredDefault>;
  private readonly copies: Map<string, string>;
  /** Top-level fields the JSON may leave out. */
  private readonly omitted: Set<string>;

  constructor(spec: StoredFormSpec) {
    this.defaults = new Map(Object.entries(spec.defaults ?? {}));
    this.copies = new Map(Object.entries(spec.copies ?? {}));
    this.omitted = new Set([...this.defaults.keys(), ...this.copies.keys()]);
    this.keyColumns = spec.keyColumns ?? false;
    for (const [field, source] of this.copies)
      if (this.omitted.has(source)) throw new Error(`${field} cannot copy ${source}, which is left out itself`);
  }

  /** `told`: the top-level fields whose key column holds a scalar value (`keyColumns`), left out with such a value. */
  encode(doc: Doc, told: ReadonlySet<string> = noFields): Uint8Array {
    jsonWork.encodes++;
    if (this.omitted.size === 0 && told.size === 0) {
      const { id: _id, tenantId: _tenant, ...rest } = doc;
      return Buffer.from(JSON.stringify(rest));
    }
    const kept: Record<string, unknown> = {};
    for (const field in doc) {
      if (field === 'id' || field === 'tenantId') continue;
      const value = doc[field];
      if (told.has(field) && columnTells(value)) continue;
      if (!this.omitted.has(field) || !this.tells(doc, field, value)) kept[field] = value;
    }
    return Buffer.from(JSON.stringify(kept));
  }

  /** Whether the row tells `value` of `field` again: its default, or the value of the field it copies. */
  private tells(doc: Doc, field: string, value: unknown): boolean {
    if (this.defaults.has(field)) {
      const d = this.defaults.get(field);
      return Array.isArray(d) ? Array.isArray(value) && value.length === 0 : value === d;
    }
    const source = this.copies.get(field)!;
    return (typeof value === 'string' || typeof value === 'number') && value === doc[source];
  }

  /**
   * The document of a row: its JSON, with `id` and `tenantId` (first, as
   * documents are made) and `told` (the key columns' values as JSON members,
   * each after a comma: `EmbeddedSchema.toldBy`) from the row's columns, and what was left out put back. A field in both
   * (a row written before it was left out) is the same value.
   */
  decode<T>(stored: ArrayBuffer | Uint8Array | string, id: string, tenant: string, told = ''): T {
    jsonWork.parses++;
    const json =
      typeof stored === 'string'
        ? stored
        : stored instanceof ArrayBuffer
          ? Buffer.from(stored).toString()
          : Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength).toString();
    const head = `{"id":${JSON.stringify(untext(id))},"tenantId":${JSON.stringify(untext(tenant))}${told}`;
    const doc = JSON.parse(json.length <= 2 ? `${head}}` : `${head},${json.slice(1)}`) as Record<string, unknown>;
    for (const [field, value] of this.defaults) if (!(field in doc)) doc[field] = Array.isArray(value) ? [] : value;
    for (const [field, source] of this.copies)
      if (!(field in doc) && doc[source] !== undefined) doc[field] = doc[source];
    return doc as T;
  }

  /** Whether `path` may be missing from the stored JSON for its default or copy (a key column's field is the column's to say). */
  omits(path: string): boolean {
    return this.omitted.has(path);
  }

  /**
   * The SQL expression of top-level field `path` as the document holds it,
   * read from a row's JSON (`json_extract`, a value left out put back);
   * `read` gives a field's own expression (its key column where it has one).
   */
  field(path: string, read: (p: string) => string = jsonField): string {
    if (!this.omitted.has(path)) return read(path);
    const missing = `json_type(CAST(doc AS TEXT), '$.${path}') IS NULL`;
    const source = this.copies.get(path);
    const instead = source === undefined ? sqlLiteral(this.defaults.get(path)!) : read(source);
    return `(CASE WHEN ${missing} THEN ${instead} ELSE ${read(path)} END)`;
  }
}

const noFields: ReadonlySet<string> = new Set();

/** A top-level field read from a row's JSON. */
export const jsonField = (path: string) => `json_extract(CAST(doc AS TEXT), '$.${path}')`;

/**
 * Whether a key column holds `value` so that it reads back the same
 * (`keyOf`, `keyValue`): null, a boolean, a finite number, a string SQL
 * stores as it is (no lone surrogate). An object or an array stays in the JSON.
 */
function columnTells(value: unknown): boolean {
  return (
    value === null ||
    typeof value === 'boolean' ||
    (typeof value === 'number' && Number.isFinite(value)) ||
    (typeof value === 'string' && value.isWellFormed())
  );
}

/** A default as `json_extract` would give it: text, a number, 1 or 0 for a boolean, NULL; the empty list as its JSON. */
function sqlLiteral(value: StoredDefault): string {
  if (value === null) return 'NULL';
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return "'[]'";
  return `'${String(value).replace(/'/g, "''")}'`;
}
