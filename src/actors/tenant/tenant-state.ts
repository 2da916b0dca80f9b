import type { ActorContext } from '../../runtime/types.ts';
import type { Scope } from '../../store/collection.ts';
import type { LinePacing } from './line-pacing.ts';
import type { CreditGrant } from './protocol.ts';
import type { RelayCredit } from './relay-choice.ts';
import type { PagedQueue } from './queue-pages.ts';

export interface OnlineRelay extends RelayCredit {
  session: number;
  /** This join of the relay's session, unique: its relay actor's grants name it, and a grant naming an earlier join is ignored. */
  epoch: string;
}

export interface TenantState {
  /** The send queue: each part's head in memory, the rest counted and paged from the store (queue-pages.ts). */
  queue: PagedQueue;
  /** The online relays and the credits each granted this activation on its current session. */
  relays: Map<string, OnlineRelay>;
  /** The one live chain of sweep timers; a timer of another chain is dropped. */
  sweepChain: string | undefined;
  /** When the messages' outboxes were last swept. */
  outboxSweptAt?: number;
  /** Activated by the message being handled: nothing in it predates this message. */
  fresh: boolean;
  /** Sources (cancelled bulk jobs) none of whose messages may be handed out any more, though some are still stored as queued. */
  closedSources: Set<string>;
  /** Each sender line's rate and new-contact cap, rebuilt from the store on activation. */
  pacing: LinePacing;
  /** When the pending pace timer fires (epoch ms), if one is pending. */
  paceAt?: number;
  /** Sent messages not delivered yet, by id, with their sent time (epoch ms): watched for the undelivered window (undelivered-watch.ts). */
  awaitingDelivery: Map<string, number>;
  /** Sent messages whose `if_undelivered` SMS fallback is not asked for yet, by id, with its deadline (epoch ms): sms-fallback-watch.ts. */
  smsFallbackDue: Map<string, number>;
  /** Each sender line's relay chain (its phone number's `relays`: primary first, then standbys), by number. */
  lineRelays: Map<string, string[]>;
  /** The organization's undelivered window: its own setting, or the default. */
  undeliveredAfterMs: number;
  /** Epoch ms since when at least one relay has been online without a break (as far as this activation knows); undefined while none is. */
  relayOnlineSince?: number;
}

export type TenantContext = ActorContext<TenantState>;

/** The store's scope of an organization's documents. */
export function tenantScope(tenantId: string): Scope {
  return { tenantId };
}

/** Keeps `relayOnlineSince` true to the relays online now: called after every change to them. */
export function noteRelays(state: TenantState): void {
  if (state.relays.size === 0) delete state.relayOnlineSince;
  else state.relayOnlineSince ??= Date.now();
}

/** Credits from a relay actor, counted only if they are for this activation and the relay's current session: the credits added, 0 otherwise. */
export function applyGrant(state: TenantState, relayId: string, grant: CreditGrant): number {
  const relay = state.relays.get(relayId);
  if (!relay || relay.session !== grant.session || grant.epoch !== relay.epoch) return 0;
  relay.credits += grant.credits;
  relay.capacity = grant.capacity;
  return grant.credits;
}

/** The ids whose time `isDue`, taken out of `followed`. */
export function takeDue(followed: Map<string, number>, isDue: (atMs: number) => boolean): string[] {
  const due: string[] = [];
  for (const [id, atMs] of followed) {
    if (!isDue(atMs)) continue;
    due.push(id);
    followed.delete(id);
  }
  return due;
}
