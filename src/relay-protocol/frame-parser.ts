/**
 * Reading a frame of the relay protocol (frames.ts): JSON within the size
 * bound, checked against its schema, with an error that names what is wrong
 * in the frame's own member of a union. Both ends read every frame here.
 */
import type { Static, TSchema } from '@sinclair/typebox';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { agentFrame, frameLimits as L, serverFrame } from './frames.ts';

const addFormats = addFormatsImport as unknown as (ajv: Ajv) => Ajv;

export type ParseResult<T> = { ok: true; frame: T } | { ok: false; error: string };

const ajv = addFormats(new Ajv({ allErrors: true, strict: false, coerceTypes: false, useDefaults: false }));
const compiled = new WeakMap<TSchema, ValidateFunction>();

function validatorFor(schema: TSchema): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  return validate;
}

// The frame unions are compiled at import, so a bad schema fails at start, not on the first frame.
validatorFor(agentFrame);
validatorFor(serverFrame);

/**
 * Parses one text frame against a schema (a single frame or one of the unions).
 * Bad input is an expected outcome, so it is a returned value, not an exception.
 */
export function parseFrame<T extends TSchema>(text: string, schema: T): ParseResult<Static<T>> {
  if (text.length > L.maxFrameBytes) return { ok: false, error: `frame is larger than ${L.maxFrameBytes} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, error: 'frame is not valid JSON' };
  }
  const validate = validatorFor(schema);
  if (validate(value)) return { ok: true, frame: value as Static<T> };
  return { ok: false, error: describeErrors(schema, value, validate.errors ?? []) };
}

/** For a union, report the errors of the member whose `type` matches: "body too long", not "no anyOf matched". */
function describeErrors(schema: TSchema, value: unknown, errors: ErrorObject[]): string {
  const members = (schema as { anyOf?: TSchema[] }).anyOf;
  const type = typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
  if (members) {
    const member = members.find(
      (m) => (m as { properties?: { type?: { const?: unknown } } }).properties?.type?.const === type,
    );
    if (!member) return `unknown frame type ${JSON.stringify(type ?? null).slice(0, 80)}`;
    const validate = validatorFor(member);
    validate(value);
    return describeErrors(member, value, validate.errors ?? []);
  }
  return (
    errors
      // The branches of hello's oneOf each report a missing field; the oneOf error itself says it better.
      .filter((e) => !e.schemaPath.startsWith('#/oneOf/'))
      .slice(0, 5)
      .map((e) => {
        const path = e.instancePath || '/';
        if (e.keyword === 'additionalProperties')
          return `${path}: unknown field ${(e.params as { additionalProperty: string }).additionalProperty}`;
        if (e.keyword === 'oneOf') return `${path}: needs exactly one of registrationToken or credential`;
        return `${path}: ${e.message ?? 'is invalid'}`;
      })
      .join('; ')
  );
}
