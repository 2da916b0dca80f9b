import { errorCodes, type ErrorCode } from '../errors.ts';
import { isSchema, noContent, type RouteDef } from './route.ts';
import { neededRole } from './roles-needed.ts';

/** TypeBox schemas are JSON Schema; this drops TypeBox's symbol keys. */
export const plain = (schema: unknown): Record<string, any> => JSON.parse(JSON.stringify(schema));

/** What each error means, as the API description says it. */
const errorMeaning: Record<ErrorCode, string> = {
  validation_error: 'the request is malformed: `details` lists every violation with its JSON Pointer',
  bad_request: 'the request is ambiguous or malformed before any field is read (conflicting framing, an id header that is not exactly an id); framing errors close the connection',
  method_not_allowed: 'the path exists but not with this method; `Allow` lists the methods it has',
  header_fields_too_large: 'the request has too many or too large header fields',
  unauthorized: 'missing or invalid credentials',
  forbidden: "the caller's role is too low for this operation",
  not_found: 'the resource does not exist in the caller\'s organization and team',
  conflict: 'the request conflicts with the current state (a duplicate, or an Idempotency-Key still in use)',
  payload_too_large: 'the body is larger than this operation accepts; the connection is closed',
  unsupported_media_type: 'the body has a content type this operation does not read',
  idempotency_mismatch: 'this Idempotency-Key was used with a different body',
  rate_limited: 'the rate limit is exceeded; wait Retry-After seconds',
  internal_error: 'an unexpected failure; quote X-Request-Id when reporting it',
  service_unavailable: 'a backend is unavailable or shutting down; retry after Retry-After seconds',
};

const hasBody = (route: RouteDef) => route.method !== 'GET';

/**
 * Every error a route can answer, from its shape: what the request pipeline
 * (src/http/server.ts) can refuse before or around the handler, plus the
 * errors the route declares its handler raises. A new route gets these
 * without listing them; the contract test fails if a route answers an
 * error that is not here.
 */
export function errorsOf(route: RouteDef): ErrorCode[] {
  const codes = new Set<ErrorCode>(route.errors ?? []);
  const s = route.schema;
  // Any request can be malformed (a header, the path, the query or the body).
  codes.add('validation_error');
  codes.add('bad_request');
  if (route.auth !== false) {
    codes.add('unauthorized');
    if (neededRole(route) !== 'viewer') codes.add('forbidden');
    if (route.teamScoped) codes.add('not_found');
  }
  // An id in the path that names nothing is a 404; so is an unknown X-Team-Id.
  if (s.params || route.auth !== false) codes.add('not_found');
  if (hasBody(route)) codes.add('payload_too_large');
  if (s.body || route.uploadField) codes.add('unsupported_media_type');
  if (route.method === 'POST' || route.method === 'PUT' || route.method === 'PATCH') codes.add('conflict');
  if (route.idempotent) {
    codes.add('conflict');
    codes.add('idempotency_mismatch');
  }
  codes.add('rate_limited');
  codes.add('internal_error');
  codes.add('service_unavailable');
  return [...codes].sort((a, b) => errorCodes[a].status - errorCodes[b].status);
}

const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** Headers on every answer (the rate-limit ones once a limit applies to the request); 429 and 503 add Retry-After. */
function commonHeaders(status: number): Record<string, unknown> {
  const headers: Record<string, unknown> = { 'X-Request-Id': ref('X-Request-Id') };
  for (const name of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy']) headers[name] = ref(name);
  if (status === 429 || status === 503) headers['Retry-After'] = ref('Retry-After');
  return headers;
}

export function responsesOf(route: RouteDef): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, spec] of Object.entries(route.schema.response)) {
    const headers = commonHeaders(Number(status));
    if (route.idempotent) headers['Idempotent-Replayed'] = ref('Idempotent-Replayed');
    if (isSchema(spec)) {
      // A 204 has no body, whatever schema it was declared with.
      out[status] = status === '204'
        ? { description: noContent.description, headers }
        : { description: 'success', headers, content: { 'application/json': { schema: plain(spec) } } };
      continue;
    }
    for (const [name, h] of Object.entries(spec.headers ?? {})) {
      headers[name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase())] = { description: h.description, required: h.required ?? false, schema: { type: 'string' } };
    }
    const content = spec.content ? Object.fromEntries(Object.entries(spec.content).map(([type, schema]) => [type, { schema: plain(schema) }])) : undefined;
    out[status] = { description: spec.description, headers, ...(content ? { content } : {}) };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorsOf(route)) {
    const status = errorCodes[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  for (const [status, codes] of byStatus) {
    out[String(status)] = {
      description: codes.map((c) => `${c}: ${errorMeaning[c]}`).join('; '),
      headers: commonHeaders(status),
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
  }
  return out;
}

export const headerComponents = {
  'X-Request-Id': { description: 'Identifies the request in the logs; a valid incoming X-Request-Id is kept.', required: true, schema: { type: 'string', maxLength: 128 } },
  'RateLimit-Limit': { description: "Requests allowed in the current window (the organization's burst).", schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Reset': { description: 'Seconds until the window is full again.', schema: { type: 'integer', minimum: 0 } },
  'RateLimit-Policy': { description: 'The policy the limit applies, e.g. `100;w=60;burst=20` (100 a minute, bursts of 20).', schema: { type: 'string' } },
  'Retry-After': { description: 'Seconds to wait before trying again.', required: true, schema: { type: 'integer', minimum: 1 } },
  'Idempotent-Replayed': { description: '`true` when the answer replays the first request with the same Idempotency-Key.', schema: { type: 'string', enum: ['true'] } },
};

export const errorSchema = {
  type: 'object',
  required: ['error', 'message', 'statusCode'],
  properties: {
    error: { type: 'string', enum: Object.keys(errorCodes), description: 'machine-readable code' },
    message: { type: 'string', description: 'human-readable text' },
    statusCode: { type: 'integer', description: 'the HTTP status' },
    details: {
      type: 'array',
      description: 'validation errors: every violation (at most 100), each with a JSON Pointer to the value',
      items: {
        type: 'object',
        required: ['path', 'message'],
        properties: {
          path: {
            type: 'string',
            description: 'a JSON Pointer (RFC 6901) into the input that was checked: the JSON body, the query parameters, the path parameters or the headers, each seen as one object, e.g. `/to`, `/messages/17/to`, `/phoneNumbers/1`, `/limit`, `/Idempotency-Key`; `~1` stands for `/` and `~0` for `~` in a name; an empty string is the whole body',
          },
          message: { type: 'string' },
        },
      },
    },
  },
};
