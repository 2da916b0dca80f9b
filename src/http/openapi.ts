import { maxJsonDepth } from '../config.ts';
import { errorCodes, problemMediaType } from '../errors.ts';
import { headerComponents, plain, problemSchema, responsesOf } from './openapi-responses.ts';
import { codeSamplesOf } from './openapi-samples.ts';
import { schemaNameKey, type RouteDef } from './route.ts';
import { neededRole } from './roles-needed.ts';

/** `:id` → `{id}` */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** The route's own operationId, or one made from its method and path (getMessagesByIdStatus): unique as long as routes are. */
export function operationIdOf(route: RouteDef): string {
  if (route.operationId) return route.operationId;
  const words = route.path
    .replace(/^\/api\/v1\//, '')
    .split('/')
    .flatMap((segment) => {
      const param = /^:(.+)$/.exec(segment);
      return param ? ['by', param[1]!] : segment.split(/[^A-Za-z0-9]+/);
    });
  return (
    route.method.toLowerCase() +
    words
      .filter(Boolean)
      .map((w) => w[0]!.toUpperCase() + w.slice(1))
      .join('')
  );
}

/**
 * A request schema as a client sees it: a field with a default may be left
 * out (the server fills it in), so it is not required. Applied to nested
 * objects too.
 */
export function requestView(schema: unknown): any {
  if (Array.isArray(schema)) return schema.map(requestView);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, any> = {};
  for (const [k, v] of Object.entries(schema))
    out[k] = k === 'default' || k === 'const' || k === 'enum' ? v : requestView(v);
  if (Array.isArray(out.required) && out.properties) {
    const required = out.required.filter((name: string) => out.properties[name]?.default === undefined);
    if (required.length > 0) out.required = required;
    else delete out.required;
  }
  return out;
}

const requiredFields = (schema: Record<string, any>): string[] => schema.required ?? [];

/** The header parameters many operations share, described once under components.parameters. */
const parameterComponents = {
  'X-Team-Id': {
    name: 'X-Team-Id',
    in: 'header',
    required: false,
    schema: { type: 'string', maxLength: 64 },
    description:
      "The team the request acts in; default the organization's default team. Another organization's team: 404.",
  },
  'Idempotency-Key': {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    schema: { type: 'string', minLength: 1, maxLength: 255 },
    description:
      'A repeat within 24 h replays the first answer (with Idempotent-Replayed: true); the same key with another body is 422 idempotency_mismatch.',
  },
  'X-Request-Id': {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    schema: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,128}$' },
    description:
      "Kept as the request id of the answer (and an error's `instance`) and the logs when valid; otherwise one is made.",
  },
  traceparent: {
    name: 'traceparent',
    in: 'header',
    required: false,
    schema: { type: 'string', maxLength: 512 },
    description:
      'W3C trace context: the messages this request creates carry its trace to their relay send and their webhook deliveries. Absent or malformed (ignored, never an error): a new trace.',
  },
  tracestate: {
    name: 'tracestate',
    in: 'header',
    required: false,
    schema: { type: 'string', maxLength: 512 },
    description: 'W3C trace context: passed on with traceparent (its well-formed members).',
  },
};

const parameterRef = (name: keyof typeof parameterComponents) => ({ $ref: `#/components/parameters/${name}` });

function parameters(route: RouteDef) {
  const out: unknown[] = [];
  if (route.auth !== false && !route.platform) out.push(parameterRef('X-Team-Id'));
  if (route.idempotent) out.push(parameterRef('Idempotency-Key'));
  if (route.traced) out.push(parameterRef('traceparent'), parameterRef('tracestate'));
  out.push(parameterRef('X-Request-Id'));
  for (const where of ['params', 'query'] as const) {
    const schema = route.schema[where] ? requestView(plain(route.schema[where])) : undefined;
    for (const [name, prop] of Object.entries<Record<string, unknown>>(schema?.properties ?? {})) {
      // The description is the parameter's, said once (not again inside its schema).
      const { description, ...valueSchema } = prop;
      out.push({
        name,
        in: where === 'params' ? 'path' : 'query',
        required: where === 'params' || requiredFields(schema!).includes(name),
        schema: valueSchema,
        ...(description ? { description } : {}),
      });
    }
  }
  return out;
}

