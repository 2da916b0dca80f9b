import { Type, type TObject, type TProperties, type TSchema, type ObjectOptions } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { maxJsonDepth } from '../config.ts';
import { AppError, pointer, violationText, type ErrorDetail } from '../errors.ts';
import { phoneNumberFormat, phoneNumberMaxLength, phoneNumberRule, toE164 } from '../phone-number.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

/** An object schema that refuses unknown fields (decisions: unknown fields are a 400). */
export function strictObject<T extends TProperties>(properties: T, options: ObjectOptions = {}): TObject<T> {
  return Type.Object(properties, { additionalProperties: false, ...options });
}

/** A phone number field: any formatting a person types, checked against the numbering plan, handed to the handler as E.164. */
export const phoneNumberField = (description = phoneNumberRule) =>
  Type.String({ format: phoneNumberFormat, minLength: 2, maxLength: phoneNumberMaxLength, description });

// verbose: an error carries the value and its schema, so its detail can say what was expected.
const bodyAjv = addFormats(
  new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: false, verbose: true }),
);
const queryAjv = addFormats(
  new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: true, verbose: true }),
);
const formatMessages = new Map<string, (value: string) => string>();
const formatExamples = new Map<string, string>();

/**
 * A string format checked by code (a phone number, a message recipient),
 * known to every validator, with the message a bad value gets and a valid
 * value the API description's code samples use.
 */
export function defineFormat(
  name: string,
  check: (value: string) => boolean,
  message: (value: string) => string,
  example: string,
): void {
  for (const ajv of [bodyAjv, queryAjv]) ajv.addFormat(name, { type: 'string', validate: check });
  formatMessages.set(name, message);
  formatExamples.set(name, example);
}

/** A valid value of a format defined with `defineFormat`. */
export const formatExample = (name: string): string | undefined => formatExamples.get(name);

defineFormat(
  phoneNumberFormat,
  (value) => toE164(value) !== undefined,
  () => `is not a valid phone number: use ${phoneNumberRule}`,
  '+14155550100',
);

/** `textRuleHolds`: the caller knows no string in the value can break the text rule (`jsonMayBreakTextRule`), so it is not walked. */
export type Validator = (value: unknown, opts?: { textRuleHolds?: boolean }) => unknown;

/**
 * Compiles once at start; the returned function throws a 400 naming every bad
 * field (the text rule included), and hands on phone numbers as E.164.
 */
export function compileValidator(schema: TSchema, where: 'body' | 'query' | 'params'): Validator {
  const validate: ValidateFunction = (where === 'body' ? bodyAjv : queryAjv).compile(schema);
  const phones = mayHoldPhoneNumbers(schema);
  return (value, opts) => {
    const badText = opts?.textRuleHolds ? [] : textViolations(value);
    if (validate(value) && badText.length === 0) return phones ? normalizePhoneNumbers(schema, value) : value;
    throw validationFailure(where, [...badText, ...detailsOf(validate.errors ?? [])]);
  };
}

declare global {
  interface String {
    /** ES2024 (Node 20 has it): false when the string holds an unpaired surrogate. */
    isWellFormed(): boolean;
  }
}

/**
 * The text rule: no string of a request, and no field name, holds NUL
 * (U+0000) or an unpaired UTF-16 surrogate. The embedded store keeps such
 * text but a MongoDB wire server refuses it (FerretDB: "unsupported Unicode
 * escape sequence"), and a lone surrogate does not survive UTF-8; one rule
 * for every backend makes it a 400 naming the field, not a 500 on one.
 */
export const textRuleMessage = 'must not contain NUL (U+0000) or an unpaired surrogate (U+D800 to U+DFFF)';

/** Both checks run natively: about 40 ns a string on the send path's fields, a sixth of one `/[\0\uD800-\uDFFF]/u` test. */
export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed();
}

const jsonEscape = Buffer.from('\\u');

/**
 * Whether a JSON text can break the text rule once parsed. NUL and a lone
 * surrogate only come from a `\u` escape: JSON refuses a raw control
 * character, and decoding UTF-8 turns a surrogate's bytes into U+FFFD. A body
 * without one is not walked: 15 µs of CPU to search a 1 MB bulk body, where
 * walking its 10,000 messages takes 2 ms.
 */
