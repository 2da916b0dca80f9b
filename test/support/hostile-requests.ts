import { gzipSync } from 'node:zlib';
import { exampleOf } from '../../src/http/openapi-samples.ts';

/**
 * Hostile requests for every operation of the OpenAPI document, made from a
 * seed: the same seed gives the same requests, so a failure names a request
 * that can be sent again. Each operation gets the same number, cycling
 * through the kinds of hostility that apply to it (credentials, path, query,
 * headers, method; for operations that read a body also malformed JSON,
 * content types, fields, shapes, nesting, size, raw bytes and encodings).
 */

/** One operation of the document, as the generator needs it. */
export interface Operation {
  /** "METHOD /path/{param}". */
  key: string;
  method: string;
  path: string;
  pathParams: string[];
  /** Query parameters by name, their schemas dereferenced. */
  query: Record<string, Record<string, any>>;
  /** The JSON body's schema, dereferenced, if the operation reads one. */
  body: Record<string, any> | undefined;
  /** The operation reads a multipart/form-data upload. */
  upload: boolean;
  authenticated: boolean;
}

export interface HostileRequest {
  /** The operation it was made for. */
  operation: string;
  /** What is hostile about it. */
  what: string;
  method: string;
  /** Path and query, as they go on the wire. */
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array | FormData;
  /** The HTTP parser may leave it unanswered, before any of the service's code runs (`parserMayDrop`). */
  parserMayClose?: true;
}

/** What the generator takes from the running service. */
export interface HostileContext {
  /** The Authorization header of a real organization owner. */
  owner: string;
  /** Credentials that are wrong in some way, each with what is wrong with it (undefined: none sent). */
  badCredentials: Array<[string, string | undefined]>;
  /** Path parameters of real resources of the owner's organization, by operation key, where there are any. */
  realParams(op: Operation): Record<string, string> | undefined;
  /** Real ids of all kinds in the organization, and ids of another organization: used where another id is expected. */
  otherIds: string[];
  /** Real list cursors (nextCursor) of the organization's lists. */
  cursors: string[];
  /** The largest body the operation reads. */
  maxBodyBytes(op: Operation): number;
  /** The most header bytes the service reads. */
  maxHeaderBytes: number;
}

/** A deterministic generator of numbers in [0, 1) (mulberry32). */
export function seededRandom(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
  };
}
export type Random = ReturnType<typeof seededRandom>;

/** Every operation of an OpenAPI 3 document, references resolved. */
export function operationsOf(doc: any): Operation[] {
  const resolve = (ref: string): any =>
    ref
      .replace(/^#\//, '')
      .split('/')
      .reduce((node, key) => node[key], doc);
  const deref = (node: any, depth = 0): any => {
    if (Array.isArray(node)) return node.map((n) => deref(n, depth));
    if (node === null || typeof node !== 'object' || depth > 24) return node;
    if (typeof node.$ref === 'string') return deref(resolve(node.$ref), depth + 1);
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, deref(v, depth + 1)]));
  };
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const params: any[] = deref([...(item.parameters ?? []), ...(op.parameters ?? [])]);
      const content = op.requestBody?.content ?? {};
      ops.push({
        key: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        pathParams: [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!),
        query: Object.fromEntries(params.filter((p) => p.in === 'query').map((p) => [p.name, p.schema ?? {}])),
        body: content['application/json'] ? deref(content['application/json'].schema) : undefined,
        upload: 'multipart/form-data' in content,
        authenticated: (op.security ?? doc.security ?? []).length > 0,
      });
    }
  }
  return ops;
}

/**
 * At least `total` hostile requests from `seed`: each operation gets a share
 * in proportion to the kinds that apply to it, cycling through them, so an
 * operation that reads a body (more kinds) gets more requests than a plain read.
 */
export function hostileRequests(ops: Operation[], ctx: HostileContext, seed: number, total: number): HostileRequest[] {
  const random = seededRandom(seed);
  const kindsOf = ops.map(kindsFor);
  const kinds = kindsOf.reduce((sum, k) => sum + k.length, 0);
  const out: HostileRequest[] = [];
  ops.forEach((op, o) => {
    const own = kindsOf[o]!;
    const count = Math.ceil((total * own.length) / kinds);
    for (let i = 0; i < count; i++) {
      const req = own[i % own.length]!(new Draft(op, ctx, random, i, own.length), random, ctx);
      out.push(parserMayDrop(req) ? { ...req, parserMayClose: true } : req);
    }
  });
  return out;
}

/** The methods the HTTP parser (uWebSockets.js 20.30) knows; it closes the connection on any other. */
const parserMethods = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'CONNECT', 'TRACE']);
/** Header fields the client adds (host, connection, accept, user-agent...): their count and, generously, their bytes. */
const clientFields = { count: 8, bytes: 300 };

/**
 * Whether the HTTP parser (uWebSockets.js 20.30) may leave the request
 * unanswered, before any of the service's code runs: a method outside its
 * list (it closes the connection), more than 48 header fields (it answers
 * nothing), or a request head over 4 KB that reaches it in more than one read
 * (it closes the connection; on loopback a head usually comes in one read).
 */
function parserMayDrop(req: HostileRequest): boolean {
  const fields = Object.entries(req.headers);
  const head = req.method.length + req.path.length + 11 + fields.reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
  return !parserMethods.has(req.method) || fields.length + clientFields.count > 48 || head + clientFields.bytes > 4096;
}

type Kind = (draft: Draft, random: Random, ctx: HostileContext) => HostileRequest;

