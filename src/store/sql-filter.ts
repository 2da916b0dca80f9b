import { idList, type Filter, type Sort } from './collection.ts';

/**
 * The port's query subset in SQL, for one collection table (see
 * `EmbeddedStore`): `id` and `tenant` are columns, and so is every field a
 * declared index names (a key column, `"f:<path>"`), holding the field's value
 * as `keyOf` encodes it. A condition on a key column becomes SQL an index can
 * answer, and so does an `$or` of such conditions; whatever SQL cannot say
 * exactly (an operator on a field that is no key column, an `$or` with such a
 * branch, `$and`, `$regex`, any condition on a field that has held an array)
 * stays in `rest`, which the caller tests on each candidate with
 * `matches`. The SQL part alone is always a superset of the matches.
 */

export type SqlValue = string | number | Uint8Array | null;

/**
 * Key column encoding: SQL's own types for numbers and strings, NULL for a
 * missing field and -Infinity (which JSON cannot hold) for null, so `$exists`
 * is a column test too, and one-byte blobs for what SQL has no type for, so an
 * equality on a string or a number never meets a boolean, an object or an
 * array. In SQL's order NULL and -Infinity come first, blobs after text, as
 * missing and null come first and booleans, objects and arrays after strings
 * in MongoDB (among themselves the order differs; no query sorts on them).
 */
const falseKey = Uint8Array.of(0x00);
const trueKey = Uint8Array.of(0x01);
const objectKey = Uint8Array.of(0xfe);
export const arrayKey = Uint8Array.of(0xff);
const arrayLiteral = "X'FF'";
const nullKey = -Infinity;
const nullLiteral = '-9e999';

export function keyOf(value: unknown): SqlValue {
  if (value === undefined) return null;
  if (value === null) return nullKey;
  if (typeof value === 'string') return text(value);
  if (typeof value === 'number') return Number.isFinite(value) ? value : nullKey; // JSON keeps NaN and Infinity as null
  if (typeof value === 'boolean') return value ? trueKey : falseKey;
  return Array.isArray(value) ? arrayKey : objectKey;
}

/** A key column's value as the document held it (`keyOf` undone); undefined for a missing field (NULL) and for an object or an array, which the column does not hold. */
export function keyValue(value: unknown): unknown {
  if (value === null || value === undefined) return undefined;
  if (value === -Infinity) return null;
  if (typeof value === 'string') return untext(value);
  if (typeof value === 'number') return value;
  const bytes = value instanceof ArrayBuffer ? new Uint8Array(value) : (value as Uint8Array);
  return bytes.length === 1 && bytes[0]! <= 1 ? bytes[0] === 1 : undefined;
}

/**
 * A string as it is bound: libsql, as the WebAssembly build before it, ends a
 * bound string at its first NUL, so NUL and \u0001 are escaped (\u0001\u0001
 * and \u0001\u0002), which keeps distinct strings distinct and in the same
 * order. Other strings are bound as they are. Files written since the first
 * version hold them escaped so: the escape is part of the file format.
 */
/** A string as `text` bound it, back as it was. */
export function untext(value: string): string {
  return value.includes('\u0001')
    ? value.replace(/\u0001([\u0001\u0002])/g, (_, c: string) => (c === '\u0001' ? '\u0000' : '\u0001'))
    : value;
}

export function text(value: string): string {
  return /[\u0000\u0001]/.test(value)
    ? value.replace(/[\u0000\u0001]/g, (c) => (c === '\u0000' ? '\u0001\u0001' : '\u0001\u0002'))
    : value;
}

/** A value an equality can look up in a key column. */
function scalar(value: unknown): value is string | number | boolean {
  return (
    typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))
  );
}

export function keyColumn(path: string): string {
  return quote(`f:${path}`);
}

export function quote(identifier: string): string {
  return `"${identifier.replace(/"/g, '""')}"`;
}

export interface Columns {
  /** Field paths that have a key column. */
  has(path: string): boolean;
  /** Fields that have held an array in some document: an equality on them also matches an element, which SQL does not see. */
  multikey(path: string): boolean;
  /** The SQL of a field read from the row's document (a field that has no key column). */
  docField(path: string): string;
}

export interface Where {
  sql: string;
  params: SqlValue[];
  /** What SQL did not check; empty when the SQL is exact. */
  rest: Filter;
}

