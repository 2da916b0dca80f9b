import { randomUUID } from 'node:crypto';
import uWS, {
  type HttpRequest,
  type HttpResponse,
  type TemplatedApp,
  type us_listen_socket,
} from '@trufflesuite/uws-js-unofficial';
import type { Config } from '../config.ts';
import { AppError, problemMediaType, toHttpError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { answerEncoding, compressBody, compressChunks, contentFields } from './compression.ts';
import { apiDocumentRoutes } from './api-documents.ts';
import { builtInRoutes, type ReadinessCheck } from './built-in-routes.ts';
import { collectProcessMetrics, RouteDurations } from './metrics.ts';
import { allowedMethods, clientAddress, copyHeaders } from './request-guard.ts';
import { neededRole } from './roles-needed.ts';
import { compileRoute, runStages, type CompiledRoute, type StageHooks } from './request-stages.ts';
import { readBody, Responder, type AnswerHead } from './responder.ts';
import { BodyStream } from './body-stream.ts';
import type { AnsweredHook, Method, Reply, RequestContext, RouteDef } from './route.ts';
import { endSpan, SpanKind, SpanStatusCode, startSpan, traceOfSpan, tracingOn, type Span } from '../tracing/spans.ts';
import { newTraceContext, readTraceContext } from '../tracing/trace-context.ts';
import { nextTurn } from '../runtime/ahead-of-bulk.ts';

export { neededRole };
export type { ReadinessCheck } from './built-in-routes.ts';

export interface HttpServerOptions extends StageHooks {
  config: Config;
  log: Logger;
  routes: RouteDef[];
  readinessChecks?: ReadinessCheck[];
  answered?: AnsweredHook;
}

export interface HttpServer {
  app: TemplatedApp;
  routes: RouteDef[];
  listen(host: string, port: number): Promise<number>;
  /** Stops listening and refuses requests on connections kept alive (503); settles once every request started is answered. */
  close(): Promise<void>;
}

const requestIdPattern = /^[A-Za-z0-9._-]{1,128}$/;

export function createHttpServer(opts: HttpServerOptions): HttpServer {
  const { config, log } = opts;
  collectProcessMetrics({ buildCommit: config.buildCommit });
  const app = uWS.App();
  const builtIns = builtInRoutes({
    readinessTimeoutMs: config.readinessTimeoutMs,
    ...(opts.readinessChecks ? { readinessChecks: opts.readinessChecks } : {}),
  });
  const routes = [...builtIns, ...opts.routes];
  routes.push(...apiDocumentRoutes(routes, { publicBaseUrl: config.publicBaseUrl }));

  for (const def of routes) {
    const compiled = compileRoute(def);
    const uwsMethod = def.method === 'DELETE' ? 'del' : (def.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch');
    const register = app[uwsMethod].bind(app);
    register(def.path, (res, req) => handle(res, req, compiled));
  }
  app.any('/*', (res, req) => handle(res, req, undefined));
  const methodsServing = allowedMethods(routes);
  /** Set by `close()`: requests that arrive after it on connections kept alive are refused. */
  let closing = false;
  /** Requests started and not yet answered; `close()` waits for them. */
  let inFlight = 0;
  const drained: Array<() => void> = [];

  function handle(res: HttpResponse, req: HttpRequest, route: CompiledRoute | undefined): void {
    const peer = Buffer.from(res.getRemoteAddressAsText()).toString();
    const responder = new Responder(res);
    res.onAborted(() => responder.abort());
    // Everything needed from req is copied now: req is invalid after the first await.
    const { headers, refusal } = copyHeaders(req, config.maxHeaderBytes);
    const incomingId = headers['x-request-id'];
    const reqId = incomingId && requestIdPattern.test(incomingId) ? incomingId : randomUUID();
    const method = req.getMethod().toUpperCase() as Method;
    const span = tracingOn() ? serverSpan(method, route?.def.path ?? 'unmatched', reqId, headers) : undefined;
    const params: Record<string, string> = {};
    if (route)
      for (let i = 0; i < route.paramNames.length; i++)
        params[route.paramNames[i]!] = decodePathSegment(req.getParameter(i) ?? '');
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
      trace: span
        ? traceOfSpan(span)
        : (readTraceContext(headers.traceparent, headers.tracestate) ?? newTraceContext()),
    };
    if (refusal) return refuseBeforeReading(ctx, route, responder, refusal, span);
    // Stopping: a request on a connection kept alive from before is not started; its client retries on another instance.
    if (closing)
      return refuseBeforeReading(
        ctx,
        route,
        responder,
        new AppError('service_unavailable', 'the service is shutting down', { retryAfterSeconds: 1 }),
        span,
      );
    const hasBody = method === 'POST' || method === 'PUT' || method === 'PATCH' || method === 'DELETE';
    const streamed = hasBody && route?.def.streamBody === true;
    const limit = route?.def.maxBodyBytes ?? config.maxBodyBytes;
    const body = hasBody && !streamed ? readBody(res, responder, limit) : undefined;
    if (streamed) ctx.bodyStream = new BodyStream(res, responder);
    else if (!hasBody) responder.pauseReading();
    inFlight++;
    run(ctx, route, responder, body, span)
      .catch((err) => ctx.log.error({ err }, 'failed to answer a request'))
      .finally(() => {
        endSpan(span);
        if (--inFlight === 0) for (const wake of drained.splice(0)) wake();
      });
  }

  async function run(
    ctx: RequestContext,
    route: CompiledRoute | undefined,
    responder: Responder,
    body: Promise<Buffer | 'too_large' | 'aborted'> | undefined,
    span: Span | undefined,
  ): Promise<void> {
    let reply: Reply;
    let errorCode: string | undefined;
    let closeConnection = false;
    try {
      if (!route) throw noRoute(ctx);
      const raw = body ? await body : undefined;
      if (raw === 'aborted') return;
      if (!safeMethods.has(ctx.method) && !(await stillConnected(responder))) return;
      if (raw === 'too_large') {
        closeConnection = true;
        throw new AppError(
          'payload_too_large',
          `the body is larger than ${route.def.maxBodyBytes ?? config.maxBodyBytes} bytes`,
        );
      }
      reply = await runStages(ctx, route, raw, opts);
    } catch (err) {
      const error = toHttpError(err);
      errorCode = error.code;
      if (error.statusCode >= 500) ctx.log.error({ err, route: ctx.route }, 'request failed');
      reply = errorReply(error, ctx.reqId, ctx.headers.authorization);
    }
    if (responder.aborted) return;
    // A streamed body answered before its end: the rest is never read, so the connection cannot carry another request.
    if (ctx.bodyStream instanceof BodyStream && !ctx.bodyStream.complete) closeConnection = true;
    const head: AnswerHead = { reqId: ctx.reqId, stages: ctx.responseHeaders, reply: reply.headers, server: undefined };
    const accepts = ctx.headers['accept-encoding'];
    if (reply.stream && reply.length !== undefined) {
      head.server = contentFields(reply.headers, undefined, false);
      await responder.streamSized(reply.status, head, reply.stream as AsyncIterable<Buffer>, reply.length);
    } else if (reply.stream) {
      const encoding = answerEncoding(accepts, reply.headers, { stream: reply.stream }, config.compressMinBytes);
      head.server = contentFields(reply.headers, encoding, false);
      await responder.stream(reply.status, head, encoding ? compressChunks(reply.stream, encoding) : reply.stream);
    } else if (reply.body === undefined) {
      responder.send(reply.status, head, '', closeConnection);
    } else {
      const text =
        typeof reply.body === 'string' || Buffer.isBuffer(reply.body) ? reply.body : JSON.stringify(reply.body);
      const encoding = answerEncoding(accepts, reply.headers, { body: text }, config.compressMinBytes);
      head.server = contentFields(reply.headers, encoding, !ctx.responseHeaders['content-type']);
      responder.send(reply.status, head, encoding ? await compressBody(text, encoding) : text, closeConnection);
    }
    const seconds = (performance.now() - ctx.startedAt) / 1000;
    durationsOf(route, ctx).observe(reply.status, seconds);
    answered(span, reply.status);
    opts.answered?.(ctx, reply.status, errorCode, seconds * 1000);
    if (accessLogged())
      log.info(
        {
          reqId: ctx.reqId,
          method: ctx.method,
          route: ctx.route,
          status: reply.status,
          ms: Math.round(seconds * 1000 * 100) / 100,
        },
        'request',
      );
  }

  /** Each answer's access line is written at info: below it, its fields are not even gathered. */
  const accessLogged = () => log.isLevelEnabled('info');

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
  function refuseBeforeReading(
    ctx: RequestContext,
    route: CompiledRoute | undefined,
    responder: Responder,
    error: AppError,
    span: Span | undefined,
  ): void {
    responder.pauseReading();
    setImmediate(() => {
      answerRefusal(ctx, route, responder, error);
      answered(span, error.statusCode);
      endSpan(span);
    });
  }

  function answerRefusal(
    ctx: RequestContext,
    route: CompiledRoute | undefined,
    responder: Responder,
    error: AppError,
  ): void {
    if (responder.aborted) return;
    const reply = errorReply(error, ctx.reqId, ctx.headers.authorization);
    responder.send(reply.status, { reqId: ctx.reqId, reply: reply.headers }, JSON.stringify(reply.body), true);
    durationsOf(route, ctx).observe(reply.status, (performance.now() - ctx.startedAt) / 1000);
    log.info(
      { reqId: ctx.reqId, method: ctx.method, route: ctx.route, status: reply.status, reason: error.message },
      'request refused',
    );
  }

  /** 405 with the methods that serve the path, or 404 when none does. */
  function noRoute(ctx: RequestContext): AppError {
    const allowed = methodsServing(ctx.path);
    if (allowed.length === 0) return new AppError('not_found', `no route ${ctx.method} ${ctx.path}`);
    ctx.responseHeaders.allow = allowed.join(', ');
    return new AppError(
      'method_not_allowed',
      `${ctx.method} is not allowed on ${ctx.path}; allowed: ${allowed.join(', ')}`,
    );
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
      closing = true;
      if (listenSocket) uWS.us_listen_socket_close(listenSocket);
      listenSocket = undefined;
      // What was started is answered before the caller closes what answering needs (the store, the runtime).
      if (inFlight > 0) await new Promise<void>((resolve) => drained.push(resolve));
    },
  };
}