function kindsFor(op: Operation): Kind[] {
  const always: Kind[] = [credentials, pathValue, queryValue, queryShape, header, queryValue, pathValue];
  if (!op.authenticated) always.shift();
  if (op.pathParams.length === 0)
    always.splice(0, always.length, ...always.map((k) => (k === pathValue ? queryShape : k)));
  if (Object.keys(op.query).length > 0) always.push(queryEdge, queryEdge);
  if (op.method === 'GET') return [...always, method];
  if (op.upload) return [...always, upload, upload, upload, upload, upload, contentType, method];
  return [
    ...always,
    malformed,
    contentType,
    field,
    field,
    field,
    edge,
    edge,
    edge,
    full,
    shape,
    nesting,
    size,
    bytes,
    encoding,
    method,
  ];
}

/** A request taking shape: the operation's valid request, with the owner's credential, on real resources where there are any. */
class Draft {
  readonly params: Record<string, string>;
  readonly headers: Record<string, string>;
  readonly base: unknown;

  constructor(
    readonly op: Operation,
    readonly ctx: HostileContext,
    random: Random,
    /** This request's place among the operation's, and how many kinds the operation cycles through. */
    readonly index: number,
    readonly kinds: number,
  ) {
    const real = ctx.realParams(op);
    this.params = Object.fromEntries(
      op.pathParams.map((p) => [p, real?.[p] ?? random.pick(ctx.otherIds)] as [string, string]),
    );
    this.headers = op.authenticated ? { authorization: ctx.owner } : {};
    this.base = op.body ? noNames(exampleOf(op.body)) : op.upload ? undefined : {};
  }

  pathOf(params = this.params, query = this.validQuery()): string {
    const path = this.op.path.replace(/\{([^}]+)\}/g, (_, name: string) => params[name]!);
    return query ? `${path}?${query}` : path;
  }

  /** The operation's required query parameters, with valid values. */
  validQuery(): string {
    return Object.entries(this.op.query)
      .filter(([, schema]) => schema.required)
      .map(([name, schema]) => `${name}=${encodeURIComponent(String(exampleOf(schema, name)))}`)
      .join('&');
  }

  request(what: string, over: Partial<HostileRequest> = {}): HostileRequest {
    const body = this.op.method === 'GET' ? undefined : this.base === undefined ? undefined : toJson(this.base);
    return {
      operation: this.op.key,
      what,
      method: this.op.method,
      path: this.pathOf(),
      headers: { ...this.headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body,
      ...over,
    };
  }

  /** The request with `body` as its JSON text. */
  withJson(what: string, body: string | Uint8Array, type = 'application/json'): HostileRequest {
    return this.request(what, { headers: { ...this.headers, 'content-type': type }, body });
  }
}

/**
 * URLs of the examples pointed at a documentation address (TEST-NET-1, RFC
 * 5737) that the webhook guard refuses at once: no name is looked up and no
 * webhook that could send anywhere is made.
 */
const testNetUrl = 'https://192.0.2.1/hook';
function noNames(value: unknown): unknown {
  if (typeof value === 'string') return /^https?:\/\//.test(value) ? testNetUrl : value;
  if (Array.isArray(value)) return value.map(noNames);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, noNames(v)]));
  return value;
}

/** A JSON token that JSON.stringify cannot write (1e999, -0, a 40-digit integer), kept as written. */
class Raw {
  constructor(readonly text: string) {}
}

/** JSON of a value; `withRaw` for one that may hold Raw tokens (slower: a replacer visits every value). */
function toJson(value: unknown, withRaw = false): string {
  if (!withRaw) return JSON.stringify(value) ?? 'null';
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, v: unknown) =>
    v instanceof Raw ? `\u0000raw${raws.push(v.text) - 1}` : v,
  );
  return (text ?? 'null').replace(/"\\u0000raw(\d+)"/g, (_, i: string) => raws[Number(i)]!);
}

const repeat = (s: string, n: number) => s.repeat(n);
const manyKeys = (n: number, prefix = 'k') =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i]));

