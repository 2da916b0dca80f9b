import type { Filter, Update } from './collection.ts';

/**
 * The port's query subset evaluated on a document, with MongoDB's semantics:
 * the embedded store tests with it what its SQL does not say exactly (see
 * `sql-filter.ts`), and applies updates with it.
 */

export function getPath(doc: unknown, path: string): unknown {
  let value: unknown = doc;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

function setPath(doc: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let target = doc;
  for (const part of parts.slice(0, -1)) {
    if (target[part] === null || typeof target[part] !== 'object') target[part] = {};
    target = target[part] as Record<string, unknown>;
  }
  target[parts[parts.length - 1]!] = value;
}

function unsetPath(doc: Record<string, unknown>, path: string): void {
  const parts = path.split('.');
  const parent = parts.length === 1 ? doc : getPath(doc, parts.slice(0, -1).join('.'));
  if (parent && typeof parent === 'object') delete (parent as Record<string, unknown>)[parts[parts.length - 1]!];
}

function typeRank(v: unknown): number {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return 1;
  if (typeof v === 'string') return 2;
  if (typeof v === 'object' && !Array.isArray(v)) return 3;
  if (Array.isArray(v)) return 4;
  if (typeof v === 'boolean') return 5;
  return 6;
}

function compareValues(a: unknown, b: unknown): number {
  const ra = typeRank(a);
  const rb = typeRank(b);
  if (ra !== rb) return ra - rb;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  return JSON.stringify(a) < JSON.stringify(b) ? -1 : JSON.stringify(a) > JSON.stringify(b) ? 1 : 0;
}

/** Orders documents as a MongoDB sort does (by each key in turn), for results gathered outside one query. */
export function compareBySort(sort: Record<string, 1 | -1>) {
  const keys = Object.entries(sort);
  return (a: unknown, b: unknown): number => {
    for (const [key, dir] of keys) {
      const c = compareValues(getPath(a, key), getPath(b, key));
      if (c !== 0) return c * dir;
    }
    return 0;
  };
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if ((a === null || a === undefined) && (b === null || b === undefined)) return true;
  if (typeof a === 'object' && typeof b === 'object' && a !== null && b !== null)
    return JSON.stringify(a) === JSON.stringify(b);
  return false;
}

/** A field's candidates: the value itself and, for arrays, each element (MongoDB's implicit array match). */
function candidates(value: unknown): unknown[] {
  return Array.isArray(value) ? [value, ...value] : [value];
}

function matchOperator(value: unknown, op: string, arg: unknown, options: string | undefined): boolean {
  switch (op) {
    case '$eq':
      return candidates(value).some((v) => equal(v, arg));
    case '$ne':
      return !candidates(value).some((v) => equal(v, arg));
    case '$in':
      return (arg as unknown[]).some((a) => candidates(value).some((v) => equal(v, a)));
    case '$nin':
      return !(arg as unknown[]).some((a) => candidates(value).some((v) => equal(v, a)));
    case '$gt':
      return candidates(value).some(
        (v) => v !== undefined && v !== null && typeRank(v) === typeRank(arg) && compareValues(v, arg) > 0,
      );
    case '$gte':
      return candidates(value).some(
        (v) => v !== undefined && v !== null && typeRank(v) === typeRank(arg) && compareValues(v, arg) >= 0,
      );
    case '$lt':
      return candidates(value).some(
        (v) => v !== undefined && v !== null && typeRank(v) === typeRank(arg) && compareValues(v, arg) < 0,
      );
    case '$lte':
      return candidates(value).some(
        (v) => v !== undefined && v !== null && typeRank(v) === typeRank(arg) && compareValues(v, arg) <= 0,
      );
    case '$exists':
      return (value !== undefined) === Boolean(arg);
    case '$all':
      return Array.isArray(value) && (arg as unknown[]).every((a) => value.some((v) => equal(v, a)));
    case '$regex': {
      const re = new RegExp(String(arg), options ?? '');
      return candidates(value).some((v) => typeof v === 'string' && re.test(v));
    }
    case '$options':
      return true;
    default:
      throw new Error(`unsupported query operator ${op}`);
  }
}

function isOperatorObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).some((k) => k.startsWith('$'));
}

export function matches(doc: Record<string, unknown>, filter: Filter): boolean {
  for (const [key, cond] of Object.entries(filter)) {
    if (key === '$or') {
      if (!(cond as Filter[]).some((f) => matches(doc, f))) return false;
      continue;
    }
    if (key === '$and') {
      if (!(cond as Filter[]).every((f) => matches(doc, f))) return false;
      continue;
    }
    const value = getPath(doc, key);
    if (isOperatorObject(cond)) {
      const options = typeof cond.$options === 'string' ? cond.$options : undefined;
      for (const [op, arg] of Object.entries(cond)) if (!matchOperator(value, op, arg, options)) return false;
    } else if (!matchOperator(value, '$eq', cond, undefined)) {
      return false;
    }
  }
  return true;
}

/** A value the update sets, as the document keeps it: an object or array copied (the caller keeps its own), anything else as it is. */
function copied<V>(value: V): V {
  return typeof value === 'object' && value !== null ? structuredClone(value) : value;
}

export function applyUpdate(doc: Record<string, unknown>, update: Update, inserting: boolean): void {
  for (const [path, v] of Object.entries(update.$set ?? {})) setPath(doc, path, copied(v));
  if (inserting) for (const [path, v] of Object.entries(update.$setOnInsert ?? {})) setPath(doc, path, copied(v));
  for (const path of Object.keys(update.$unset ?? {})) unsetPath(doc, path);
  for (const [path, by] of Object.entries(update.$inc ?? {}))
    setPath(doc, path, (Number(getPath(doc, path)) || 0) + Number(by));
  for (const [path, v] of Object.entries(update.$push ?? {})) {
    const list = Array.isArray(getPath(doc, path)) ? (getPath(doc, path) as unknown[]) : [];
    setPath(doc, path, [...list, structuredClone(v)]);
  }
  for (const [path, v] of Object.entries(update.$addToSet ?? {})) {
    const list = Array.isArray(getPath(doc, path)) ? (getPath(doc, path) as unknown[]) : [];
    setPath(doc, path, list.some((x) => equal(x, v)) ? list : [...list, structuredClone(v)]);
  }
  for (const [path, v] of Object.entries(update.$pull ?? {})) {
    const list = getPath(doc, path);
    if (Array.isArray(list))
      setPath(
        doc,
        path,
        list.filter(
          (x) =>
            !(isOperatorObject(v)
              ? matchOperator(x, '$in', (v as { $in?: unknown[] }).$in ?? [], undefined)
              : equal(x, v)),
        ),
      );
  }
}

/** Equality fields of a filter, which an upsert copies into the new document (as MongoDB does). */
export function equalityFields(filter: Filter): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [key, cond] of Object.entries(filter))
    if (!key.startsWith('$') && !isOperatorObject(cond)) fields[key] = cond;
  return fields;
}