function requestBody(route: RouteDef, schema: Record<string, any> | undefined) {
  if (route.uploadField) {
    const field = route.uploadField;
    return {
      required: true,
      content: {
        'multipart/form-data': {
          schema: { type: 'object', required: [field], properties: { [field]: { type: 'string', format: 'binary' } } },
        },
      },
    };
  }
  if (!schema) return undefined;
  // A body with nothing required may be left out altogether (an empty body reads as {}).
  return { required: requiredFields(schema).length > 0, content: { 'application/json': { schema } } };
}

function describe(route: RouteDef): string | undefined {
  if (route.platform) return 'Needs a platform-admin key; an organization credential is 403.';
  if (route.auth === false) return undefined;
  const team = route.teamScoped ? ' Acts in the team X-Team-Id picks.' : '';
  return `Needs the ${neededRole(route)} role or higher.${team}`;
}

/** What each group of operations is about; a tag not listed here still gets a plain description. */
const tagDescriptions: Record<string, string> = {
  auth: 'Sign-up, log-in, sessions and the caller',
  'api-keys': 'Long-lived credentials for servers (admin only): live keys, and test keys that reach only test data',
  members: 'The users of an organization',
  teams: 'Teams: every message, conversation and contact belongs to one',
  messages: 'Sending messages, their history, delivery status and attachments',
  conversations: 'Conversations, kept up to date by every sent and received message',
  'phone-numbers': 'The sender numbers registered to the organization',
  contacts: 'Contacts, their import and export',
  'contact-groups': 'Contact groups; a message to group:<id> goes to each member',
  relays: 'Desktop relays: registration tokens and status (the WebSocket protocol is in /api/v1/asyncapi.json)',
  bulk: 'Bulk jobs: many messages in one request, their progress and results',
  webhooks: 'Webhooks: the events posted to your server, their delivery log and retry policy',
  events: "The organization's events, to read or catch up on what webhooks deliver",
  'request-log': "The organization's API requests of the last 7 days: method, path, status, key, request id, duration",
  suppressions:
    "Opt-outs: the organization's suppression list, which every send checks, and its stop keywords and help text",
  automations: 'Automations: replies and actions run on received messages',
  handles: 'Which service a handle is reached on (iMessage or not), asked through a relay',
  meta: 'Descriptions of this API',
  admin: 'For platform operators, across organizations',
};

/** The order /docs lists the groups in: what a client does first (send and read messages), credentials and meta last. */
const tagOrder = [
  'messages',
  'bulk',
  'conversations',
  'contacts',
  'contact-groups',
  'phone-numbers',
  'webhooks',
  'events',
  'request-log',
  'automations',
  'suppressions',
  'handles',
  'relays',
  'auth',
  'api-keys',
  'members',
  'teams',
  'admin',
  'meta',
  'dashboard',
];
const tagRank = (name: string) => (tagOrder.includes(name) ? tagOrder.indexOf(name) : tagOrder.length);

/** The first steps, at the top of /docs. */
const gettingStarted = [
  '## Getting started',
  '',
  '1. **Get a key.** Sign up at `/` (the dashboard), then create an API key under *API keys*; or sign up with `POST /api/v1/auth/signup` and use the access token it answers. A test key (`POST /api/v1/api-keys` with `"mode": "test"`, `rb_test_...`) works on test data, sent by a built-in simulated relay: no Mac needed (docs/test-mode.md).',
  '2. **Connect a relay.** For live keys: under *Relays*, *Add a relay* shows the command to run on the Mac that sends the messages.',
  '3. **Send a message.** `POST /api/v1/messages` with `{"to": "+14155550123", "body": "Hello"}` and the header `Authorization: Bearer <key>`; the answer (201) holds the message\'s `id`.',
  '4. **Follow it.** `GET /api/v1/messages/{id}/status` says where it is; a webhook (`POST /api/v1/webhooks`) is called on each `message.*` event.',
  '',
  '## Conventions',
  '',
].join('\n');

