import { errorCodes, problemMediaType, problemTypeOf, type ErrorCode } from '../errors.ts';
import { isSchema, noContent, type RouteDef } from './route.ts';
import { neededRole } from './roles-needed.ts';

/** TypeBox schemas are JSON Schema; this drops TypeBox's symbol keys. */
export const plain = (schema: unknown): Record<string, any> => JSON.parse(JSON.stringify(schema));

const registryOrder = Object.keys(errorCodes);

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
  if (route.platform) {
    codes.add('unauthorized');
    codes.add('forbidden');
  } else if (route.auth !== false) {
    codes.add('unauthorized');
    if (neededRole(route) !== 'viewer') codes.add('forbidden');
    if (route.teamScoped) codes.add('not_found');
  }
  // An id in the path that names nothing is a 404; so is an unknown X-Team-Id.
  if (s.params || (route.auth !== false && !route.platform)) codes.add('not_found');
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
  return [...codes].sort(
    (a, b) => errorCodes[a].status - errorCodes[b].status || registryOrder.indexOf(a) - registryOrder.indexOf(b),
  );
}

const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });

/**
 * The headers an error answer documents: X-Request-Id, the rate-limit ones
 * (once a limit applies to the request), Retry-After on 429 and 503, WWW-Authenticate on 401. Success
 * answers document X-Request-Id and their own headers; the rate-limit
 * headers they carry as well are said once, in the document's description,
 * rather than on each of them (a fifth of the document's size).
 */
function errorHeaders(status: number): Record<string, unknown> {
  const headers: Record<string, unknown> = { 'X-Request-Id': ref('X-Request-Id') };
  for (const name of ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy'])
    headers[name] = ref(name);
  if (status === 429 || status === 503) headers['Retry-After'] = ref('Retry-After');
  if (status === 401) headers['WWW-Authenticate'] = ref('WWW-Authenticate');
  return headers;
}

/**
 * A route's answers: its success answers inline, its error answers as
 * references to `components.responses`, where each set of codes a status
 * carries is described once (`errorResponses` collects them for the
 * document): 69 operations repeating ten error answers inline made the
 * document 450 KB.
 */
export function responsesOf(route: RouteDef, errorResponses: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, spec] of Object.entries(route.schema.response)) {
    const headers: Record<string, unknown> = { 'X-Request-Id': ref('X-Request-Id') };
    if (route.idempotent) headers['Idempotent-Replayed'] = ref('Idempotent-Replayed');
    if (isSchema(spec)) {
      // A 204 has no body, whatever schema it was declared with.
      out[status] =
        status === '204'
          ? { description: noContent.description, headers }
          : { description: 'success', headers, content: { 'application/json': { schema: plain(spec) } } };
      continue;
    }
    for (const [name, h] of Object.entries(spec.headers ?? {})) {
      headers[name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase())] = {
        description: h.description,
        required: h.required ?? false,
        schema: { type: 'string' },
      };
    }
    const content = spec.content
      ? Object.fromEntries(Object.entries(spec.content).map(([type, schema]) => [type, { schema: plain(schema) }]))
      : undefined;
    out[status] = { description: spec.description, headers, ...(content ? { content } : {}) };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorsOf(route)) {
    const status = errorCodes[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  for (const [status, codes] of byStatus) {
    const name = codes
      .map((c) => c.replace(/(^|_)([a-z])/g, (_, _sep: string, ch: string) => ch.toUpperCase()))
      .join('Or');
    errorResponses[name] ??= errorResponse(status, codes);
    out[String(status)] = { $ref: `#/components/responses/${name}` };
  }
  return out;
}

/** One status's error answer: a problem whose code is one of `codes`. */
function errorResponse(status: number, codes: ErrorCode[]) {
  return {
    description: codes.map((c) => `${c}: ${errorCodes[c].means}`).join('; '),
    headers: errorHeaders(status),
    content: {
      [problemMediaType]: {
        schema: {
          allOf: [
            { $ref: '#/components/schemas/Problem' },
            {
              type: 'object',
              properties: {
                type: { enum: codes.map(problemTypeOf) },
                status: { const: status },
                error: { enum: codes },
              },
            },
          ],
        },
      },
    },
  };
}

export const headerComponents = {
  'X-Request-Id': {
    description: 'Identifies the request in the logs; a valid incoming X-Request-Id is kept.',
    required: true,
    schema: { type: 'string', maxLength: 128 },
  },
  'RateLimit-Limit': {
    description: 'Requests allowed per 60 s window: the quota RateLimit-Policy names.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Remaining': {
    description:
      "What is left of that quota. At most the policy's burst passes at once: faster than the quota refills, a 429 comes before 0.",
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Reset': {
    description: 'Seconds until the quota is whole again.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Policy': {
    description: 'The policy the limit applies, e.g. `100;w=60;burst=20` (100 a minute, bursts of 20).',
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Seconds to wait before trying again.',
    required: true,
    schema: { type: 'integer', minimum: 1 },
  },
  'WWW-Authenticate': {
    description:
      'The scheme to authenticate with: `Bearer realm="relaybox"`, with `error="invalid_token"` when the request carried a bearer token that was refused (RFC 6750).',
    required: true,
    schema: { type: 'string' },
  },
  'Idempotent-Replayed': {
    description: '`true` when the answer replays the first request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
};

/** The body of every error answer (RFC 9457 problem details, with the API's first error members kept beside them). */
export const problemSchema = {
  type: 'object',
  description:
    'RFC 9457 problem details. `error`, `message`, `statusCode` and `details` are extension members: the body errors had before, kept so clients that read them keep working.',
  required: ['type', 'title', 'status', 'detail', 'instance', 'error', 'message', 'statusCode'],
  properties: {
    type: {
      type: 'string',
      format: 'uri-reference',
      description:
        'the problem type, one per code: `/errors/{code}`, resolved against the address called, is a page that documents it (docs/errors.md has the same sections)',
    },
    title: { type: 'string', description: 'the problem type in words, the same for every answer with this code' },
    status: { type: 'integer', minimum: 400, maximum: 599, description: 'the HTTP status' },
    detail: { type: 'string', description: 'what is wrong with this request' },
    instance: { type: 'string', format: 'uri-reference', description: "this request's id, as X-Request-Id carries it" },
    error: {
      type: 'string',
      enum: Object.keys(errorCodes),
      description: 'machine-readable code (the last segment of `type`)',
    },
    message: { type: 'string', description: 'the same text as `detail`' },
    statusCode: { type: 'integer', description: 'the HTTP status, as `status`' },
    details: {
      type: 'array',
      description: 'validation errors: every violation (at most 100), each with a JSON Pointer to the value',
      items: {
        type: 'object',
        required: ['path', 'message'],
        properties: {
          path: {
            type: 'string',
            description:
              'a JSON Pointer (RFC 6901) into the input that was checked: the JSON body, the query parameters, the path parameters or the headers, each seen as one object, e.g. `/to`, `/messages/17/to`, `/phoneNumbers/1`, `/limit`, `/Idempotency-Key`; `~1` stands for `/` and `~0` for `~` in a name; an empty string is the whole body',
          },
          message: { type: 'string' },
        },
      },
    },
  },
};
