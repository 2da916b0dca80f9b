import type { RedisClient } from './redis-client.ts';
import { withScripts, type ScriptedRedis } from './scripts.ts';

export interface RateLimitPolicy {
  perMinute: number;
  burst: number;
}

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  /** Requests that may pass at once now (what is left of the burst). */
  remaining: number;
  /**
   * What is left of the per-minute quota: `perMinute` less the requests the
   * budget still holds (each is paid back one interval after the last); 0
   * when refused.
   */
  remainingPerMinute: number;
  /** Whole seconds until the full burst is available again. */
  resetSeconds: number;
  /** Whole seconds to wait before retrying; at least 1 when refused. */
  retryAfterSeconds: number;
}

/** GCRA per budget key; the same algorithm in Redis (shared by every frontend) and in process. */
export interface RateLimiter {
  take(budget: string, policy: RateLimitPolicy): Promise<RateLimitDecision>;
  /** Gives the budget its whole burst back (a successful login clears its failures). */
  reset(budget: string): Promise<void>;
}

const intervalMs = (policy: RateLimitPolicy) => 60_000 / policy.perMinute;

function decision(
  policy: RateLimitPolicy,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  retryAfterMs: number,
): RateLimitDecision {
  const held = Math.ceil(Math.max(0, resetMs) / intervalMs(policy));
  return {
    allowed,
    limit: policy.burst,
    remaining: Math.max(0, remaining),
    remainingPerMinute: allowed ? Math.max(0, policy.perMinute - held) : 0,
    resetSeconds: Math.max(0, Math.ceil(resetMs / 1000)),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil(retryAfterMs / 1000)),
  };
}

export class LocalRateLimiter implements RateLimiter {
  private readonly arrivals = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  async take(budget: string, policy: RateLimitPolicy): Promise<RateLimitDecision> {
    const now = this.now();
    const interval = intervalMs(policy);
    const tat = Math.max(this.arrivals.get(budget) ?? now, now);
    const newTat = tat + interval;
    const tolerance = interval * policy.burst;
    const allowAt = newTat - tolerance;
    if (now < allowAt) return decision(policy, false, 0, tat - now, allowAt - now);
    this.arrivals.set(budget, newTat);
    if (this.arrivals.size > 100_000) this.forgetIdle(now);
    return decision(policy, true, Math.floor((tolerance - (newTat - now)) / interval), newTat - now, 0);
  }

  async reset(budget: string): Promise<void> {
    this.arrivals.delete(budget);
  }

  /** A budget whose arrival time has passed is full again; keeping it changes nothing. */
  private forgetIdle(now: number): void {
    for (const [budget, tat] of this.arrivals) if (tat <= now) this.arrivals.delete(budget);
  }
}

/** One key per budget, so on a Redis Cluster each budget lives in its own slot and the script touches nothing else. */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: ScriptedRedis;

  constructor(
    redis: RedisClient,
    private readonly keyPrefix: string,
  ) {
    this.redis = withScripts(redis);
  }

  async take(budget: string, policy: RateLimitPolicy): Promise<RateLimitDecision> {
    const [allowed, remaining, resetMs, retryAfterMs] = await this.redis.gcra(
      `${this.keyPrefix}:rl:${budget}`,
      intervalMs(policy),
      policy.burst,
    );
    return decision(policy, allowed === 1, remaining, resetMs, retryAfterMs);
  }

  async reset(budget: string): Promise<void> {
    await this.redis.del(`${this.keyPrefix}:rl:${budget}`);
  }
}
