/** A relay's `relay.online` or `relay.offline` event, as GET /api/v1/events answers it. */
export interface RelayEvent {
  event: string;
  timestamp: string;
  data: Record<string, unknown>;
}

/** A stretch of a window in one state; null where the events do not say (before the first one). */
export interface Span {
  start: number;
  end: number;
  online: boolean | null;
}

/**
 * The window [from, to) cut into online and offline stretches from one
 * relay's events (any order): each event starts a stretch in its state, and
 * the state at `from` is the one of the last event before it.
 */
export function onlineSpans(events: RelayEvent[], relayId: string, from: number, to: number): Span[] {
  const changes = events
    .filter((e) => e.data.id === relayId && (e.event === 'relay.online' || e.event === 'relay.offline'))
    .map((e) => ({ at: Date.parse(e.timestamp), online: e.event === 'relay.online' }))
    .filter((c) => !Number.isNaN(c.at) && c.at < to)
    .sort((a, b) => a.at - b.at);
  let state: boolean | null = null;
  let start = from;
  const spans: Span[] = [];
  for (const c of changes) {
    if (c.at <= from) {
      state = c.online;
      continue;
    }
    if (c.online === state) continue;
    spans.push({ start, end: c.at, online: state });
    start = c.at;
    state = c.online;
  }
  spans.push({ start, end: to, online: state });
  return spans.filter((s) => s.end > s.start);
}

/** The share of the window the relay was online, over the part the events speak for; null when they say nothing. */
export function onlineShare(spans: Span[]): number | null {
  const known = spans.filter((s) => s.online !== null);
  const total = known.reduce((n, s) => n + s.end - s.start, 0);
  return total === 0 ? null : known.filter((s) => s.online).reduce((n, s) => n + s.end - s.start, 0) / total;
}
