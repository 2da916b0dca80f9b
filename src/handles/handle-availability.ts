import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { AppError, validationError } from '../errors.ts';
import { normalizeParticipant } from '../messages/recipients.ts';
import { toE164 } from '../phone-number.ts';
import type { RelayLink } from '../relays/relay-link.ts';
import type { RelayDoc } from '../relays/relay-store.ts';
import type { RateLimiter } from '../runtime/rate-limiter.ts';
import type { Collection, Store } from '../store/collection.ts';

/** How long after a refusal for a relay the store shows online the lookup is asked again (its socket being taken). */
const onlineSettleMs = 300;

/** What a relay's agent last answered about a handle, kept per organization (the document id is the handle). */
export interface AvailabilityDoc {
  [field: string]: unknown;
  id: string;
  tenantId: string;
  imessage: boolean;
  source: string;
  /** The relay whose agent answered. */
  relayId: string;
  checkedAt: string;
}

export function availabilityCollection(store: Store): Collection<AvailabilityDoc> {
  return store.collection<AvailabilityDoc>('handle_availability');
}

export interface Availability {
  handle: string;
  imessage: boolean | null;
  checkedAt: string;
  source: string;
  relayId: string;
  /** Answered from what an earlier lookup found (within the cache's time), not asked again. */
  cached: boolean;
}

export interface LookupSettings {
  /** How long an answer is reused before a relay is asked again. */
  cacheMs: number;
  /** Lookups one relay may make, an hour and a day (what its Apple ID asks Apple). */
  perHour: number;
  perDay: number;
  /** How long to wait for the agent's answer. */
  timeoutMs: number;
}

/**
 * Which service a handle is reached on, asked through one of the
 * organization's online relays (its agent answers from what its Messages
 * knows) and kept for `cacheMs`. A lookup made of a relay is paid from
 * that relay's budget, an hour and a day, shared by every frontend: over
 * it, 429 with `Retry-After`. An answer the agent cannot give (`imessage`
 * null) is told and not kept.
 */
export class HandleAvailability {
  constructor(
    private readonly deps: {
      availability: Collection<AvailabilityDoc>;
      relays: Collection<RelayDoc>;
      link: RelayLink;
      limiter: RateLimiter;
      settings: LookupSettings;
      now?: () => number;
    },
  ) {}

  async check(
    tenantId: string,
    rawHandle: string,
    opts: { from?: string; refresh?: boolean } = {},
  ): Promise<Availability> {
    const handle = normalizeParticipant(rawHandle);
    if (!handle || handle.includes(';'))
      throw validationError('/handle', 'must be a phone number in E.164 (+14155550100) or an email address');
    const from = opts.from === undefined ? undefined : toE164(opts.from);
    if (opts.from !== undefined && !from) throw validationError('/from', 'must be a phone number in E.164');
    const scope = { tenantId };
    const now = this.deps.now?.() ?? Date.now();
    if (!opts.refresh) {
      const kept = await this.deps.availability.findOne(scope, { id: handle });
      if (kept && Date.parse(kept.checkedAt) > now - this.deps.settings.cacheMs)
        return {
          handle,
          imessage: kept.imessage,
          checkedAt: kept.checkedAt,
          source: kept.source,
          relayId: kept.relayId,
          cached: true,
        };
    }
    const relay = await this.relayToAsk(tenantId, from);
    await this.spend(tenantId, relay.id);
    const ask = () =>
      this.deps.link.lookup(
        { id: relay.id, node: relay.node!, session: relay.session },
        `lkp_${randomUUID()}`,
        handle,
        this.deps.settings.timeoutMs,
      );
    let answer = await ask();
    // The store says online a moment before the frontend holding the socket has taken it: asked once more, a little later.
    if (answer?.refused === 'offline') answer = await sleep(onlineSettleMs).then(ask);
    if (!answer)
      throw new AppError(
        'service_unavailable',
        `relay ${relay.id} did not answer the lookup within ${this.deps.settings.timeoutMs} ms`,
        { retryAfterSeconds: 5 },
      );
    if (answer.refused === 'offline') throw new AppError('conflict', `relay ${relay.id} went offline; ask again`);
    if (answer.refused === 'agent_too_old')
      throw new AppError(
        'conflict',
        `relay ${relay.id} runs an agent older than 0.3, which does not answer lookups; upgrade it`,
      );
    const checkedAt = new Date(now).toISOString();
    const found = { imessage: answer.imessage ?? null, source: answer.source ?? 'unknown' };
    if (found.imessage !== null) {
      const doc = { tenantId, imessage: found.imessage, source: found.source, relayId: relay.id, checkedAt };
      await this.deps.availability.updateOne(scope, { id: handle }, { $set: doc }, { upsert: true });
    }
    return { handle, ...found, checkedAt, relayId: relay.id, cached: false };
  }

  /** The online relay to ask: the one that sends from `from` when it is given, else one of the online ones, at random. */
  private async relayToAsk(tenantId: string, from: string | undefined): Promise<RelayDoc> {
    const online = (await this.deps.relays.find({ tenantId }, { status: 'online' }, { limit: 1000 })).filter(
      (r) => r.node !== null,
    );
    const candidates = from ? online.filter((r) => r.phoneNumbers.includes(from)) : online;
    if (candidates.length === 0)
      throw new AppError(
        'conflict',
        from
          ? `no online relay sends from ${from}; a lookup is asked through one`
          : 'no relay is online; a lookup is asked through one',
      );
    return candidates[Math.floor(Math.random() * candidates.length)]!;
  }

  /** One lookup from the relay's budgets: its hour's, then its day's; 429 with Retry-After over either. */
  private async spend(tenantId: string, relayId: string): Promise<void> {
    const { perHour, perDay } = this.deps.settings;
    for (const [window, limit, minutes] of [
      ['hour', perHour, 60],
      ['day', perDay, 1440],
    ] as const) {
      const decision = await this.deps.limiter.take(`lookup-${window}:${tenantId}:${relayId}`, {
        perMinute: limit / minutes,
        burst: limit,
      });
      if (!decision.allowed)
        throw new AppError('rate_limited', `relay ${relayId} has made its ${limit} lookups a ${window}`, {
          retryAfterSeconds: decision.retryAfterSeconds,
        });
    }
  }
}