export interface DocumentOptions {
  /** Where clients reach the API, when the deployment says so (PUBLIC_BASE_URL). */
  publicBaseUrl?: string;
  /** Adds a curl and a TypeScript sample to each operation (`x-codeSamples`), as /docs shows them. */
  codeSamples?: boolean;
}

/** The OpenAPI 3.1 description, generated from the route table and the routes' TypeBox schemas, so it cannot drift from the code. */
export function openApiDocument(routes: RouteDef[], opts: DocumentOptions = {}) {
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  const errorResponses: Record<string, unknown> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    for (const tag of route.tags ?? []) tags.add(tag);
    const bodySchema = route.schema.body ? requestView(plain(route.schema.body)) : undefined;
    const body = requestBody(route, bodySchema);
    const description = describe(route);
    paths[path] ??= {};
    paths[path]![route.method.toLowerCase()] = {
      operationId: operationIdOf(route),
      summary: route.summary,
      ...(description ? { description } : {}),
      tags: route.tags ?? [],
      parameters: parameters(route),
      ...(body ? { requestBody: body } : {}),
      responses: responsesOf(route, errorResponses),
      security: route.platform ? [{ platformKey: [] }] : route.auth === false ? [] : [{ bearer: [] }],
      ...(opts.codeSamples
        ? {
            'x-codeSamples': codeSamplesOf({
              route,
              path,
              body: bodySchema,
              query: route.schema.query ? requestView(plain(route.schema.query)) : undefined,
            }),
          }
        : {}),
    };
  }
  const schemas = collectNamedSchemas(paths);
  const sharedParameters = shareParameters(paths);
  const servers = [
    ...(opts.publicBaseUrl ? [{ url: opts.publicBaseUrl, description: 'this deployment' }] : []),
    { url: '/', description: 'the host that serves this document' },
  ];
  return {
    openapi: '3.1.0',
    info: {
      title: 'Relaybox messaging API',
      version: '1.0.0',
      description: [
        gettingStarted,
        `Every error answer is RFC 9457 problem details (${problemMediaType}): type (\`/errors/{code}\`, a page documenting the code), title, status, detail and instance (the request id); error, message and statusCode stay beside them, and validation errors add details, one entry per violation, each naming the value by a JSON Pointer (\`/messages/17/to\`).`,
        'No string of a request (body, query, path, field names) may hold NUL (U+0000) or an unpaired UTF-16 surrogate: such a value is a 400 validation_error naming it.',
        `A JSON body, and a JSON file imported, nests arrays and objects at most ${maxJsonDepth} levels deep: deeper is a 400 validation_error naming the limit.`,
        'Error codes: ' +
          Object.entries(errorCodes)
            .map(([code, { status }]) => `${code} (${status})`)
            .join(', ') +
          '.',
        'Every answer carries X-Request-Id. Answers of authenticated routes and of signup, login and refresh carry RateLimit-Limit, RateLimit-Policy, RateLimit-Remaining and RateLimit-Reset; 429 and 503 add Retry-After.',
        'Answers over 1 KiB are compressed (gzip or br) when the request accepts it (Accept-Encoding).',
        'Desktop relays connect over a WebSocket at /api/v1/relays/connect; its protocol is described in AsyncAPI at /api/v1/asyncapi.json.',
      ].join('\n'),
    },
    servers,
    tags: [...tags]
      .sort((a, b) => tagRank(a) - tagRank(b) || a.localeCompare(b))
      .map((name) => ({ name, description: tagDescriptions[name] ?? `Operations on ${name.replace(/-/g, ' ')}` })),
    components: {
      schemas: { ...schemas, Problem: problemSchema },
      responses: Object.fromEntries(Object.entries(errorResponses).sort(([a], [b]) => a.localeCompare(b))),
      parameters: { ...parameterComponents, ...sharedParameters },
      headers: headerComponents,
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description:
            "An API key (rb_live_..., rb_test_... for the organization's test data; older keys rbx_live_...) or an access token (JWT); with an access token, the header X-Relaybox-Mode: test works on the test data",
        },
        platformKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'A platform-admin key (rbx_platform_...)',
        },
      },
    },
    paths,
  };
}