/** The server span of a request while tracing is on: a child of the caller's `traceparent` when it sent a valid one, else a new trace. */
function serverSpan(method: string, route: string, reqId: string, headers: Record<string, string>): Span {
  return startSpan(`${method} ${route}`, SpanKind.SERVER, readTraceContext(headers.traceparent, headers.tracestate), {
    'http.request.method': method,
    'http.route': route,
    'relaybox.request_id': reqId,
  });
}

function answered(span: Span | undefined, status: number): void {
  span?.setAttribute('http.response.status_code', status);
  // A 4xx is the client's to look at; only the server's own failures mark its span failed.
  if (status >= 500) span?.setStatus({ code: SpanStatusCode.ERROR });
}

/**
 * Every error is answered as problem details, whatever the request's Accept
 * says: a client that asked for JSON reads it as JSON. A 401 names the scheme
 * to authenticate with (RFC 9110, 11.6.1), and says `invalid_token` when the
 * request carried a bearer token that was refused (RFC 6750, 3.1).
 */
function errorReply(error: AppError, reqId: string, authorization: string | undefined): Reply {
  const headers: Record<string, string> = { 'content-type': problemMediaType };
  if (error.statusCode === 401)
    headers['www-authenticate'] = /^bearer\s+\S/i.test(authorization ?? '')
      ? `${bearerChallenge}, error="invalid_token"`
      : bearerChallenge;
  if (error.retryAfterSeconds !== undefined)
    headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterSeconds)));
  return { status: error.statusCode, body: error.toProblem(reqId), headers };
}