export function jsonMayBreakTextRule(raw: Buffer | undefined): boolean {
  return raw !== undefined && raw.includes(jsonEscape);
}

/** Values still to look at in `holdsUnstorableText`: one array reused by every call (the walk is synchronous), so the pass allocates nothing once warm. */
const pending: unknown[] = [];

/**
 * Whether any string or field name in a value breaks the text rule, or the
 * value nests deeper than `maxJsonDepth`: the pass every request takes. It
 * walks with its own stack, not by recursion, so no value can overflow the
 * call stack (a JSON body is bounded before it is parsed; a value built by
 * code is not).
 */
function holdsUnstorableText(value: unknown): boolean {
  pending.length = 0;
  pending.push(value, 0);
  try {
    while (pending.length > 0) {
      const depth = pending.pop() as number;
      const v = pending.pop();
      if (typeof v === 'string') {
        if (!isStorableText(v)) return true;
      } else if (v !== null && typeof v === 'object') {
        if (depth >= maxJsonDepth) return true;
        if (Array.isArray(v)) for (let i = 0; i < v.length; i++) pending.push(v[i], depth + 1);
        else
          for (const key in v) {
            if (!isStorableText(key)) return true;
            pending.push((v as Record<string, unknown>)[key], depth + 1);
          }
      }
    }
    return false;
  } finally {
    pending.length = 0;
  }
}

const tooDeepMessage = `is nested deeper than ${maxJsonDepth} levels`;

const badFieldNameMessage = 'is a field name holding NUL (U+0000) or an unpaired surrogate (U+D800 to U+DFFF)';

/** A step of `textViolations`' walk: a value to look at, or a field name to check, with the path that leads to it. */
type Step = { v: unknown; path: Array<string | number>; fieldName?: true };

/** Every string and field name in a value that breaks the text rule, by JSON Pointer, in document order (and where it nests too deep to look further). */
export function textViolations(value: unknown): ErrorDetail[] {
  const found: ErrorDetail[] = [];
  if (!holdsUnstorableText(value)) return found;
  const stack: Step[] = [{ v: value, path: [] }];
  while (stack.length > 0) {
    const { v, path, fieldName } = stack.pop()!;
    if (fieldName) {
      if (!isStorableText(v as string)) found.push({ path: pointer(...path), message: badFieldNameMessage });
    } else if (typeof v === 'string') {
      if (!isStorableText(v)) found.push({ path: pointer(...path), message: textRuleMessage });
    } else if (v !== null && typeof v === 'object') {
      if (path.length >= maxJsonDepth) {
        found.push({ path: pointer(...path), message: tooDeepMessage });
        continue;
      }
      const next: Step[] = [];
      if (Array.isArray(v)) for (let i = 0; i < v.length; i++) next.push({ v: v[i], path: [...path, i] });
      else
        for (const key of Object.keys(v)) {
          next.push({ v: key, path: [...path, key], fieldName: true });
          next.push({ v: (v as Record<string, unknown>)[key], path: [...path, key] });
        }
      for (let i = next.length - 1; i >= 0; i--) stack.push(next[i]!);
    }
  }
  return found;
}

/** A 400 lists at most this many violations (a large array body can have thousands). */
export const maxListedViolations = 100;

/**
 * Says what a schema-level rule (an `anyOf` over whole objects, such as "a
 * body or attachments") means, for the detail of a request that breaks it.
 */
export const violationKey = 'x-violation';
/** `path`: the field of the object the rule is about (a name, not a pointer). */
export type ViolationNote = { path: string; message: string };

/**
 * The ajv errors as details: one per violation, each with its path, without
 * repeats. The errors of each alternative of an `anyOf` are left out: the
 * `anyOf` error itself says what was expected.
 */
