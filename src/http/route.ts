import { Kind, Type, type Static, type TSchema } from '@sinclair/typebox';
import type { AppError, ErrorCode } from '../errors.ts';
import type { Role } from '../roles.ts';
import type { Logger } from '../log.ts';
import type { TraceContext } from '../tracing/trace-context.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** What a handler sees; everything in it was copied out of uWS before the first await. */
export interface RequestContext<Body = any, Query = any, Params = any> {
  reqId: string;
  method: Method;
  /** The raw path, e.g. /api/v1/messages/msg_1 */
  path: string;
  /** The route pattern, e.g. /api/v1/messages/:id */
  route: string;
  params: Params;
  query: Query;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  body: Body;
  rawBody: Buffer | undefined;
  /** A `streamBody` route's body, chunk by chunk as it arrives (http/body-stream.ts); read at most once. */
  bodyStream?: AsyncIterable<Buffer>;
  ip: string;
  log: Logger;
  /** Set by the authentication hook on routes with `auth`. */
  principal: any;
  /** Extra answer headers added by hooks (rate limit). */
  responseHeaders: Record<string, string>;
  /** ms timestamps of the pipeline stages, for stage metrics. */
  startedAt: number;
  /**
   * The request's W3C trace context, for what it causes later (a message
   * stores it): its server span's while tracing is on; otherwise the
   * caller's `traceparent` (and `tracestate`), or a new trace when it sent
   * none or a malformed one.
   */
  readonly trace: TraceContext;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** A streamed answer: written chunk by chunk, respecting backpressure. */
  stream?: AsyncIterable<string | Buffer>;
  /** The stream's length in bytes, when known (a stored file): sent with Content-Length, as it is (never compressed). */
  length?: number;
}

/**
 * An answer that is not one JSON body: no body at all (204, a redirect), or
 * other media types (`content`, e.g. a CSV export), with the headers it sets.
 */
export interface AnswerSpec {
  description: string;
  /** Media type → schema; absent: the answer has no body. */
  content?: Record<string, TSchema>;
  /** Answer headers this status sets, beyond the ones every answer carries. */
  headers?: Record<string, { description: string; required?: boolean }>;
}

/** A status's answer: a TypeBox schema is a JSON body of that shape. */
export type ResponseSpec = TSchema | AnswerSpec;

export const isSchema = (spec: ResponseSpec): spec is TSchema => Kind in spec;

/** 204: the answer has no body (a 204 declared as `Type.Null()` is read the same way). */
export const noContent: AnswerSpec = { description: 'done; no body' };

export interface RouteSchema {
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  /** Every success status the handler answers, with its body. */
  response: Record<number, ResponseSpec>;
}

type StaticOf<T> = T extends TSchema ? Static<T> : undefined;

/** The reply a handler may give for one declared status: its JSON body is the schema's static type. */
type ReplyFor<Status extends number, Spec> = Spec extends TSchema
  ? Static<Spec> extends null
    ? { status: Status; body?: null; headers?: Record<string, string> }
    : { status: Status; body: Static<Spec>; headers?: Record<string, string> }
  : Spec extends { content: Record<string, TSchema> }
    ? {
        status: Status;
        body?: string | Buffer | Static<Spec['content'][keyof Spec['content']]>;
        stream?: AsyncIterable<string | Buffer>;
        length?: number;
        headers?: Record<string, string>;
      }
    : { status: Status; body?: undefined; headers?: Record<string, string> };

export type TypedReply<R extends Record<number, ResponseSpec>> = {
  [S in keyof R & number]: ReplyFor<S, R[S]>;
}[keyof R & number];

interface RouteOptions {
  method: Method;
  path: string;
  summary: string;
  /** Stable name for generated clients; default derived from the method and path. */
  operationId?: string;
  tags?: string[];
  /** Default true: the request must carry a valid credential. */
  auth?: boolean;
  /** On a route without `auth`: charged to the client address's budget (each such request is costly to serve). */
  limitPerAddress?: boolean;
  /**
   * For platform operators, not organizations: the request must carry a
   * platform-admin key (PLATFORM_ADMIN_KEY_HASHES); an organization's
   * credential, whatever its role, is 403. Charged to the client address's
   * budget, as a route without `auth`.
   */
  platform?: boolean;
  /** Needed role; default viewer for GET, member for writes. */
  minRole?: Role;
  /** The resource belongs to a team (X-Team-Id): another team's id answers 404. */
  teamScoped?: boolean;
  /** The route honours an Idempotency-Key header (a repeat replays the first answer). */
  idempotent?: boolean;
  /** What the route creates carries the request's trace context on (`ctx.trace`): the API description lists traceparent and tracestate. */
  traced?: boolean;
  /** Errors the handler itself can answer, beyond those the route's shape implies (see openapi-errors.ts). */
  errors?: ErrorCode[];
  maxBodyBytes?: number;
  /**
   * The handler reads the body itself, as it arrives (`ctx.bodyStream`), in
   * bounded memory: for uploads of any size. `maxBodyBytes` does not apply;
   * the handler enforces its own bound.
   */
  streamBody?: boolean;
  /** Content types the body may have; default JSON only. */
  bodyTypes?: 'json' | 'any';
  /** For a multipart upload (no JSON body schema): the form field that carries the file, for the API description. */
  uploadField?: string;
}

export interface RouteDef extends RouteOptions {
  schema: RouteSchema;
  handler(ctx: RequestContext): Promise<Reply> | Reply;
}

/** A route whose handler's input and output types come from its schemas, so the code and the API description cannot drift. */
export interface TypedRouteDef<S extends RouteSchema> extends RouteOptions {
  schema: S;
  // NoInfer: S is read from `schema` alone; the handler is then checked against it. A handler without
  // parameters is typed before S is known and loses its status literal: write `(_ctx) =>` there.
  handler: NoInfer<
    (
      ctx: RequestContext<StaticOf<S['body']>, StaticOf<S['query']>, StaticOf<S['params']>>,
    ) => Promise<TypedReply<S['response']>> | TypedReply<S['response']>
  >;
}

export function defineRoute<const S extends RouteSchema>(route: TypedRouteDef<S>): RouteDef {
  return route as RouteDef;
}

/** Marks a schema as a named type of the API: the OpenAPI document lists it once under components.schemas. */
export const schemaNameKey = 'x-schema-name';

/** A schema as a named type (Message, Contact...): generated clients get one type for it wherever it appears. */
export function named<T extends TSchema>(name: string, schema: T): T {
  return { ...schema, [schemaNameKey]: name };
}

/** Any JSON object: for answers whose shape is described elsewhere (the API documents themselves). */
export const anyObject = Type.Object({}, { additionalProperties: true });

/** The request's principal: at once when it is known without waiting, else a promise of it; throws (or rejects) to refuse. */
export type AuthenticateHook = (ctx: RequestContext) => unknown;
export type AuthorizeHook = (principal: unknown, minRole: Role) => void;
/** Sets `ctx.responseHeaders`; returns an AppError (429) to refuse the request. */
export type RateLimitHook = (ctx: RequestContext) => Promise<AppError | undefined>;
/**
 * Called once a request's answer is written (not for one whose client went
 * away first): its status, the error code of an error answer, and how long
 * it took. For the request log; it must not wait for anything.
 */
export type AnsweredHook = (ctx: RequestContext, status: number, error: string | undefined, durationMs: number) => void;