/** Values put where the schema wants something else (or something within bounds). */
const hostileValues: Array<[string, unknown]> = [
  ['null', null],
  ['true', true],
  ['0', 0],
  ['-1', -1],
  ['1.5', 1.5],
  ['-0', new Raw('-0')],
  ['1e999', new Raw('1e999')],
  ['-1e999', new Raw('-1e999')],
  ['1e-999', new Raw('1e-999')],
  ['2^53 + 1', new Raw('9007199254740993')],
  ['a 40-digit integer', new Raw(`1${repeat('0', 39)}`)],
  ['2^63', new Raw('9223372036854775808')],
  ['-2^31 - 1', -(2 ** 31) - 1],
  ['the largest double', Number.MAX_VALUE],
  ['an empty string', ''],
  ['a space', ' '],
  ['NUL', '\u0000'],
  ['text with NUL', 'a\u0000b'],
  ['a lone high surrogate', '\ud800'],
  ['a lone low surrogate at the end', 'x\udfff'],
  ['surrogates in the wrong order', '\udc00\ud800'],
  ['100,000 characters', repeat('x', 100_000)],
  ['10,000 emoji', repeat('\u{1F600}', 10_000)],
  ['5,000 combining marks', `e${repeat('\u0301', 5000)}`],
  ['a right-to-left override', '\u202eevil'],
  ['a byte order mark', '\ufeff'],
  ['an operator object', { $gt: '' }],
  ['a $where', { $where: 'sleep(1000)' }],
  ['an empty object', {}],
  ['an empty array', []],
  ['nested arrays', [[[[]]]]],
  ['10,000 numbers', Array.from({ length: 10_000 }, (_, i) => i)],
  ['1,000 strings', Array.from({ length: 1000 }, (_, i) => `s${i}`)],
  ['2,000 keys', manyKeys(2000)],
  ['a numeric string', '1'],
  ['a date after year 275760', '+275760-09-13T00:00:00.001Z'],
  ['year 0', '0000-01-01T00:00:00Z'],
  ['February 30', '2030-02-30T00:00:00Z'],
  ['hour 25', '2030-01-01T25:00:00Z'],
  ['a leap second', '2030-06-30T23:59:60Z'],
  ['the last millisecond of 9999', '9999-12-31T23:59:59.999Z'],
  ['a negative year', '-000001-01-01T00:00:00Z'],
  ['a date 30 years back', '1996-01-01T00:00:00Z'],
  ['a port out of range', 'http://[::1]:99999/'],
  ['a javascript: URL', 'javascript:alert(1)'],
  ['a file: URL', 'file:///etc/passwd'],
  ['a loopback URL', 'http://127.0.0.1:9/'],
  ['a metadata-service URL', 'http://169.254.169.254/latest/meta-data/'],
  ['a URL with credentials', 'https://user:pass@192.0.2.1/'],
  ['a 70,000-character URL', `${testNetUrl}/${repeat('a', 70_000)}`],
  ['a URL of an IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/'],
  ['a URL of a decimal loopback', 'http://2130706433/'],
  ['a 30-digit phone number', `+${repeat('9', 30)}`],
  ['a phone number in letters', '+1-800-FLOWERS'],
  ['a path traversal', '../../../../etc/passwd'],
  ['templates', '${jndi:ldap://x/a}{{7*7}}<%= 7*7 %>'],
  ['a catastrophic pattern', '(a+)+$'],
  ['an unclosed pattern', '(['],
  ['an SQL fragment', "'; DROP TABLE messages; --"],
  ['an HTML script', '<script>alert(1)</script>'],
  ['a 300-character email address', `${repeat('a', 290)}@example.com`],
  ['an email address with NUL', 'a\u0000@example.com'],
  ['__proto__', '__proto__'],
  ['an id of another kind', 'org_AAAAAAAAAAAAAAAAAAAAAA'],
];

/** Path parameter values. */
const hostileIds: string[] = [
  repeat('x', 65),
  repeat('x', 4_000),
  repeat('x', 12_000),
  '%00',
  'a%00b',
  '%2F',
  'a%2Fb',
  '%2e%2e',
  '.',
  '%20',
  '%',
  '%zz',
  '%ED%A0%80',
  '%FF',
  '%C0%AF',
  '%F0%9F%98',
  encodeURIComponent('\u00e9\u{1F600}'),
  '%0D%0ASet-Cookie:%20a=1',
  '%09',
  '%252F',
  'null',
  'undefined',
  '0',
  '-1',
  '1e999',
  'NaN',
  'true',
  '%5B%5D',
  encodeURIComponent('{"$gt":""}'),
  '$where',
  '__proto__',
  'constructor',
  "'%20OR%201=1--",
  '*',
  'a;b=c',
  '~',
  'msg_AAAAAAAAAAAAAAAAAAAAAA',
];

/** Query parameter values, as they go on the wire. */
const hostileQueryValues: string[] = [
  '',
  '-1',
  '0',
  '1e999',
  '99999999999999999999',
  '1.5',
  'NaN',
  'Infinity',
  'null',
  'true',
  '%5B%5D',
  '%7B%7D',
  '%00',
  'a%00b',
  '%ED%A0%80',
  '%FF',
  '%',
  '%zz',
  repeat('x', 10_000),
  '%2B275760-09-13T00:00:00.001Z',
  '2030-02-30T00:00:00Z',
  '0000-01-01T00:00:00Z',
  '1970-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999Z',
  encodeURIComponent('(a+)+$'),
  '.*',
  '*',
  encodeURIComponent('{"$gt":""}'),
  'eyJ',
  Buffer.from('{"id":{"$gt":""}}').toString('base64url'),
  Buffer.from('[1e999]').toString('base64url'),
  Buffer.concat([Buffer.alloc(16), Buffer.from('["x",1]')]).toString('base64url'),
  repeat('A', 600),
  encodeURIComponent('\u{1F600}'),
  '+',
  '%20%20',
];

const credentials: Kind = (d, random, ctx) => {
  const [what, authorization] = random.pick(ctx.badCredentials);
  const headers = { ...d.headers };
  if (authorization === undefined) delete headers.authorization;
  else headers.authorization = authorization;
  const req = d.request(`credential: ${what}`);
  return { ...req, headers: { ...req.headers, ...headers } };
};

const pathValue: Kind = (d, random, ctx) => {
  const name = random.pick(d.op.pathParams);
  const value = random.next() < 0.15 ? random.pick(ctx.otherIds) : random.pick(hostileIds);
  return d.request(`path {${name}} = ${value.slice(0, 40)} (${value.length} chars)`, {
    path: d.pathOf({ ...d.params, [name]: value }),
  });
};

/** Dates every date-time query parameter of an operation is set to at once (a statistics range of ten thousand years). */
const dateRanges: Array<[string, string[]]> = [
  ['ten thousand years', ['0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z']],
  ['an inverted range', ['2030-01-02T00:00:00Z', '2030-01-01T00:00:00Z']],
  ['an empty range', ['2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z']],
  ['a range past year 275760', ['%2B275760-09-13T00:00:00.001Z', '%2B275760-09-14T00:00:00Z']],
];

