import type { TSchema } from '@sinclair/typebox';
import type { AppError } from '../errors.ts';
import type { Role } from '../identity/roles.ts';
import type { Logger } from '../log.ts';

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
  ip: string;
  log: Logger;
  /** Set by the authentication hook on routes with `auth`. */
  principal: any;
  /** Extra answer headers added by hooks (rate limit). */
  responseHeaders: Record<string, string>;
  /** ms timestamps of the pipeline stages, for stage metrics. */
  startedAt: number;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** A streamed answer: written chunk by chunk, respecting backpressure. */
  stream?: AsyncIterable<string | Buffer>;
}

export interface RouteSchema {
  params?: TSchema;
  query?: TSchema;
  body?: TSchema;
  response?: Record<number, TSchema>;
}

export interface RouteDef {
  method: Method;
  path: string;
  summary: string;
  tags?: string[];
  /** Default true: the request must carry a valid credential. */
  auth?: boolean;
  /** Needed role; default viewer for GET, member for writes. */
  minRole?: Role;
  /** The resource belongs to a team (X-Team-Id): another team's id answers 404. */
  teamScoped?: boolean;
  schema?: RouteSchema;
  maxBodyBytes?: number;
  /** Content types the body may have; default JSON only. */
  bodyTypes?: 'json' | 'any';
  /** For a multipart upload (no JSON body schema): the form field that carries the file, for the API description. */
  uploadField?: string;
  handler(ctx: RequestContext): Promise<Reply> | Reply;
}

export function defineRoute(route: RouteDef): RouteDef {
  return route;
}

export type AuthenticateHook = (ctx: RequestContext) => Promise<unknown>;
export type AuthorizeHook = (principal: unknown, minRole: Role) => void;
/** Sets `ctx.responseHeaders`; returns an AppError (429) to refuse the request. */
export type RateLimitHook = (ctx: RequestContext) => Promise<AppError | undefined>;