export function where(columns: Columns, filter: Filter): Where {
  const terms: string[] = [];
  const params: SqlValue[] = [];
  const rest: Filter = {};
  for (const [key, cond] of Object.entries(filter)) {
    if (key === 'tenantId' && typeof cond === 'string') {
      terms.push('tenant = ?');
      params.push(text(cond));
    } else if (key === 'id' && typeof cond === 'string') {
      terms.push('id = ?');
      params.push(text(cond));
    } else if (key === 'id' && idList(cond)) {
      terms.push('id IN (SELECT value FROM json_each(?))');
      params.push(JSON.stringify(idList(cond)!.map(text)));
    } else if ((!key.startsWith('$') && columns.has(key)) || key === 'id') {
      // The id column holds ids as a key column holds strings: a range on it (a keyset's tiebreaker) is SQL too.
      const term = key === 'id' ? condition('id', false, cond) : condition(keyColumn(key), columns.multikey(key), cond);
      if (term.sql) {
        terms.push(term.sql);
        params.push(...term.params);
      }
      if (!term.exact) rest[key] = cond;
    } else if (key === '$or' && Array.isArray(cond) && cond.length > 0) {
      // SQL when it says every branch exactly (a keyset's "after these sort keys"); otherwise `matches` tests the whole $or.
      const branches = (cond as Filter[]).map((branch) => where(columns, branch));
      if (branches.every((b) => Object.keys(b.rest).length === 0)) {
        terms.push(`(${branches.map((b) => `(${b.sql})`).join(' OR ')})`);
        params.push(...branches.flatMap((b) => b.params));
      } else {
        rest[key] = cond;
      }
    } else {
      rest[key] = cond;
    }
  }
  // With an id to look up, the unique id index is the way in: `+tenant` keeps SQL from walking the tenant's index instead.
  const tenant = terms.indexOf('tenant = ?');
  if (tenant >= 0 && terms.some((t) => t.startsWith('id '))) terms[tenant] = '+tenant = ?';
  return { sql: terms.length > 0 ? terms.join(' AND ') : '1', params, rest };
}

interface Term {
  sql: string;
  params: SqlValue[];
  exact: boolean;
}

const none: Term = { sql: '', params: [], exact: false };

function isOperators(cond: unknown): cond is Record<string, unknown> {
  return (
    cond !== null &&
    typeof cond === 'object' &&
    !Array.isArray(cond) &&
    Object.keys(cond).some((k) => k.startsWith('$'))
  );
}

/** One field's condition on its key column `col`. */
function condition(col: string, multikey: boolean, cond: unknown): Term {
  if (!isOperators(cond)) return equality(col, multikey, cond);
  const parts = Object.entries(cond).map(([op, arg]) => operator(col, multikey, op, arg));
  const used = parts.filter((p) => p.sql);
  return {
    sql: used.map((p) => p.sql).join(' AND '),
    params: used.flatMap((p) => p.params),
    exact: parts.every((p) => p.exact),
  };
}

/** With `multikey`, a document whose field is an array is a candidate too, for `matches` to decide. */
function orArray(col: string, sql: string, multikey: boolean): string {
  return multikey ? `(${sql} OR ${col} = ${arrayLiteral})` : sql;
}

/** Null or missing, as an equality on null matches both. */
function isNull(col: string): string {
  return `(${col} IS NULL OR ${col} = ${nullLiteral})`;
}

function equality(col: string, multikey: boolean, value: unknown): Term {
  if (value === null) return { sql: orArray(col, isNull(col), multikey), params: [], exact: !multikey };
  if (!scalar(value)) return none;
  return { sql: orArray(col, `${col} = ?`, multikey), params: [keyOf(value)], exact: !multikey };
}