const queryValue: Kind = (d, random, ctx) => {
  const names = Object.keys(d.op.query);
  const name =
    names.length > 0 && random.next() < 0.9 ? random.pick(names) : random.pick(['unknown', 'after', 'limit']);
  const dates = names.filter((n) => d.op.query[n]!.format === 'date-time');
  if (dates.length > 1 && random.next() < 0.2) {
    const [what, values] = random.pick(dateRanges);
    const query = dates.map((n, i) => `${n}=${values[Math.min(i, values.length - 1)]}`).join('&');
    return d.request(`query dates: ${what}`, { path: d.pathOf(d.params, `${query}&interval=hour`) });
  }
  const value = name === 'after' && random.next() < 0.3 ? random.pick(ctx.cursors) : random.pick(hostileQueryValues);
  const valid = d
    .validQuery()
    .split('&')
    .filter((p) => p && !p.startsWith(`${name}=`));
  return d.request(`query ${name} = ${value.slice(0, 40)} (${value.length} chars)`, {
    path: d.pathOf(d.params, [...valid, `${name}=${value}`].join('&')),
  });
};

const queryShape: Kind = (d, random) => {
  const name = Object.keys(d.op.query)[0] ?? 'limit';
  const shapes: Array<[string, () => string]> = [
    ['a repeated parameter', () => `${name}=1&${name}=2&${name}=x`],
    ['an array parameter', () => `${name}[]=1&${name}[]=2`],
    ['an operator parameter', () => `${name}[$gt]=&${name}[$ne]=1`],
    ['__proto__', () => '__proto__[x]=1&constructor[prototype][x]=1'],
    ['1,000 parameters', () => Array.from({ length: 1000 }, (_, i) => `p${i}=${i}`).join('&')],
    ['a 12,000-character value', () => `${name}=${repeat('x', 12_000)}`],
    ['separators only', () => '&&&&=&=='],
    ['encoded separators', () => `${name}%3D1%26x%3D2`],
    ['a name without a value', () => name],
    ['a question mark in the query', () => `${name}=1?${name}=2`],
    ['a NUL in a name', () => `a%00b=1`],
  ];
  const [what, make] = random.pick(shapes);
  const query = make();
  return d.request(`query: ${what}`, { path: d.pathOf(d.params, query) });
};

const header: Kind = (d, random, ctx) => {
  const headers: Array<[string, () => Record<string, string>]> = [
    ['X-Team-Id empty', () => ({ 'x-team-id': '' })],
    ['X-Team-Id of no team', () => ({ 'x-team-id': 'team_AAAAAAAAAAAAAAAAAAAAAA' })],
    ['X-Team-Id of another kind', () => ({ 'x-team-id': random.pick(ctx.otherIds) })],
    ['X-Team-Id of 1,000 characters', () => ({ 'x-team-id': repeat('t', 1000) })],
    ['Idempotency-Key empty', () => ({ 'idempotency-key': '' })],
    ['Idempotency-Key of 10,000 characters', () => ({ 'idempotency-key': repeat('k', 10_000) })],
    ['Idempotency-Key of Latin-1 bytes', () => ({ 'idempotency-key': '\u00ff\u00fe\u00e9' })],
    ['traceparent garbage', () => ({ traceparent: 'garbage' })],
    ['traceparent all zeros', () => ({ traceparent: `00-${repeat('0', 32)}-${repeat('0', 16)}-01` })],
    ['traceparent version ff', () => ({ traceparent: `ff-${repeat('a', 32)}-${repeat('b', 16)}-01` })],
    [
      'tracestate of 10,000 characters',
      () => ({ traceparent: `00-${repeat('a', 32)}-${repeat('b', 16)}-01`, tracestate: repeat('a=b,', 2500) }),
    ],
    ['X-Request-Id of 10,000 characters', () => ({ 'x-request-id': repeat('r', 10_000) })],
    ['X-Request-Id with spaces and slashes', () => ({ 'x-request-id': 'a b/../c' })],
    ['Accept XML', () => ({ accept: 'application/xml' })],
    ['Accept garbage', () => ({ accept: '*/*;q=abc, ;;, text/html;level=x' })],
    ['Accept-Encoding odd weights', () => ({ 'accept-encoding': 'gzip;q=NaN, br;q=2, deflate;q=-1' })],
    ['Accept-Encoding every coding', () => ({ 'accept-encoding': 'zstd, br, gzip, deflate, compress, x-gzip, *' })],
    ['Accept-Encoding nothing acceptable', () => ({ 'accept-encoding': 'identity;q=0, *;q=0' })],
    ['X-Forwarded-For garbage', () => ({ 'x-forwarded-for': 'garbage, ::ffff:999.1.1.1, ' })],
    ['a session cookie of garbage', () => ({ cookie: `relaybox_session=${repeat('x', 4000)}; relaybox_csrf=%00` })],
    ['cookies of separators', () => ({ cookie: '=;=;;a=;=b' })],
    ['Origin null', () => ({ origin: 'null' })],
    ['Origin elsewhere', () => ({ origin: 'https://evil.example' })],
    ['200 header fields', () => manyKeysOf(200)],
    ['header fields over the limit', () => ({ 'x-large': repeat('x', ctx.maxHeaderBytes + 1) })],
    ['If-None-Match and Range', () => ({ 'if-none-match': '*', range: 'bytes=0-0,0-0,0-0' })],
  ];
  const [what, make] = random.pick(headers);
  const extra = make();
  const req = d.request(`header: ${what}`);
  const fields = { ...req.headers, ...extra };
  return { ...req, headers: fields };
};

