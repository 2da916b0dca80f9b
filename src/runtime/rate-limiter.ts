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

/**
 * The decision on the `i`th of requests decided together (from 0), when
 * `allowed` of them passed and the budget's arrival time before the first
 * was `startMs` from now: what a decision on each alone, in turn, would be.
 */
export function decisionInTurn(
  policy: RateLimitPolicy,
  i: number,
  allowed: number,
  startMs: number,
): RateLimitDecision {
  const interval = intervalMs(policy);
  const tolerance = interval * policy.burst;
  if (i < allowed) {
    const resetMs = startMs + (i + 1) * interval;
    return decision(policy, true, Math.floor((tolerance - resetMs) / interval), resetMs, 0);
  }
  const heldMs = startMs + allowed * interval;
  return decision(policy, false, 0, heldMs, heldMs + interval - tolerance);
}

/** Requests waiting on one budget (and policy) for the call in flight to end. */
interface Waiting {
  budget: string;
  policy: RateLimitPolicy;
  takers: Array<{ resolve: (d: RateLimitDecision) => void; reject: (err: unknown) => void }>;
}

/** Requests one call decides at most. */
const takersPerCall = 1_000;

/**
 * One key per budget, so on a Redis Cluster each budget lives in its own
 * slot and the script touches nothing else. A budget has one call in flight
 * at a time: requests that come meanwhile wait for it, then are decided
 * together in one call, in the order they came. One request alone goes at
 * once; under load a budget costs one call a round trip, not one a request.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: ScriptedRedis;
  private readonly waiting = new Map<string, Waiting>();
  private readonly inFlight = new Set<string>();

  constructor(
    redis: RedisClient,
    private readonly keyPrefix: string,
  ) {
    this.redis = withScripts(redis);
  }

  take(budget: string, policy: RateLimitPolicy): Promise<RateLimitDecision> {
    const key = `${budget}\u0000${policy.perMinute}\u0000${policy.burst}`;
    return new Promise<RateLimitDecision>((resolve, reject) => {
      let w = this.waiting.get(key);
      if (!w) this.waiting.set(key, (w = { budget, policy, takers: [] }));
      w.takers.push({ resolve, reject });
      if (!this.inFlight.has(key)) void this.decide(key);
    });
  }

  private async decide(key: string): Promise<void> {
    const w = this.waiting.get(key);
    if (!w) return;
    const takers = w.takers.splice(0, takersPerCall);
    if (w.takers.length === 0) this.waiting.delete(key);
    this.inFlight.add(key);
    try {
      const { policy } = w;
      const [allowed, startMs] = await this.redis.gcra(
        `${this.keyPrefix}:rl:${w.budget}`,
        intervalMs(policy),
        policy.burst,
        takers.length,
      );
      takers.forEach((t, i) => t.resolve(decisionInTurn(policy, i, allowed, startMs)));
    } catch (err) {
      for (const t of takers) t.reject(err);
    } finally {
      this.inFlight.delete(key);
      if (this.waiting.has(key)) void this.decide(key);
    }
  }

  async reset(budget: string): Promise<void> {
    await this.redis.del(`${this.keyPrefix}:rl:${budget}`);
  }
}