export function detailsOf(errors: ErrorObject[]): ErrorDetail[] {
  const seen = new Set<string>();
  const out: ErrorDetail[] = [];
  for (const e of errors) {
    if (out.length >= maxListedViolations) break;
    if (/\/anyOf\/\d+\//.test(e.schemaPath)) continue;
    const detail = toDetail(e);
    const key = `${detail.path}\u0000${detail.message}`;
    if (!seen.has(key)) (seen.add(key), out.push(detail));
  }
  return out;
}

/** One 400 for all the violations found in a request; its message names the first and counts the others. */
export function validationFailure(where: string, found: ErrorDetail[]): AppError {
  const details = found.slice(0, maxListedViolations);
  const first = details[0];
  const more =
    found.length > 1
      ? ` (and ${found.length - 1} more${found.length > details.length ? `, the first ${details.length} in details` : ': see details'})`
      : '';
  const text = first ? (first.path ? violationText(first) : `${where}: ${first.message}`) : `invalid ${where}`;
  return new AppError('validation_error', `${text}${more}`, { details });
}

/** ajv's `instancePath` is already a JSON Pointer into the checked value: details keep it as it is. */
function toDetail(e: ErrorObject): ErrorDetail {
  const base = e.instancePath;
  const join = (field: string) => `${base}${pointer(field)}`;
  if (e.keyword === 'additionalProperties') {
    const field = (e.params as { additionalProperty: string }).additionalProperty;
    return { path: join(field), message: 'is not a known field' };
  }
  if (e.keyword === 'required') {
    return { path: join((e.params as { missingProperty: string }).missingProperty), message: 'is required' };
  }
  if (e.keyword === 'anyOf') return alternativesDetail(e, base);
  // A rule across fields (`not` two of them together) says in its note which field it is about and why.
  const note = (e.parentSchema as { [violationKey]?: ViolationNote } | undefined)?.[violationKey];
  if (e.keyword === 'not' && note) return { path: join(note.path), message: note.message };
  // A pattern means little to a client; the schema's description says the rule in words.
  const rule = (e.parentSchema as { description?: string } | undefined)?.description;
  if (e.keyword === 'pattern' && rule) return { path: base, message: `must be ${rule}` };
  const formatMessage =
    e.keyword === 'format' ? formatMessages.get((e.params as { format: string }).format) : undefined;
  if (formatMessage) return { path: base, message: formatMessage(String(e.data)) };
  return { path: base, message: e.message ?? 'is invalid' };
}

function alternativesDetail(e: ErrorObject, base: string): ErrorDetail {
  const path = base;
  const parent = (e.parentSchema ?? {}) as {
    anyOf?: Array<{ const?: unknown; type?: string }>;
    [violationKey]?: ViolationNote;
  };
  const note = parent[violationKey];
  if (note) return { path: `${base}${pointer(note.path)}`, message: note.message };
  const options = parent.anyOf ?? [];
  if (options.length > 0 && options.every((o) => o.const !== undefined))
    return { path, message: `must be one of: ${options.map((o) => String(o.const)).join(', ')}` };
  if (options.length > 0 && options.every((o) => typeof o.type === 'string'))
    return { path, message: `must be ${options.map((o) => o.type).join(' or ')}` };
  return { path, message: 'matches none of the allowed forms' };
}

/** Replaces every phone-number field of a valid value by its E.164 form, following the schema into objects and arrays. */
function normalizePhoneNumbers(schema: TSchema, value: unknown): unknown {
  const s = schema as { format?: string; type?: string; properties?: Record<string, TSchema>; items?: TSchema };
  if (s.format === phoneNumberFormat && typeof value === 'string') return toE164(value) ?? value;
  if (s.properties && value && typeof value === 'object' && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    for (const [key, sub] of Object.entries(s.properties)) {
      if (record[key] !== undefined && mayHoldPhoneNumbers(sub)) record[key] = normalizePhoneNumbers(sub, record[key]);
    }
  } else if (s.items && Array.isArray(value) && mayHoldPhoneNumbers(s.items)) {
    return value.map((v) => normalizePhoneNumbers(s.items!, v));
  }
  return value;
}

const phoneBearing = new WeakMap<object, boolean>();

/** Whether a schema has a phone-number field anywhere below it; remembered, since it is asked on every request. */
function mayHoldPhoneNumbers(schema: TSchema): boolean {
  let known = phoneBearing.get(schema);
  if (known === undefined) {
    known = JSON.stringify(schema).includes(`"format":"${phoneNumberFormat}"`);
    phoneBearing.set(schema, known);
  }
  return known;
}