const manyKeysOf = (n: number) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-field-${i}`, `value ${i}`])) as Record<string, string>;

const method: Kind = (d, random) => {
  const other = random.pick(
    ['PROPFIND', 'OPTIONS', 'PATCH', 'PUT', 'POST', 'DELETE', 'GET'].filter((m) => m !== d.op.method),
  );
  const req = d.request(`method ${other}`, { method: other });
  return other === 'GET' ? { ...req, body: undefined } : req;
};

const malformed: Kind = (d, random) => {
  const json = toJson(d.base);
  const texts: Array<[string, () => string]> = [
    ['an open brace', () => '{'],
    ['a missing value', () => '{"a":}'],
    ['single quotes', () => json.replace(/"/g, "'")],
    ['a trailing comma', () => `${json.slice(0, -1)},}`],
    ['NaN', () => '{"a":NaN}'],
    ['Infinity', () => '{"a":Infinity}'],
    ['a hex number', () => '{"a":0x10}'],
    ['a leading zero', () => '{"a":01}'],
    ['trailing garbage', () => `${json}garbage`],
    ['two documents', () => `${json}${json}`],
    ['half a document', () => json.slice(0, Math.max(1, json.length >> 1))],
    ['a byte order mark', () => `\ufeff${json}`],
    ['a bad escape', () => '{"a":"\\x41"}'],
    ['a short unicode escape', () => '{"a":"\\u12"}'],
    ['a raw tab in a string', () => '{"a":"a\tb"}'],
    ['a comment', () => `/* c */${json}`],
    ['undefined', () => 'undefined'],
    ['a bare word', () => 'nul'],
    ['white space only', () => ' \n\t '],
    ['an unterminated string', () => `"${repeat('a', 1000)}`],
  ];
  const [what, make] = random.pick(texts);
  const text = make();
  return d.withJson(`malformed JSON: ${what}`, text);
};

const contentType: Kind = (d, random) => {
  const json = d.base === undefined ? '{}' : toJson(d.base);
  const types: Array<string | undefined> = [
    undefined,
    'text/plain',
    'application/xml',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'multipart/form-data',
    'application/json; charset=utf-16',
    'application/json; charset=iso-8859-1',
    'APPLICATION/JSON',
    'application/json;;;=',
    'application/jsonx',
    'application/json-patch+json',
    '*/*',
    `application/${repeat('x', 4000)}`,
    'json',
    'text/csv',
  ];
  const type = random.pick(types);
  if (type === undefined)
    return d.request('no content type', { headers: { ...d.headers }, body: new TextEncoder().encode(json) });
  return d.withJson(`content type ${type.slice(0, 60)}`, json, type);
};

/** Every pointer into a value, and the object properties the schema knows that the value lacks. */
function pointersOf(value: unknown, schema: Record<string, any> | undefined, at: string[] = []): string[][] {
  const found: string[][] = at.length > 0 ? [at] : [];
  if (Array.isArray(value)) value.forEach((v, i) => found.push(...pointersOf(v, schema?.items, [...at, String(i)])));
  else if (value !== null && typeof value === 'object') {
    const props: Record<string, any> = schema?.properties ?? {};
    for (const [k, v] of Object.entries(value)) found.push(...pointersOf(v, props[k], [...at, k]));
    for (const k of Object.keys(props)) if (!(k in value)) found.push([...at, k]);
  }
  return found;
}

function withValueAt(base: unknown, at: string[], value: unknown): unknown {
  const copy = structuredClone(base) as Record<string, unknown>;
  let node: any = copy;
  for (const key of at.slice(0, -1)) node = node[key];
  node[at[at.length - 1]!] = value;
  return copy;
}

/** The schema of the value at `at` in a value of `schema`, as far as it can be told. */
function schemaAt(schema: Record<string, any> | undefined, at: string[]): Record<string, any> | undefined {
  let node = schema;
  for (const key of at) {
    if (!node) return undefined;
    const choices: Array<Record<string, any>> | undefined = node.anyOf ?? node.oneOf;
    if (choices && !node.properties && !node.items)
      node = choices.find((c) => c.properties?.[key] || c.items) ?? choices[0];
    node = /^\d+$/.test(key) && node?.items ? node.items : node?.properties?.[key];
  }
  return node;
}

