import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import { Type } from '@sinclair/typebox';
import uWS, { type HttpRequest, type HttpResponse, type TemplatedApp, type us_listen_socket } from '@trufflesuite/uws-js-unofficial';
import type { Config } from '../config.ts';
import { AppError, toHttpError, type ErrorDetail } from '../errors.ts';
import type { Logger } from '../log.ts';
import { encodeAnswer } from './compression.ts';
import { collectProcessMetrics, httpDuration, metricsRegistry, stageDuration } from './metrics.ts';
import { apiDocumentRoutes } from './api-documents.ts';
import { allowedMethods, clientAddress, copyHeaders } from './request-guard.ts';
import { neededRole } from './roles-needed.ts';

export { neededRole };
import { anyObject, type AuthenticateHook, type AuthorizeHook, type Method, type RateLimitHook, type Reply, type RequestContext, type RouteDef } from './route.ts';
import { compileValidator, jsonMayBreakTextRule, validationFailure, type Validator } from './validation.ts';

export interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

export interface HttpServerOptions {
  config: Config;
  log: Logger;
  routes: RouteDef[];
  authenticate?: AuthenticateHook;
  authorize?: AuthorizeHook;
  rateLimit?: RateLimitHook;
  /** Charges a `limitPerAddress` route to the client address's budget. */
  limitAddress?: RateLimitHook;
  readinessChecks?: ReadinessCheck[];
}

export interface HttpServer {
  app: TemplatedApp;
  routes: RouteDef[];
  listen(host: string, port: number): Promise<number>;
  close(): Promise<void>;
}

type StageName = 'auth' | 'rate_limit' | 'validate' | 'handler';

interface CompiledRoute {
  def: RouteDef;
  /** Histogram children resolved once, not per request. */
  stages: Record<StageName, { observe(seconds: number): void }>;
  paramNames: string[];
  params?: Validator;
  query?: Validator;
  body?: Validator;
}

const requestIdPattern = /^[A-Za-z0-9._-]{1,128}$/;

const statusLine = (status: number) => `${status} ${STATUS_CODES[status] ?? ''}`;

/** Wraps a uWS response so nothing is written after the client went away. */
class Responder {
  aborted = false;
  done = false;
  private paused = false;
  constructor(private readonly res: HttpResponse) {}

  /**
   * Stops reading the connection once the request is complete, until it is
   * answered: uWS closes a connection on which a request arrives while the
   * previous answer is pending, so a pipelined request that comes in a later
   * read waits in the socket instead, and is answered in order.
   */
  pauseReading(): void {
    if (this.aborted || this.done || this.paused) return;
    this.paused = true;
    this.res.pause();
  }

  private resumeReading(): void {
    if (this.paused) this.res.resume();
    this.paused = false;
  }

  send(status: number, headers: Record<string, string>, body: string | Buffer, closeConnection = false): void {
    if (this.aborted || this.done) return;
    this.done = true;
    this.res.cork(() => {
      this.resumeReading();
      this.res.writeStatus(statusLine(status));
      for (const [k, v] of Object.entries(headers)) this.res.writeHeader(k, v);
      this.res.end(body, closeConnection);
    });
  }

  /**
   * Reading stays paused until the last chunk: uWS's resume() arms its 10 s
   * HTTP timeout, and a write that succeeds does not re-arm or clear it (only
   * a write that met backpressure does, through onWritable), so a stream that
   * outlasted it without meeting backpressure (a slow store's pages, or rows
   * compressed small enough for the socket buffers) was cut before its end.
   * Paused, the timeout stays off while chunks come, as for any pending
   * answer; a client that stops reading still meets the timeout through a
   * failed write.
   */
  async stream(status: number, headers: Record<string, string>, chunks: AsyncIterable<string | Buffer>): Promise<void> {
    if (this.aborted || this.done) return;
    this.done = true;
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status));
      for (const [k, v] of Object.entries(headers)) this.res.writeHeader(k, v);
    });
    try {
      for await (const chunk of chunks) {
        if (this.aborted) return;
        let ok = false;
        this.res.cork(() => {
          ok = this.res.write(chunk);
        });
        if (!ok) await new Promise<void>((resolve) => this.res.onWritable(() => (resolve(), true)));
      }
    } catch (err) {
      // The status line is out already: the only honest signal left is a connection cut before the end.
      if (!this.aborted) this.res.close();
      throw err;
    }
    if (this.aborted) return;
    this.res.cork(() => {
      this.resumeReading();
      this.res.end();
    });
  }
}

