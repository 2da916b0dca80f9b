import type { MessageOfKind } from '../../runtime/actor.ts';
import { lineOf, type Hold, type LinePacing } from './line-pacing.ts';
import { zoneOfNumber } from './quiet-hours.ts';
import type { tenantProtocol } from './protocol.ts';
import type { TenantState } from './tenant-state.ts';

/** A scheduled job as a forecast reads it (the tenant protocol's `forecast`). */
export type ForecastPlan = Omit<MessageOfKind<typeof tenantProtocol, 'forecast'>, 'kind'>;

/**
 * Why a queued message waits, from memory: no relay online, its line's
 * rate or new-contact cap (with when it may go), no credit, or the messages
 * before it. A message the queue counts in the store and does not hold is
 * judged by its line and recipient as `stored` gives them. Null when the
 * queue does not hold it and counts none in the store.
 */
export function waitingFor(
  state: TenantState,
  messageId: string,
  now: number,
  stored?: { fromNumber?: string | null; to?: string },
): Hold | null {
  const paged = stored?.fromNumber !== undefined && state.queue.size > state.queue.held;
  const item = state.queue.get(messageId) ?? (paged ? { fromNumber: stored.fromNumber ?? null, to: stored.to } : null);
  if (!item) return null;
  const relays = [...state.relays.values()];
  if (relays.length === 0) return { waitingFor: 'relay_offline' };
  const lines = item.fromNumber ? [item.fromNumber] : relays.map((r) => lineOf(null, r.id));
  const holds = lines.map((line) => state.pacing.hold(line, item.to, now));
  if (holds.every((h) => h !== null)) return holds.sort((a, b) => (a!.notBefore ?? 0) - (b!.notBefore ?? 0))[0]!;
  if (!relays.some((r) => r.credits > 0)) return { waitingFor: 'relay_busy' };
  return { waitingFor: 'queue' };
}

/**
 * When a bulk job's (or group send's) queued messages should all be sent
 * (epoch ms), from the pace of the lines they go through: for each sender
 * line (a number, or the online relays together), the messages of that
 * line at the job's priority or above, this job's and the others' it takes
 * turns with, drained at the lines' rate, and the days their new-contact
 * caps need. Null when nothing of it is queued here or no relay is online.
 */
export function estimateAt(state: TenantState, source: string, now: number): number | null {
  const relayLines = [...state.relays.keys()].map((id) => lineOf(null, id));
  if (relayLines.length === 0) return null;
  // The counts are the queue's, held and in the store; which recipients are new is read from the held ones, scaled.
  const counts = new Map<string | null, { count: number; lowest: number }>();
  for (const part of state.queue.partitions()) {
    const n = part.held + part.behind;
    if (part.source !== source || n === 0) continue;
    const group = counts.get(part.fromNumber) ?? { count: 0, lowest: Infinity };
    group.count += n;
    group.lowest = Math.min(group.lowest, part.priority);
    counts.set(part.fromNumber, group);
  }
  if (counts.size === 0) return null;
  const held = bySenderLine(
    state.pacing,
    relayLines,
    [...state.queue.all()].filter((item) => item.source === source),
    now,
  );
  let at = now;
  for (const [fromNumber, group] of counts) {
    let ahead = 0;
    for (const part of state.queue.partitions())
      if (part.fromNumber === fromNumber && part.priority >= group.lowest) ahead += part.held + part.behind;
    const sample = held.get(fromNumber);
    const fresh = sample ? Math.round((group.count * sample.fresh) / sample.count) : 0;
    const done = state.pacing.drainedAt(fromNumber ? [fromNumber] : relayLines, ahead, fresh, now, sample?.zone);
    if (done === null) return null;
    at = Math.max(at, done);
  }
  return at;
}

/**
 * When `count` messages queued at `startAt` would all be sent (epoch ms):
 * the sample's share of each sender line (a number, or the online relays
 * together) and of recipients new to it, scaled to `count`, drained at the
 * lines' pace as they stand now. Null when no relay is online.
 */
export function forecastAt(state: TenantState, plan: ForecastPlan, now: number): number | null {
  const relayLines = [...state.relays.keys()].map((id) => lineOf(null, id));
  if (relayLines.length === 0) return null;
  const start = Math.max(now, plan.startAt);
  let at = start;
  for (const [fromNumber, group] of bySenderLine(state.pacing, relayLines, plan.sample, now)) {
    const count = Math.round((plan.count * group.count) / plan.sample.length);
    const done = state.pacing.drainedAt(
      fromNumber ? [fromNumber] : relayLines,
      count,
      Math.round((count * group.fresh) / group.count),
      now,
      group.zone,
      start,
    );
    if (done === null) return null;
    at = Math.max(at, done);
  }
  return at;
}

/**
 * Messages by their sender line (the number, or null for the online relays
 * together): how many, how many go to a recipient new to the line, the
 * lowest priority among them, and the time zone most of their recipients'
 * numbers are in (quiet-hours.ts), if the table places any.
 */
function bySenderLine(
  pacing: LinePacing,
  relayLines: string[],
  items: Iterable<{ to?: string; fromNumber: string | null; priority?: number }>,
  now: number,
) {
  const groups = new Map<
    string | null,
    { count: number; fresh: number; lowest: number; zones: Map<string, number>; zone?: string }
  >();
  for (const item of items) {
    const group = groups.get(item.fromNumber) ?? { count: 0, fresh: 0, lowest: Infinity, zones: new Map() };
    group.count++;
    group.lowest = Math.min(group.lowest, item.priority ?? 0);
    if (pacing.isNewTo(item.fromNumber ? [item.fromNumber] : relayLines, item.to, now)) group.fresh++;
    const zone = item.to === undefined ? undefined : zoneOfNumber(item.to);
    if (zone) group.zones.set(zone, (group.zones.get(zone) ?? 0) + 1);
    groups.set(item.fromNumber, group);
  }
  for (const group of groups.values()) group.zone = [...group.zones].sort((a, b) => b[1] - a[1])[0]?.[0];
  return groups;
}