/** Valid values at the edges of a schema: its bounds, its every choice, its longest and oddest strings. */
function edgeValues(schema: Record<string, any>, name: string): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const choice of schema.anyOf ?? schema.oneOf ?? []) out.push(...edgeValues(choice, name));
  if (Array.isArray(schema.enum)) out.push(...schema.enum.map((v: unknown): [string, unknown] => [`choice ${v}`, v]));
  if ('const' in schema) out.push(['its constant', schema.const]);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'integer' || type === 'number') {
    if (schema.minimum !== undefined) out.push(['the minimum', schema.minimum]);
    if (schema.maximum !== undefined) out.push(['the maximum', schema.maximum]);
    if (schema.exclusiveMaximum !== undefined) out.push(['just under the maximum', schema.exclusiveMaximum - 1]);
    if (schema.maximum === undefined) out.push(['2^53', 2 ** 53], ['1e308', 1e308]);
    if (schema.minimum === undefined) out.push(['-1e308', -1e308], ['-1', -1]);
    if (type === 'number') out.push(['0.1 + 0.2', 0.1 + 0.2], ['5e-324', 5e-324]);
  }
  if (type === 'boolean') out.push(['false', false], ['true', true]);
  if (type === 'string' && !schema.enum) {
    const max: number = Math.min(schema.maxLength ?? 20_000, 100_000);
    if (schema.format === 'date-time')
      out.push(
        ['the first day of year 1', '0001-01-01T00:00:00Z'],
        ['the epoch', '1970-01-01T00:00:00Z'],
        ['the last second of 9999', '9999-12-31T23:59:59Z'],
        ['a +14:00 offset', '2030-01-01T00:00:00+14:00'],
        ['nanoseconds', '2030-01-01T00:00:00.123456789Z'],
        ['a lower-case t and z', '2030-01-01t00:00:00z'],
        ['now', new Date().toISOString()],
        ['89 days ahead', new Date(Date.now() + 89 * 86_400_000).toISOString()],
      );
    else if (schema.format === 'email')
      out.push(['a long address', `${repeat('a', 64)}@${repeat('b', 60)}.example.com`], ['a plus address', 'a+b@x.io']);
    else if (schema.format === 'uri' || /url$/i.test(name))
      out.push(['a long URL', `${testNetUrl}/${repeat('p', Math.max(0, max - testNetUrl.length - 1))}`]);
    else if (schema.format)
      out.push(['another valid number', '+4915150000001'], ['a formatted number', '+1 (415) 555-0100']);
    else
      out.push(
        ['the longest', repeat('x', max)],
        ['the longest in emoji', repeat('\u{1F600}', Math.floor(max / 2))],
        ['the longest in combining marks', `e${repeat('\u0301', Math.max(0, max - 1))}`],
        ['zero-width and right-to-left text', '\u200b\u202e\u2066x\ufeff'],
        ['the shortest', repeat('x', schema.minLength ?? 0)],
        ['text like a template', '{{firstName}} ${x} %s %n'],
        ['a catastrophic pattern', '(a+)+$'],
      );
  }
  if (type === 'array') {
    const item = exampleOf(schema.items ?? {}, name);
    out.push(
      ['no items', []],
      [
        `${Math.min(schema.maxItems ?? 1000, 10_000)} items`,
        new Array(Math.min(schema.maxItems ?? 1000, 10_000)).fill(noNames(item)),
      ],
    );
  }
  if (type === 'object' && schema.properties)
    out.push([
      'every field',
      Object.fromEntries(
        Object.entries<Record<string, any>>(schema.properties).map(([k, v]) => [k, noNames(exampleOf(v, k))]),
      ),
    ]);
  return out;
}

const edge: Kind = (d, random) => {
  const pointers = pointersOf(d.base, d.op.body);
  const at = pointers.length > 0 ? random.pick(pointers) : ['field'];
  const values = edgeValues(schemaAt(d.op.body, at) ?? {}, at[at.length - 1]!);
  const [what, value] = values.length > 0 ? random.pick(values) : random.pick(hostileValues);
  const base = d.base !== null && typeof d.base === 'object' ? d.base : {};
  return d.withJson(`edge /${at.join('/')} = ${what}`, toJson(withValueAt(base, at, value)));
};

/** The body with every field the schema has, each a valid value (the request most likely to get past validation). */
const full: Kind = (d) => {
  const every = edgeValues({ ...d.op.body, type: 'object' }, '').find(([what]) => what === 'every field');
  const base = d.base !== null && typeof d.base === 'object' ? d.base : {};
  return d.withJson('every field', toJson({ ...(every?.[1] as object), ...base }));
};

const queryEdge: Kind = (d, random) => {
  const name = random.pick(Object.keys(d.op.query));
  const values = edgeValues(d.op.query[name]!, name).filter(([, v]) => typeof v !== 'object');
  if (values.length === 0) return queryValue(d, random, d.ctx);
  const [what, value] = random.pick(values);
  const valid = d
    .validQuery()
    .split('&')
    .filter((p) => p && !p.startsWith(`${name}=`));
  return d.request(`query ${name} = ${what}`, {
    path: d.pathOf(d.params, [...valid, `${name}=${encodeURIComponent(String(value))}`].join('&')),
  });
};

const field: Kind = (d, random) => {
  const pointers = pointersOf(d.base, d.op.body);
  const at = pointers.length > 0 ? random.pick(pointers) : ['field'];
  const [what, value] = random.pick(hostileValues);
  const base = d.base !== null && typeof d.base === 'object' ? d.base : {};
  return d.withJson(`field /${at.join('/')} = ${what}`, toJson(withValueAt(base, at, value), value instanceof Raw));
};

const mapValues = (value: unknown, f: (v: unknown) => unknown) =>
  value !== null && typeof value === 'object' && !Array.isArray(value)
    ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, f(v)]))
    : f(value);

const shape: Kind = (d, random) => {
  const base = d.base !== null && typeof d.base === 'object' ? d.base : {};
  const json = toJson(base);
  const rest = json.length > 2 ? `,${json.slice(1)}` : '}';
  const shapes: Array<[string, () => string]> = [
    ['the body in an array', () => toJson([base])],
    ['the body in two arrays', () => toJson([[base]])],
    ['null', () => 'null'],
    ['a number', () => '42'],
    ['a string', () => '"text"'],
    ['true', () => 'true'],
    ['an empty array', () => '[]'],
    ['an empty object', () => '{}'],
    ['an unknown field', () => toJson({ ...base, unknownField: 1 })],
    ['a 10,000-character field name', () => toJson({ ...base, [repeat('k', 10_000)]: 1 })],
    ['2,000 unknown fields', () => toJson({ ...base, ...manyKeys(2000, 'unknown') })],
    ['__proto__', () => `{"__proto__":{"role":"owner","polluted":true}${rest}`],
    ['constructor.prototype', () => `{"constructor":{"prototype":{"polluted":true}}${rest}`],
    ['a duplicated field', () => (json.length > 2 ? `${json.slice(0, -1)},${json.slice(1)}` : '{"a":1,"a":2}')],
    ['each field in an array', () => toJson(mapValues(base, (v) => [v]))],
    ['each field in an object', () => toJson(mapValues(base, (v) => ({ value: v })))],
    ['each field null', () => toJson(mapValues(base, () => null))],
    [
      'each field a number',
      () =>
        toJson(
          mapValues(base, () => new Raw('1e999')),
          true,
        ),
    ],
  ];
  const [what, make] = random.pick(shapes);
  const text = make();
  return d.withJson(`body shape: ${what}`, text);
};