function operator(col: string, multikey: boolean, op: string, arg: unknown): Term {
  switch (op) {
    case '$eq':
      return equality(col, multikey, arg);
    case '$ne':
      if (multikey) return none;
      if (arg === null) return { sql: `NOT ${isNull(col)}`, params: [], exact: true };
      if (!scalar(arg)) return none;
      return { sql: `${col} IS NOT ?`, params: [keyOf(arg)], exact: true };
    case '$exists':
      // An array is there too: exact whether or not the field is multikey.
      return { sql: arg ? `${col} IS NOT NULL` : `${col} IS NULL`, params: [], exact: true };
    case '$in': {
      if (!Array.isArray(arg) || !arg.every((v) => v === null || scalar(v))) return none;
      const values = arg.filter(scalar);
      const tests = [
        values.length > 0 ? `${col} IN (${values.map(() => '?').join(', ')})` : '',
        arg.includes(null) ? isNull(col) : '',
        multikey ? `${col} = ${arrayLiteral}` : '',
      ].filter(Boolean);
      return { sql: tests.length > 0 ? `(${tests.join(' OR ')})` : '0', params: values.map(keyOf), exact: !multikey };
    }
    case '$nin': {
      if (multikey || !Array.isArray(arg) || !arg.every((v) => v === null || scalar(v))) return none;
      const values = arg.filter(scalar);
      const notIn = values.length > 0 ? `${col} NOT IN (${values.map(() => '?').join(', ')})` : '1';
      return {
        sql: arg.includes(null) ? `(NOT ${isNull(col)} AND ${notIn})` : `(${col} IS NULL OR ${notIn})`,
        params: values.map(keyOf),
        exact: true,
      };
    }
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte': {
      const sign = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }[op];
      // MongoDB compares within a type only; SQL orders null < numbers < text < blobs, so a bound on the other side keeps the type.
      let sql: string;
      if (typeof arg === 'string')
        sql = op.startsWith('$g') ? `${col} ${sign} ? AND ${col} < X''` : `${col} ${sign} ? AND ${col} >= ''`;
      else if (typeof arg === 'number' && Number.isFinite(arg))
        sql = op.startsWith('$g') ? `${col} ${sign} ? AND ${col} < ''` : `${col} ${sign} ? AND ${col} > ${nullLiteral}`;
      else return none;
      return { sql: orArray(col, `(${sql})`, multikey), params: [keyOf(arg)], exact: !multikey };
    }
    default:
      return none;
  }
}

/** The SQL expression a sort key orders by: its column, or the field read from the document when no index names it. */
export function sortExpr(columns: Columns, path: string): string {
  if (path === 'id') return 'id';
  if (path === 'tenantId') return 'tenant';
  if (columns.has(path)) return keyColumn(path);
  if (!/^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$/.test(path)) throw new Error(`cannot sort on ${path}`);
  return columns.docField(path);
}

export function orderBy(columns: Columns, sort: Sort): string {
  return Object.entries(sort)
    .map(([path, dir]) => `${sortExpr(columns, path)} ${dir === 1 ? 'ASC' : 'DESC'}`)
    .join(', ');
}

/**
 * The rows after the one whose sort keys were `last`, in `sort` order
 * (keyset). SQL sorts NULL first ascending and last descending, as MongoDB
 * sorts a missing field; `IS` compares NULL too. The first key also gets a
 * plain range when it can, so an index on it is walked from `last` on.
 */
export function after(columns: Columns, sort: Sort, last: SqlValue[]): { sql: string; params: SqlValue[] } {
  const keys = Object.entries(sort).map(([path, dir]) => ({ expr: sortExpr(columns, path), dir }));
  // Ascending from a row without NULL keys, a row value is exactly the rows after it (a NULL sorts first, so any row holding one
  // where the keys tie so far came before), and SQL walks an index over those keys as one range.
  if (keys.every((k) => k.dir === 1) && last.every((v) => v !== null)) {
    return { sql: `(${keys.map((k) => k.expr).join(', ')}) > (${keys.map(() => '?').join(', ')})`, params: last };
  }
  const params: SqlValue[] = [];
  const from = (i: number): string => {
    const key = keys[i];
    if (!key) return '0';
    const value = last[i] ?? null;
    const tail = (): string => {
      params.push(value);
      return `(${key.expr} IS ? AND ${from(i + 1)})`;
    };
    if (key.dir === 1) {
      if (value === null) return `(${key.expr} IS NOT NULL OR ${tail()})`;
      params.push(value);
      return `(${key.expr} > ? OR ${tail()})`;
    }
    if (value === null) return tail();
    params.push(value);
    return `(${key.expr} < ? OR ${key.expr} IS NULL OR ${tail()})`;
  };
  const first = keys[0]!;
  const lead = last[0] ?? null;
  const range = first.dir === 1 && lead !== null ? `${first.expr} >= ? AND ` : '';
  const rangeParams = range ? [lead] : [];
  const sql = from(0);
  return { sql: `${range}${sql}`, params: [...rangeParams, ...params] };
}
