import { errorCodes } from '../errors.ts';
import type { RouteDef } from './route.ts';
import { neededRole } from './roles-needed.ts';

const errorSchema = {
  type: 'object',
  required: ['error', 'message', 'statusCode'],
  properties: {
    error: { type: 'string', enum: Object.keys(errorCodes) },
    message: { type: 'string' },
    statusCode: { type: 'integer' },
    details: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
  },
};

/** TypeBox schemas are JSON Schema; this drops TypeBox's symbol keys. */
const plain = (schema: unknown): Record<string, any> => JSON.parse(JSON.stringify(schema));

function parameters(route: RouteDef) {
  const out: unknown[] = [];
  if (route.auth !== false) {
    out.push({ name: 'X-Team-Id', in: 'header', required: false, schema: { type: 'string', maxLength: 64 }, description: "The team the request acts in; default the organization's default team. Another organization's team: 404." });
  }
  if (route.method === 'POST' && /\/messages(\/bulk)?$/.test(route.path)) {
    out.push({ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 255 }, description: 'A repeat within 24 h replays the first answer; the same key with another body is 422 idempotency_mismatch.' });
  }
  for (const where of ['params', 'query'] as const) {
    const schema = route.schema?.[where] ? plain(route.schema[where]) : undefined;
    for (const [name, prop] of Object.entries<Record<string, unknown>>(schema?.properties ?? {})) {
      out.push({
        name,
        in: where === 'params' ? 'path' : 'query',
        required: where === 'params' || (schema?.required ?? []).includes(name),
        schema: prop,
        ...(prop.description ? { description: prop.description } : {}),
      });
    }
  }
  return out;
}

function responses(route: RouteDef) {
  const out: Record<string, unknown> = {};
  for (const [status, schema] of Object.entries(route.schema?.response ?? { 200: undefined })) {
    out[status] = schema
      ? { description: 'success', content: { 'application/json': { schema: plain(schema) } } }
      : { description: 'success' };
  }
  const errors = route.auth === false ? ['400', '429', '500'] : ['400', '401', '403', '404', '429', '500'];
  for (const status of errors) {
    out[status] ??= { description: 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  }
  return out;
}

/** The OpenAPI 3.1 description, generated from the route table so it cannot drift from the code. */
export function openApiDocument(routes: RouteDef[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    paths[path] ??= {};
    paths[path]![route.method.toLowerCase()] = {
      summary: route.summary,
      tags: route.tags ?? [],
      ...(route.auth === false ? {} : { description: `Needs the ${neededRole(route)} role or higher.${route.teamScoped ? ' Belongs to the team picked by X-Team-Id (default: the organization\'s default team).' : ''}` }),
      parameters: parameters(route),
      ...(route.schema?.body ? { requestBody: { required: true, content: { 'application/json': { schema: plain(route.schema.body) } } } } : {}),
      ...(route.uploadField ? { requestBody: { required: true, content: { 'multipart/form-data': { schema: { type: 'object', required: [route.uploadField], properties: { [route.uploadField]: { type: 'string', format: 'binary' } } } } } } } : {}),
      responses: responses(route),
      security: route.auth === false ? [] : [{ bearer: [] }],
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Relaybox messaging API',
      version: '1.0.0',
      description: [
        'Every error answer has the body {error, message, statusCode} (validation errors add details).',
        'Error codes: ' + Object.entries(errorCodes).map(([code, { status }]) => `${code} (${status})`).join(', ') + '.',
        'Every answer carries X-Request-Id and the RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset headers; 429 adds Retry-After.',
      ].join('\n'),
    },
    components: {
      schemas: { Error: errorSchema },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key (rbx_live_...) or an access token (JWT)' } },
    },
    paths,
  };
}