const nesting: Kind = (d, random) => {
  const depth = random.pick([65, 1_000, 100_000]);
  const texts: Array<[string, () => string]> = [
    ['arrays', () => `${repeat('[', depth)}${repeat(']', depth)}`],
    ['objects', () => `${repeat('{"a":', depth)}1${repeat('}', depth)}`],
    ['arrays in a field', () => `{"a":${repeat('[', depth)}${repeat(']', depth)}}`],
    ['unclosed arrays', () => repeat('[', depth)],
  ];
  const [what, make] = random.pick(texts);
  const text = make();
  return d.withJson(`${what} nested ${depth} levels`, text);
};

/** `json` (an object's JSON) with one more field, its value `valueJson` as written. */
function withField(json: string, name: string, valueJson: string): string {
  const rest = json.length > 2 ? `,${json.slice(1)}` : '}';
  return `{${JSON.stringify(name)}:${valueJson}${rest}`;
}

/** Large parts of bodies, made once. */
const large = {
  numbers: `[${Array.from({ length: 50_000 }, (_, i) => i).join(',')}]`,
  fields: JSON.stringify(manyKeys(10_000)).slice(1, -1),
  escapes: `"${repeat('\\u0041', 50_000)}"`,
  spaces: repeat(' ', 100_000),
};

const size: Kind = (d, random, ctx) => {
  const limit = ctx.maxBodyBytes(d.op);
  const json = d.base !== null && typeof d.base === 'object' && !Array.isArray(d.base) ? toJson(d.base) : '{}';
  // The body over the limit once per operation (a megabyte or ten each, the first time): the rest stay under it.
  if (d.index < d.kinds) {
    const body = withField(json, 'pad', `"${repeat('x', limit + 1 - withField(json, 'pad', '""').length)}"`);
    return d.withJson(`a body of ${body.length} bytes (the limit is ${limit})`, body);
  }
  const bodies: Array<[string, () => string]> = [
    ['a 200,000-character string', () => withField(json, 'note', `"${repeat('x', 200_000)}"`)],
    ['200,000 spaces around the body', () => `${large.spaces}${json}${large.spaces}`],
    ['50,000 numbers', () => withField(json, 'list', large.numbers)],
    ['10,000 fields', () => (json.length > 2 ? `{${large.fields},${json.slice(1)}` : `{${large.fields}}`)],
    ['5,000 copies in an array', () => `[${new Array<string>(5_000).fill(json).join(',')}]`],
    ['50,000 escapes', () => withField(json, 'a', large.escapes)],
  ];
  const [what, make] = random.pick(bodies);
  return d.withJson(what, make());
};

const bytes: Kind = (d, random) => {
  const json = toJson(d.base ?? {});
  const at = json.indexOf('":"');
  const inject = (raw: number[]) => {
    const b = Buffer.from(json);
    if (at < 0) return Buffer.concat([Buffer.from('{"a":"'), Buffer.from(raw), Buffer.from('"}')]);
    return Buffer.concat([b.subarray(0, at + 3), Buffer.from(raw), b.subarray(at + 3)]);
  };
  const bodies: Array<[string, () => Uint8Array]> = [
    ['bytes FF FE in a string', () => inject([0xff, 0xfe])],
    ['an encoded surrogate (ED A0 80) in a string', () => inject([0xed, 0xa0, 0x80])],
    ['an overlong slash (C0 AF) in a string', () => inject([0xc0, 0xaf])],
    ['a raw NUL byte in a string', () => inject([0])],
    ['a raw escape character in a string', () => inject([0x1b, 0x1f])],
    ['a truncated UTF-8 sequence in a string', () => inject([0xf0, 0x9f, 0x98])],
    ['the body in UTF-16 with a BOM', () => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(json, 'utf16le')])],
    ['4,096 random bytes', () => Uint8Array.from({ length: 4096 }, () => random.int(256))],
    ['a NUL byte before the body', () => Buffer.concat([Buffer.from([0]), Buffer.from(json)])],
  ];
  const [what, make] = random.pick(bodies);
  return d.withJson(what, make());
};

let gzipBomb: Buffer | undefined;

const encoding: Kind = (d, random) => {
  const json = toJson(d.base ?? {});
  const bodies: Array<[string, string, () => string | Uint8Array]> = [
    ['a gzip body', 'gzip', () => gzipSync(json)],
    ['a gzip bomb (20 MB of zeros)', 'gzip', () => (gzipBomb ??= gzipSync(Buffer.alloc(20 * 1024 * 1024)))],
    ['br over plain JSON', 'br', () => json],
    ['gzip over plain JSON', 'gzip', () => json],
    ['an unknown coding', 'x-unknown, gzip', () => json],
  ];
  const [what, coding, make] = random.pick(bodies);
  const req = d.withJson(`content encoding: ${what}`, make());
  return { ...req, headers: { ...req.headers, 'content-encoding': coding } };
};

/** A multipart upload with one file (or none), as a browser sends it. */
function form(files: Array<[string, string | Uint8Array, string | undefined]>, extra: Record<string, string> = {}) {
  const data = new FormData();
  for (const [name, content, filename] of files) {
    const blob = new Blob([content]);
    if (filename === undefined) data.append(name, blob);
    else data.append(name, blob, filename);
  }
  for (const [k, v] of Object.entries(extra)) data.append(k, v);
  return data;
}

