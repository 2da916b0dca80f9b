import type { Config } from '../config.ts';
import { AppError } from '../errors.ts';
import type { AuthenticateHook, AuthorizeHook, RateLimitHook } from '../http/route.ts';
import type { RateLimiter } from '../runtime/rate-limiter.ts';
import type { IdentityService } from './identity-service.ts';
import { requireRole, type Principal } from './roles.ts';

/**
 * The one authentication step of every authenticated route: the credential
 * (API key or access token) gives the caller, `X-Team-Id` the team; then the
 * organization's rate budget is charged.
 */
export function requestAuth(identity: IdentityService, limiter: RateLimiter, config: Pick<Config, 'rateLimitPerMinute' | 'rateLimitBurst'>): {
  authenticate: AuthenticateHook;
  authorize: AuthorizeHook;
  rateLimit: RateLimitHook;
} {
  const defaults = { perMinute: config.rateLimitPerMinute, burst: config.rateLimitBurst };
  return {
    async authenticate(ctx) {
      const caller = await identity.authenticate(ctx.headers.authorization);
      return identity.resolveTeam(caller, ctx.headers['x-team-id']);
    },
    authorize(principal, minRole) {
      requireRole((principal as Principal).role, minRole);
    },
    async rateLimit(ctx) {
      const orgId = (ctx.principal as Principal).orgId;
      const policy = (await identity.rateLimitOf(orgId)) ?? defaults;
      const decision = await limiter.take(`org:${orgId}`, policy);
      ctx.responseHeaders['ratelimit-limit'] = String(decision.limit);
      ctx.responseHeaders['ratelimit-remaining'] = String(decision.remaining);
      ctx.responseHeaders['ratelimit-reset'] = String(decision.resetSeconds);
      if (decision.allowed) return undefined;
      return new AppError('rate_limited', `rate limit of ${policy.perMinute} requests a minute (burst ${policy.burst}) exceeded`, { retryAfterSeconds: decision.retryAfterSeconds });
    },
  };
}
