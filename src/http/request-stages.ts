import { maxJsonDepth } from '../config.ts';
import { AppError, type ErrorDetail } from '../errors.ts';
import { jsonNestsDeeperThan } from '../json-depth.ts';
import { BoundObservations, RouteDurations, stageDuration } from './metrics.ts';
import { neededRole } from './roles-needed.ts';
import type { AuthenticateHook, AuthorizeHook, RateLimitHook, Reply, RequestContext, RouteDef } from './route.ts';
import { compileValidator, jsonMayBreakTextRule, validationFailure, type Validator } from './validation.ts';

export type StageName = 'auth' | 'rate_limit' | 'validate' | 'handler';

/** A route as the server runs it: its validators compiled and its stage histograms resolved once, at start. */
export interface CompiledRoute {
  def: RouteDef;
  /** Histogram children resolved once, not per request. */
  stages: Record<StageName, { observe(seconds: number): void }>;
  durations: RouteDurations;
  paramNames: string[];
  params?: Validator;
  query?: Validator;
  body?: Validator;
}

export function compileRoute(def: RouteDef): CompiledRoute {
  return {
    def,
    stages: {
      auth: new BoundObservations(stageDuration, { route: def.path, stage: 'auth' }),
      rate_limit: new BoundObservations(stageDuration, { route: def.path, stage: 'rate_limit' }),
      validate: new BoundObservations(stageDuration, { route: def.path, stage: 'validate' }),
      handler: new BoundObservations(stageDuration, { route: def.path, stage: 'handler' }),
    },
    durations: new RouteDurations(def.path, def.method),
    paramNames: [...def.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]!),
    params: def.schema?.params ? compileValidator(def.schema.params, 'params') : undefined,
    query: def.schema?.query ? compileValidator(def.schema.query, 'query') : undefined,
    body: def.schema?.body ? compileValidator(def.schema.body, 'body') : undefined,
  };
}

/** What the stages call out to: the credential check, the role check and the rate limits (the identity feature's, handed in by the composition root). */
export interface StageHooks {
  authenticate?: AuthenticateHook;
  authorize?: AuthorizeHook;
  rateLimit?: RateLimitHook;
  /** Charges a `limitPerAddress` route to the client address's budget. */
  limitAddress?: RateLimitHook;
  /** A `platform` route's caller: a platform-admin key, else 401 (no valid credential) or 403 (an organization's). */
  authenticatePlatform?: AuthenticateHook;
}

/**
 * A request's stages, each timed into its histogram: authenticate, rate
 * limit, authorize (a `platform` route: rate limit by address, then the
 * platform-admin key), validate (path, query and body together, so one 400
 * lists every violation), then the handler.
 */
export async function runStages(
  ctx: RequestContext,
  route: CompiledRoute,
  raw: Buffer | undefined,
  opts: StageHooks,
): Promise<Reply> {
  const def = route.def;
  let mark = performance.now();
  if (def.platform) {
    if (opts.limitAddress) {
      const refused = await opts.limitAddress(ctx);
      mark = timed(route.stages.rate_limit, mark);
      if (refused) throw refused;
    }
    if (!opts.authenticatePlatform) throw new AppError('unauthorized', 'missing or invalid credentials');
    const principal = opts.authenticatePlatform(ctx);
    ctx.principal = principal instanceof Promise ? await principal : principal;
    mark = timed(route.stages.auth, mark);
  } else if (def.auth !== false) {
    if (!opts.authenticate) throw new AppError('unauthorized', 'missing or invalid credentials');
    const principal = opts.authenticate(ctx);
    ctx.principal = principal instanceof Promise ? await principal : principal;
    mark = timed(route.stages.auth, mark);
    if (opts.rateLimit) {
      const refused = await opts.rateLimit(ctx);
      mark = timed(route.stages.rate_limit, mark);
      if (refused) throw refused;
    }
    opts.authorize?.(ctx.principal, neededRole(def));
  } else if (def.limitPerAddress && opts.limitAddress) {
    const refused = await opts.limitAddress(ctx);
    mark = timed(route.stages.rate_limit, mark);
    if (refused) throw refused;
  }
  ctx.rawBody = raw;
  // Path, query and body are all checked before answering, so one 400 lists every violation.
  const violations: ErrorDetail[] = [];
  if (route.params) ctx.params = checked(violations, route.params, ctx.params, undefined, ctx.params);
  if (route.query) ctx.query = checked(violations, route.query, ctx.query, undefined, ctx.query);
  if (route.body) {
    const before = violations.length;
    const input = checked(violations, parseJson, ctx, raw, undefined);
    if (violations.length === before)
      ctx.body = checked(violations, route.body, input, { textRuleHolds: !jsonMayBreakTextRule(raw) }, undefined);
  }
  if (violations.length > 0) throw validationFailure('request', violations);
  mark = timed(route.stages.validate, mark);
  const reply = await def.handler(ctx);
  timed(route.stages.handler, mark);
  return reply;
}

/** Observes the time since `since` into a stage's histogram; returns now, the next stage's start. */
function timed(stage: { observe(seconds: number): void }, since: number): number {
  const now = performance.now();
  stage.observe((now - since) / 1000);
  return now;
}

/** `check(input, extra)`, or `fallback` with its violations added to the request's when it is a validation error. */
function checked<I, E, T>(
  violations: ErrorDetail[],
  check: (input: I, extra: E) => T,
  input: I,
  extra: E,
  fallback: T,
): T {
  try {
    return check(input, extra);
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'validation_error') throw err;
    violations.push(...(err.details ?? []));
    return fallback;
  }
}

function parseJson(ctx: RequestContext, raw: Buffer | undefined): unknown {
  if (!raw || raw.length === 0) return {};
  const type = ctx.headers['content-type'] ?? '';
  if (!/^application\/([a-z0-9.+-]*\+)?json\b/i.test(type)) {
    throw new AppError('unsupported_media_type', 'the body must be application/json');
  }
  if (jsonNestsDeeperThan(raw, maxJsonDepth)) {
    const message = `is JSON nested deeper than ${maxJsonDepth} levels`;
    throw new AppError('validation_error', `the body ${message}`, { details: [{ path: '', message }] });
  }
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw new AppError('validation_error', 'the body is not valid JSON', {
      details: [{ path: '', message: 'is not valid JSON' }],
    });
  }
}
