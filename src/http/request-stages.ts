import { maxJsonDepth } from '../config.ts';
import { AppError, type ErrorDetail } from '../errors.ts';
import { jsonNestsDeeperThan } from '../json-depth.ts';
import { stageDuration } from './metrics.ts';
import { neededRole } from './roles-needed.ts';
import type { AuthenticateHook, AuthorizeHook, RateLimitHook, Reply, RequestContext, RouteDef } from './route.ts';
import { compileValidator, jsonMayBreakTextRule, validationFailure, type Validator } from './validation.ts';

export type StageName = 'auth' | 'rate_limit' | 'validate' | 'handler';

/** A route as the server runs it: its validators compiled and its stage histograms resolved once, at start. */
export interface CompiledRoute {
  def: RouteDef;
  /** Histogram children resolved once, not per request. */
  stages: Record<StageName, { observe(seconds: number): void }>;
  paramNames: string[];
  params?: Validator;
  query?: Validator;
  body?: Validator;
}

export function compileRoute(def: RouteDef): CompiledRoute {
  return {
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
}

/** What the stages call out to: the credential check, the role check and the rate limits (the identity feature's, handed in by the composition root). */
export interface StageHooks {
  authenticate?: AuthenticateHook;
  authorize?: AuthorizeHook;
  rateLimit?: RateLimitHook;
  /** Charges a `limitPerAddress` route to the client address's budget. */
  limitAddress?: RateLimitHook;
}

/**
 * A request's stages, each timed into its histogram: authenticate, rate
 * limit, authorize, validate (path, query and body together, so one 400
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
  if (route.body)
    ctx.body = checked(
      () => route.body!(parseJson(ctx, raw), { textRuleHolds: !jsonMayBreakTextRule(raw) }),
      undefined,
    );
  if (violations.length > 0) throw validationFailure('request', violations);
  stage('validate');
  const reply = await def.handler(ctx);
  stage('handler');
  return reply;
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
