import { Type, type TObject, type TProperties, type TSchema, type ObjectOptions } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { AppError, type ErrorDetail } from '../errors.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

/** An object schema that refuses unknown fields (decisions: unknown fields are a 400). */
export function strictObject<T extends TProperties>(properties: T, options: ObjectOptions = {}): TObject<T> {
  return Type.Object(properties, { additionalProperties: false, ...options });
}

const bodyAjv = addFormats(new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: false }));
const queryAjv = addFormats(new Ajv({ allErrors: true, strict: false, useDefaults: true, coerceTypes: true }));

export type Validator = (value: unknown) => unknown;

/** Compiles once at start; the returned function throws a 400 naming every bad field. */
export function compileValidator(schema: TSchema, where: 'body' | 'query' | 'params'): Validator {
  const validate: ValidateFunction = (where === 'body' ? bodyAjv : queryAjv).compile(schema);
  return (value) => {
    if (validate(value)) return value;
    const details = (validate.errors ?? []).map((e) => toDetail(e, where));
    const first = details[0];
    throw new AppError('validation_error', first ? `${first.path}: ${first.message}` : `invalid ${where}`, { details });
  };
}

function toDetail(e: ErrorObject, where: string): ErrorDetail {
  const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  const join = (field: string) => (base ? `${base}.${field}` : field);
  if (e.keyword === 'additionalProperties') {
    const field = (e.params as { additionalProperty: string }).additionalProperty;
    return { path: join(field), message: 'is not a known field' };
  }
  if (e.keyword === 'required') {
    return { path: join((e.params as { missingProperty: string }).missingProperty), message: 'is required' };
  }
  return { path: base || where, message: e.message ?? 'is invalid' };
}