/** The challenge of every 401: API keys and access tokens are both bearer tokens. */
const bearerChallenge = 'Bearer realm="relaybox"';

const safeMethods = new Set<string>(['GET', 'HEAD', 'OPTIONS']);

/**
 * uWS does not answer a request pipelined behind one whose answer is still
 * pending: when it parses the next request head it closes the connection.
 * Waiting one turn of the event loop lets it finish parsing what it has read,
 * so a write request that has lost its connection is dropped before it runs
 * (a client's retry then cannot do it twice) instead of running unanswered.
 * The turn is taken ahead of bulk work queued before it (`nextTurn`), so a
 * request does not wait behind another organization's job step here.
 */
async function stillConnected(responder: Responder): Promise<boolean> {
  await nextTurn();
  return !responder.aborted;
}

/** Durations of requests no route's own method serves (no route, or a method the route was not registered for), by method and route. */
const otherDurations = new Map<string, RouteDurations>();

function durationsOf(route: CompiledRoute | undefined, ctx: RequestContext): RouteDurations {
  if (route && route.def.method === ctx.method) return route.durations;
  const key = `${ctx.method} ${ctx.route}`;
  let durations = otherDurations.get(key);
  if (!durations) {
    durations = new RouteDurations(ctx.route, ctx.method);
    if (otherDurations.size < 10_000) otherDurations.set(key, durations);
  }
  return durations;
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