function readBody(res: HttpResponse, responder: Responder, limit: number): Promise<Buffer | 'too_large' | 'aborted'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    res.onData((chunk, isLast) => {
      if (responder.aborted) return resolve('aborted');
      if (over) return;
      size += chunk.byteLength;
      if (size > limit) {
        over = true;
        return resolve('too_large');
      }
      // uWS reuses the chunk's memory after this callback: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
      if (isLast) {
        responder.pauseReading();
        resolve(Buffer.concat(chunks, size));
      }
    });
  });
}

export function createHttpServer(opts: HttpServerOptions): HttpServer {
  const { config, log } = opts;
  collectProcessMetrics();
  const app = uWS.App();
  const builtIns = builtInRoutes(opts);
  const routes = [...builtIns, ...opts.routes];
  routes.push(...apiDocumentRoutes(routes, { publicBaseUrl: config.publicBaseUrl }));

  for (const def of routes) {
    const compiled: CompiledRoute = {
      def,
      stages: {
        auth: stageDuration.labels(def.path, 'auth'),
        rate_limit: stageDuration.labels(def.path, 'rate_limit'),
        validate: stageDuration.labels(def.path, 'validate'),
        handler: stageDuration.labels(def.path, 'handler'),
      },
      paramNames: [...def.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!),
      params: def.schema?.params ? compileValidator(def.schema.params, 'params') : undefined,
      query: def.schema?.query ? compileValidator(def.schema.query, 'query') : undefined,
      body: def.schema?.body ? compileValidator(def.schema.body, 'body') : undefined,
    };
    const uwsMethod = def.method === 'DELETE' ? 'del' : (def.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch');
    const register = app[uwsMethod].bind(app);
    register(def.path, (res, req) => handle(res, req, compiled));
  }
  app.any('/*', (res, req) => handle(res, req, undefined));
  const methodsServing = allowedMethods(routes);

  function handle(res: HttpResponse, req: HttpRequest, route: CompiledRoute | undefined): void {
    const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
    const responder = new Responder(res);
    res.onAborted(() => {
      responder.aborted = true;
    });
    // Everything needed from req is copied now: req is invalid after the first await.
    const { headers, refusal } = copyHeaders(req, config.maxHeaderBytes);
    const incomingId = headers['x-request-id'];
    const reqId = incomingId && requestIdPattern.test(incomingId) ? incomingId : randomUUID();
    const method = req.getMethod().toUpperCase() as Method;
    const params: Record<string, string> = {};
    route?.paramNames.forEach((name, i) => {
      params[name] = decodePathSegment(req.getParameter(i) ?? '');
    });
    const ctx: RequestContext = {
      reqId,
      method,
      path: req.getUrl(),
      route: route?.def.path ?? 'unmatched',
      params,
      query: queryOf(req.getQuery()),
      headers,
      body: undefined,
      rawBody: undefined,
      ip: clientAddress(peer, headers['x-forwarded-for'], config.trustedProxyHops),
      get log() {
        // Made on first use: most requests never log beyond the access line.
        const child = log.child({ reqId });
        Object.defineProperty(this, 'log', { value: child });
        return child;
      },
      principal: undefined,
      responseHeaders: {},
      startedAt: performance.now(),
    };
    if (refusal) return refuseBeforeReading(ctx, responder, refusal);
    const hasBody = method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE';
    const limit = route?.def.maxBodyBytes ?? config.maxBodyBytes;
    const body = hasBody ? readBody(res, responder, limit) : undefined;
    if (!hasBody) responder.pauseReading();
    run(ctx, route, responder, body).catch((err) => ctx.log.error({ err }, 'failed to answer a request'));
  }

  async function run(ctx: RequestContext, route: CompiledRoute | undefined, responder: Responder, body: Promise<Buffer | 'too_large' | 'aborted'> | undefined): Promise<void> {
    let reply: Reply;
    let closeConnection = false;
    try {
      if (!route) throw noRoute(ctx);
      const raw = body ? await body : undefined;
      if (raw === 'aborted') return;
      if (!safeMethods.has(ctx.method) && !(await stillConnected(responder))) return;
      if (raw === 'too_large') {
        closeConnection = true;
        throw new AppError('payload_too_large', `the body is larger than ${route.def.maxBodyBytes ?? config.maxBodyBytes} bytes`);
      }
      reply = await runRoute(ctx, route, raw);
    } catch (err) {
      const error = toHttpError(err);
      if (error.statusCode >= 500) ctx.log.error({ err, route: ctx.route }, 'request failed');
      reply = errorReply(error);
    }
    if (responder.aborted) return;
    const headers: Record<string, string> = { 'x-request-id': ctx.reqId, ...ctx.responseHeaders, ...reply.headers };
    if (reply.stream) {
      const encoded = await encodeAnswer(ctx.headers['accept-encoding'], headers, { stream: reply.stream }, config.compressMinBytes);
      await responder.stream(reply.status, headers, encoded.stream!);
    } else if (reply.body === undefined) {
      responder.send(reply.status, headers, '', closeConnection);
    } else {
      const text = typeof reply.body === 'string' || Buffer.isBuffer(reply.body) ? reply.body : JSON.stringify(reply.body);
      headers['content-type'] ??= 'application/json; charset=utf-8';
      const encoded = await encodeAnswer(ctx.headers['accept-encoding'], headers, { body: text }, config.compressMinBytes);
      responder.send(reply.status, headers, encoded.body!, closeConnection);
    }
    const seconds = (performance.now() - ctx.startedAt) / 1000;
    durationOf(ctx.route, ctx.method, reply.status).observe(seconds);
    log.info({ reqId: ctx.reqId, method: ctx.method, route: ctx.route, status: reply.status, ms: Math.round(seconds * 1000 * 100) / 100 }, 'request');
  }

  async function runRoute(ctx: RequestContext, route: CompiledRoute, raw: Buffer | undefined): Promise<Reply> {
    const def = route.def;
    let mark = performance.now();
    const stage = (name: StageName) => {
      const now = performance.now();
      route.stages[name].observe((now - mark) / 1000);
      mark = now;
    };
    if (def.auth !== false) {
      if (!opts.authenticate) throw new AppError('unauthorized', 'missing or invalid credentials');
      ctx.principal = await opts.authenticate(ctx);
      stage('auth');
      if (opts.rateLimit) {
        const refused = await opts.rateLimit(ctx);
        stage('rate_limit');
        if (refused) throw refused;
      }
      opts.authorize?.(ctx.principal, neededRole(def));
    } else if (def.limitPerAddress && opts.limitAddress) {
      const refused = await opts.limitAddress(ctx);
      stage('rate_limit');
      if (refused) throw refused;
    }
    ctx.rawBody = raw;
    // Path, query and body are all checked before answering, so one 400 lists every violation.
    const violations: ErrorDetail[] = [];
    const checked = <T>(check: () => T, fallback: T): T => {
      try {
        return check();
      } catch (err) {
        if (!(err instanceof AppError) || err.code !== 'validation_error') throw err;
        violations.push(...(err.details ?? []));
        return fallback;
      }
    };
    if (route.params) ctx.params = checked(() => route.params!(ctx.params), ctx.params);
    if (route.query) ctx.query = checked(() => route.query!(ctx.query), ctx.query);
    if (route.body) ctx.body = checked(() => route.body!(parseJson(ctx, raw), { textRuleHolds: !jsonMayBreakTextRule(raw) }), undefined);
    if (violations.length > 0) throw validationFailure('request', violations);
    stage('validate');
    const reply = await def.handler(ctx);
    stage('handler');
    return reply;
  }

  /**
   * A request whose head is refused: its body is never read, and it is
   * answered once uWS has parsed the rest of the read that held it, with the
   * connection closed. uWS goes on parsing a read after an answer, even one
   * that closes the connection, so an answer given at once would let bytes
   * after an ambiguous head run as a request. While this answer is pending,
   * uWS itself closes the connection if the read holds another request (the
   * client of a smuggling attempt gets no answer), and reads no further: no
   * other connection is touched, whatever address it comes from.
   */
  function refuseBeforeReading(ctx: RequestContext, responder: Responder, error: AppError): void {
    responder.pauseReading();
    setImmediate(() => answerRefusal(ctx, responder, error));
  }

  function answerRefusal(ctx: RequestContext, responder: Responder, error: AppError): void {
    if (responder.aborted) return;
    const reply = errorReply(error);
    responder.send(reply.status, { 'x-request-id': ctx.reqId, 'content-type': 'application/json; charset=utf-8', ...reply.headers }, JSON.stringify(reply.body), true);
    durationOf(ctx.route, ctx.method, reply.status).observe((performance.now() - ctx.startedAt) / 1000);
    log.info({ reqId: ctx.reqId, method: ctx.method, route: ctx.route, status: reply.status, reason: error.message }, 'request refused');
  }

  /** 405 with the methods that serve the path, or 404 when none does. */
  function noRoute(ctx: RequestContext): AppError {
    const allowed = methodsServing(ctx.path);
    if (allowed.length === 0) return new AppError('not_found', `no route ${ctx.method} ${ctx.path}`);
    ctx.responseHeaders.allow = allowed.join(', ');
    return new AppError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}; allowed: ${allowed.join(', ')}`);
  }

  function parseJson(ctx: RequestContext, raw: Buffer | undefined): unknown {
    if (!raw || raw.length === 0) return {};
    const type = ctx.headers['content-type'] ?? '';
    if (!/^application\/([a-z0-9.+-]*\+)?json\b/i.test(type)) {
      throw new AppError('unsupported_media_type', 'the body must be application/json');
    }
    try {
      return JSON.parse(raw.toString('utf8'));
    } catch {
      throw new AppError('validation_error', 'the body is not valid JSON', { details: [{ path: '', message: 'is not valid JSON' }] });
    }
  }

  let listenSocket: us_listen_socket | undefined;
  return {
    app,
    routes,
    listen(host, port) {
      return new Promise((resolve, reject) => {
        app.listen(host, port, (socket) => {
          if (!socket) return reject(new Error(`could not listen on ${host}:${port}`));
          listenSocket = socket;
          resolve(uWS.us_socket_local_port(socket));
        });
      });
    },
    async close() {
      if (listenSocket) uWS.us_listen_socket_close(listenSocket);
      listenSocket = undefined;
    },
  };
}

function builtInRoutes(opts: HttpServerOptions): RouteDef[] {
  const checks = opts.readinessChecks ?? [];
  return [
    { method: 'GET', path: '/healthz', summary: 'The process is up', auth: false, schema: { response: { 200: anyObject } }, handler: () => ({ status: 200, body: { status: 'ok' } }) },
    {
      method: 'GET',
      path: '/readyz',
      summary: 'The process and its backends answer',
      auth: false,
      schema: { response: { 200: anyObject } },
      async handler() {
        const results = await Promise.all(checks.map(async (c) => {
          try {
            await withTimeout(c.check(), opts.config.readinessTimeoutMs);
            return [c.name, 'ok'] as const;
          } catch (err) {
            return [c.name, err instanceof Error ? err.message : 'failed'] as const;
          }
        }));
        const failed = results.filter(([, r]) => r !== 'ok');
        if (failed.length > 0) {
          throw new AppError('service_unavailable', `not ready: ${failed.map(([n, r]) => `${n} (${r})`).join(', ')}`, { retryAfterSeconds: 1 });
        }
        return { status: 200, body: { status: 'ok', checks: Object.fromEntries(results) } };
      },
    },
    {
      method: 'GET',
      path: '/metrics',
      summary: 'Prometheus metrics',
      auth: false,
      schema: { response: { 200: { description: 'the metrics', content: { 'text/plain': Type.String() } } } },
      async handler() {
        return { status: 200, body: await metricsRegistry.metrics(), headers: { 'content-type': metricsRegistry.contentType } };
      },
    },
  ];
}

function errorReply(error: AppError): Reply {
  const headers: Record<string, string> = {};
  if (error.retryAfterSeconds !== undefined) headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterSeconds)));
  return { status: error.statusCode, body: error.toBody(), headers };
}

const safeMethods = new Set<string>(['GET', 'HEAD', 'OPTIONS']);

/**
 * uWS does not answer a request pipelined behind one whose answer is still
 * pending: when it parses the next request head it closes the connection.
 * Waiting one turn of the event loop lets it finish parsing what it has read,
 * so a write request that has lost its connection is dropped before it runs
 * (a client's retry then cannot do it twice) instead of running unanswered.
 */
function stillConnected(responder: Responder): Promise<boolean> {
  return new Promise((resolve) => setImmediate(() => resolve(!responder.aborted)));
}

const durationChildren = new Map<string, { observe(seconds: number): void }>();

/** The duration histogram's child for a route, method and status, resolved once (label hashing per request shows in profiles). */
function durationOf(route: string, method: string, status: number) {
  const key = `${method} ${status} ${route}`;
  let child = durationChildren.get(key);
  if (!child) {
    child = httpDuration.labels(route, method, String(status));
    if (durationChildren.size < 10_000) durationChildren.set(key, child);
  }
  return child;
}

/** A malformed escape stays as it came, so the route answers 400 or 404 rather than throwing here. */
function decodePathSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

function queryOf(raw: string | undefined): Record<string, string> {
  return raw ? Object.fromEntries(new URLSearchParams(raw)) : {};
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    work.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e) => (clearTimeout(timer), reject(e)),
    );
  });
}
