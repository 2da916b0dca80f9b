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
  private readonly defaults: Map<string, StoredDefault>;
  private readonly copies: Map<string, string>;
  /** Top-level fields the JSON may leave out. */
  private readonly omitted: Set<string>;

  constructor(spec: StoredFormSpec) {
    this.defaults = new Map(Object.entries(spec.defaults ?? {}));
    this.copies = new Map(Object.entries(spec.copies ?? {}));
    this.omitted = new Set([...this.defaults.keys(), ...this.copies.keys()]);
    for (const [field, source] of this.copies)
      if (this.omitted.has(source)) throw new Error(`${field} cannot copy ${source}, which is left out itself`);
  }

  encode(doc: Doc): Uint8Array {
    jsonWork.encodes++;
    if (this.omitted.size === 0) {
      const { id: _id, tenantId: _tenant, ...rest } = doc;
      return Buffer.from(JSON.stringify(rest));
    }
    const kept: Record<string, unknown> = {};
    for (const field in doc) {
      if (field === 'id' || field === 'tenantId') continue;
      const value = doc[field];
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

  /** The document of a row: its JSON, with `id` and `tenantId` (first, as documents are made) from the row's columns and what was left out put back. */
  decode<T>(stored: ArrayBuffer | Uint8Array | string, id: string, tenant: string): T {
    jsonWork.parses++;
    const json =
      typeof stored === 'string'
        ? stored
        : stored instanceof ArrayBuffer
          ? Buffer.from(stored).toString()
          : Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength).toString();
    const head = `{"id":${JSON.stringify(untext(id))},"tenantId":${JSON.stringify(untext(tenant))}`;
    const doc = JSON.parse(json.length <= 2 ? `${head}}` : `${head},${json.slice(1)}`) as Record<string, unknown>;
    for (const [field, value] of this.defaults) if (!(field in doc)) doc[field] = Array.isArray(value) ? [] : value;
    for (const [field, source] of this.copies)
      if (!(field in doc) && doc[source] !== undefined) doc[field] = doc[source];
    return doc as T;
  }

  /** Whether `path` may be missing from the stored JSON: SQL reads it with `field`, not `json_extract` alone. */
  omits(path: string): boolean {
    return this.omitted.has(path);
  }

  /** The SQL expression of top-level field `path` as the document holds it, read from a row's JSON (`json_extract`, a value left out put back). */
  field(path: string): string {
    const read = (p: string) => `json_extract(CAST(doc AS TEXT), '$.${p}')`;
    if (!this.omitted.has(path)) return read(path);
    const missing = `json_type(CAST(doc AS TEXT), '$.${path}') IS NULL`;
    const source = this.copies.get(path);
    const instead = source === undefined ? sqlLiteral(this.defaults.get(path)!) : read(source);
    return `(CASE WHEN ${missing} THEN ${instead} ELSE ${read(path)} END)`;
  }
}

/** A default as `json_extract` would give it: text, a number, 1 or 0 for a boolean, NULL; the empty list as its JSON. */
function sqlLiteral(value: StoredDefault): string {
  if (value === null) return 'NULL';
  if (typeof value === 'boolean') return value ? '1' : '0';
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) return "'[]'";
  return `'${String(value).replace(/'/g, "''")}'`;
}