/**
 * A path or query parameter that several operations declare alike (`page`,
 * `limit`, an `id`) is listed once under components.parameters and
 * referenced; when one name is declared in several shapes (an `id` of
 * another length), its most used shape is shared and the others stay inline.
 */
function shareParameters(paths: Record<string, Record<string, any>>): Record<string, unknown> {
  const operations = Object.values(paths).flatMap((item) => Object.values(item));
  const shapes = new Map<string, Map<string, number>>();
  for (const op of operations) {
    for (const p of op.parameters as Array<Record<string, any>>) {
      if (p.$ref) continue;
      const text = JSON.stringify(p);
      const uses = shapes.get(p.name) ?? new Map<string, number>();
      uses.set(text, (uses.get(text) ?? 0) + 1);
      shapes.set(p.name, uses);
    }
  }
  const sharedShape = new Map<string, string>();
  for (const [name, uses] of shapes) {
    const [text, count] = [...uses].sort(([a, x], [b, y]) => y - x || a.localeCompare(b))[0]!;
    if (count >= 2 && !(name in parameterComponents)) sharedShape.set(name, text);
  }
  const shared: Record<string, unknown> = {};
  for (const op of operations) {
    op.parameters = (op.parameters as Array<Record<string, any>>).map((p) => {
      if (p.$ref || sharedShape.get(p.name) !== JSON.stringify(p)) return p;
      shared[p.name] = p;
      return { $ref: `#/components/parameters/${p.name}` };
    });
  }
  return shared;
}

/**
 * Replaces every schema marked with `named()` by a reference to one entry of
 * components.schemas. A name given to two different shapes stays inline in
 * both places rather than describing one of them wrongly.
 */
function collectNamedSchemas(paths: Record<string, unknown>): Record<string, unknown> {
  const found = new Map<string, { text: string; schema: Record<string, unknown> } | 'ambiguous'>();
  const strip = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(strip);
    if (node === null || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) if (k !== schemaNameKey) out[k] = strip(v);
    return out;
  };
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (node === null || typeof node !== 'object') return;
    const record = node as Record<string, unknown>;
    const name = record[schemaNameKey];
    if (typeof name === 'string') {
      const text = JSON.stringify(strip(record));
      const seen = found.get(name);
      if (!seen) found.set(name, { text, schema: record });
      else if (seen !== 'ambiguous' && seen.text !== text) found.set(name, 'ambiguous');
    }
    Object.values(record).forEach(visit);
  };
  visit(paths);
  const replace = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(replace);
    if (node === null || typeof node !== 'object') return node;
    const record = node as Record<string, unknown>;
    const name = record[schemaNameKey];
    if (typeof name === 'string' && found.get(name) !== 'ambiguous') return { $ref: `#/components/schemas/${name}` };
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(record)) if (k !== schemaNameKey) out[k] = replace(v);
    return out;
  };
  for (const [path, item] of Object.entries(paths)) paths[path] = replace(item);
  const schemas: Record<string, unknown> = {};
  for (const [name, entry] of [...found].sort(([a], [b]) => a.localeCompare(b))) {
    if (entry === 'ambiguous') continue;
    const { [schemaNameKey]: _name, ...body } = entry.schema;
    schemas[name] = replace(body);
  }
  return schemas;
}
