import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { AuthenticateHook, AuthorizeHook, RateLimitHook, RequestContext } from '../http/route.ts';
import type { RateLimiter, RateLimitPolicy } from '../runtime/rate-limiter.ts';
import type { IdentityService } from './identity-service.ts';
import { requireRole, type Principal } from '../roles.ts';
import { platformKeyPrefix, sameSecret, sha256 } from './secrets.ts';

type LimitSettings = Pick<
  Config,
  'rateLimitPerMinute' | 'rateLimitBurst' | 'authRateLimitPerMinute' | 'authRateLimitBurst' | 'platformAdminKeyHashes'
>;

/** Who calls a platform route: a platform operator, by the key it showed (the first characters of its digest, for logs). */
export interface PlatformPrincipal {
  platform: true;
  keyHash: string;
}

/**
 * The one authentication step of every authenticated route: the credential
 * (API key or access token) gives the caller, `X-Team-Id` the team (at once,
 * without a promise, when the key and its organization are known); then the
 * organization's rate budget is charged. Routes open to anyone (signup, login,
 * refresh) are charged to the client's address instead.
 */
export function requestAuth(
  identity: IdentityService,
  limiter: RateLimiter,
  config: LimitSettings,
): {
  authenticate: AuthenticateHook;
  authorize: AuthorizeHook;
  rateLimit: RateLimitHook;
  limitAddress: RateLimitHook;
  authenticatePlatform: AuthenticateHook;
} {
  const defaults = { perMinute: config.rateLimitPerMinute, burst: config.rateLimitBurst };
  const perAddress = { perMinute: config.authRateLimitPerMinute, burst: config.authRateLimitBurst };
  return {
    authenticate(ctx) {
      const caller = identity.authenticate(ctx.headers.authorization, ctx.headers['x-relaybox-mode']);
      const team = ctx.headers['x-team-id'];
      return caller instanceof Promise
        ? caller.then((known) => identity.resolveTeam(known, team))
        : identity.resolveTeam(caller, team);
    },
    authenticatePlatform(ctx) {
      const authorization = ctx.headers.authorization;
      const credential = authorization?.startsWith('Bearer ') ? authorization.slice('Bearer '.length) : undefined;
      if (credential?.startsWith(platformKeyPrefix)) {
        const hash = sha256(credential);
        // Every digest is compared, in constant time each: which one matched shows in no timing.
        let known = false;
        for (const candidate of config.platformAdminKeyHashes) known = sameSecret(hash, candidate) || known;
        if (!known) throw new AppError('unauthorized', 'missing or invalid credentials');
        return { platform: true, keyHash: hash.slice(0, 12) } satisfies PlatformPrincipal;
      }
      // An organization's valid credential is refused for what it is; an invalid one is a 401 like anywhere.
      const caller = identity.authenticate(authorization);
      const refuse = (): never => {
        throw new AppError('forbidden', 'this needs a platform-admin key; no credential of an organization reaches it');
      };
      return caller instanceof Promise ? caller.then(refuse) : refuse();
    },
    authorize(principal, minRole) {
      requireRole((principal as Principal).role, minRole);
    },
    async rateLimit(ctx) {
      const tenantId = (ctx.principal as Principal).tenantId;
      const own = identity.rateLimitOf(tenantId);
      const policy = (own instanceof Promise ? await own : own) ?? defaults;
      return charge(
        limiter,
        ctx,
        `org:${tenantId}`,
        policy,
        `rate limit of ${policy.perMinute} requests a minute (burst ${policy.burst}) exceeded`,
      );
    },
    async limitAddress(ctx) {
      const what = `${ctx.method} ${ctx.route}`;
      return charge(
        limiter,
        ctx,
        `addr:${ctx.route}:${ctx.ip}`,
        perAddress,
        `rate limit of ${perAddress.perMinute} ${what} requests a minute (burst ${perAddress.burst}) per client address exceeded`,
      );
    },
  };
}

/**
 * Takes one request from a budget and states it in the answer. The three
 * figures speak of one quota, the one `RateLimit-Policy` names with its 60 s
 * window (IETF RateLimit header fields): `RateLimit-Limit` is that quota (the
 * figure the 429 text names), `RateLimit-Remaining` what is left of it,
 * `RateLimit-Reset` the seconds until it is whole again. The burst, how many
 * may pass at once, is the policy's `burst` parameter: a client that sends
 * faster than the quota refills meets a 429 before Remaining reaches 0.
 */
async function charge(
  limiter: RateLimiter,
  ctx: RequestContext,
  budget: string,
  policy: RateLimitPolicy,
  refusal: string,
): Promise<AppError | undefined> {
  const decision = await limiter.take(budget, policy);
  const stated = policyFields(policy);
  ctx.responseHeaders['ratelimit-limit'] = stated.limit;
  ctx.responseHeaders['ratelimit-policy'] = stated.policy;
  ctx.responseHeaders['ratelimit-remaining'] = String(decision.remainingPerMinute);
  ctx.responseHeaders['ratelimit-reset'] = String(decision.resetSeconds);
  if (decision.allowed) return undefined;
  return new AppError('rate_limited', refusal, { retryAfterSeconds: decision.retryAfterSeconds });
}

/** What a policy's answers say of it, made once per policy (the defaults, or an organization's while its record is cached). */
const statedPolicies = new WeakMap<RateLimitPolicy, { limit: string; policy: string }>();

function policyFields(policy: RateLimitPolicy): { limit: string; policy: string } {
  let stated = statedPolicies.get(policy);
  if (!stated) {
    stated = { limit: String(policy.perMinute), policy: `${policy.perMinute};w=60;burst=${policy.burst}` };
    statedPolicies.set(policy, stated);
  }
  return stated;
}