const upload: Kind = (d, random, ctx) => {
  const deep = (n: number) => `${repeat('[', n)}${repeat(']', n)}`;
  const csvRows = (n: number, row: string) => `firstName,notes\r\n${Array.from({ length: n }, () => row).join('\r\n')}`;
  const uploads: Array<[string, () => FormData | [string, string | Uint8Array]]> = [
    ['a JSON file nested 100,000 levels', () => form([['file', deep(100_000), 'contacts.json']])],
    ['a JSON file nested 65 levels', () => form([['file', `[{"firstName":${deep(65)}}]`, 'contacts.json']])],
    ['a JSON object, not a list', () => form([['file', '{"firstName":"Ada"}', 'contacts.json']])],
    ['a JSON list of scalars', () => form([['file', '[null,1,"x",true,[],1e999]', 'contacts.json']])],
    ['a JSON file of 2,000 fields', () => form([['file', toJson([manyKeys(2000)]), 'contacts.json']])],
    [
      'a JSON file with hostile values',
      () =>
        form([
          [
            'file',
            toJson(
              hostileValues.map(([, v]) => ({ firstName: v, phoneNumbers: [v], tags: v, notes: v })),
              true,
            ),
            'contacts.json',
          ],
        ]),
    ],
    ['malformed JSON', () => form([['file', '[{"firstName":"Ada",}', 'contacts.json']])],
    ['a CSV with NUL and surrogates', () => form([['file', csvRows(3, 'a\u0000b,\ud800'), 'contacts.csv']])],
    [
      'a CSV with an unterminated quote',
      () => form([['file', 'firstName,notes\r\n"Ada,x\r\nGrace,y', 'contacts.csv']]),
    ],
    [
      'a CSV of 5,000 columns',
      () =>
        form([
          [
            'file',
            `${Array.from({ length: 5000 }, (_, i) => `c${i}`).join(',')}\r\n${repeat('x,', 4999)}x`,
            'contacts.csv',
          ],
        ]),
    ],
    [
      'a CSV line of 500,000 characters',
      () => form([['file', `firstName\r\n${repeat('x', 500_000)}`, 'contacts.csv']]),
    ],
    ['a CSV of 20,000 empty rows', () => form([['file', csvRows(20_000, ','), 'contacts.csv']])],
    ['a CSV of formulas', () => form([['file', csvRows(3, '=cmd|"/c calc"!A1,@SUM(1)'), 'contacts.csv']])],
    [
      'a CSV in UTF-16',
      () =>
        form([
          [
            'file',
            Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(csvRows(2, 'Ada,x'), 'utf16le')]),
            'contacts.csv',
          ],
        ]),
    ],
    [
      'a CSV with invalid UTF-8',
      () =>
        form([
          [
            'file',
            Buffer.concat([Buffer.from('firstName\r\n'), Buffer.from([0xff, 0xfe, 0xed, 0xa0, 0x80])]),
            'contacts.csv',
          ],
        ]),
    ],
    ['random bytes', () => form([['file', Uint8Array.from({ length: 4096 }, () => random.int(256)), 'contacts.csv']])],
    ['an empty file', () => form([['file', '', 'contacts.csv']])],
    ['a file over the limit', () => form([['file', repeat('x', ctx.maxBodyBytes(d.op) + 1), 'contacts.csv']])],
    ['a file of an unknown type', () => form([['file', 'MZ\u0090\u0000', 'contacts.exe']])],
    ['a file name of 10,000 characters', () => form([['file', csvRows(1, 'Ada,x'), `${repeat('a', 10_000)}.csv`]])],
    ['a file name with a path', () => form([['file', csvRows(1, 'Ada,x'), '../../etc/passwd.csv']])],
    ['a file without a name', () => form([['file', csvRows(1, 'Ada,x'), undefined]])],
    ['a file in another field', () => form([['other', csvRows(1, 'Ada,x'), 'contacts.csv']])],
    [
      'two files',
      () =>
        form([
          ['file', csvRows(1, 'Ada,x'), 'a.csv'],
          ['file', '[]', 'b.json'],
        ]),
    ],
    ['no file, only fields', () => form([], { file: 'not a file', format: 'json' })],
    ['2,000 fields beside the file', () => form([['file', csvRows(1, 'Ada,x'), 'c.csv']], manyKeysOf(2000))],
    ['multipart without a boundary', () => ['multipart/form-data', '--x\r\n\r\n--x--']],
    [
      'multipart with another boundary',
      () => [
        'multipart/form-data; boundary=y',
        '--x\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nfirstName\r\nAda\r\n--x--',
      ],
    ],
    [
      'unterminated multipart',
      () => [
        'multipart/form-data; boundary=x',
        '--x\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nfirstName\r\nAda',
      ],
    ],
    [
      'a 200-character boundary',
      () => [`multipart/form-data; boundary=${repeat('b', 200)}`, `--${repeat('b', 200)}--`],
    ],
    [
      'a part header of 20,000 characters',
      () => [
        'multipart/form-data; boundary=x',
        `--x\r\nContent-Disposition: form-data; name="file"; filename="${repeat('a', 20_000)}"\r\n\r\nx\r\n--x--`,
      ],
    ],
    ['a CSV sent as text/csv', () => ['text/csv', csvRows(2, 'Ada,x')]],
    ['JSON sent as application/json', () => ['application/json', '[{"firstName":"Ada"}]']],
  ];
  const [what, make] = random.pick(uploads);
  const made = make();
  const headers = { ...d.headers };
  if (made instanceof FormData) return d.request(`upload: ${what}`, { headers, body: made });
  return d.request(`upload: ${what}`, { headers: { ...headers, 'content-type': made[0] }, body: made[1] });
};
