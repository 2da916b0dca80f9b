import type { ChartData } from './chart.ts';
import { api } from './session.ts';

type Percentiles = { p50: number | null; p95: number | null; p99: number | null };
export interface Bucket {
  start: string;
  accepted: number;
  sent: number;
  delivered: number;
  read: number;
  failed: number;
  received: number;
  latency: { sent: Percentiles; delivered: Percentiles };
}
export interface Stats {
  from: string;
  to: string;
  interval: '1m' | '1h' | '1d';
  buckets: Bucket[];
}

/** The ranges the overview offers, each read in buckets small enough to show its shape. */
export const ranges = {
  hour: { label: 'Last hour', ms: 3_600_000, interval: '1m' },
  day: { label: 'Last 24 hours', ms: 86_400_000, interval: '1h' },
  month: { label: 'Last 30 days', ms: 30 * 86_400_000, interval: '1d' },
} as const;
export type Range = keyof typeof ranges;

/** GET /api/v1/stats/messages over a range ending now, optionally for one relay. */
export function messageStats(range: Range, filter: { relayId?: string } = {}): Promise<Stats> {
  const r = ranges[range];
  const to = new Date();
  const q = new URLSearchParams({
    from: new Date(to.getTime() - r.ms).toISOString(),
    to: to.toISOString(),
    interval: r.interval,
  });
  if (filter.relayId) q.set('relayId', filter.relayId);
  return api<Stats>('GET', `/api/v1/stats/messages?${q}`);
}

export const outcomes = ['accepted', 'sent', 'delivered', 'read', 'failed', 'received'] as const;

const intervalMs = { '1m': 60_000, '1h': 3_600_000, '1d': 86_400_000 } as const;

/** Whether the last bucket ends after the range does: the current minute, hour or day, still filling. */
export function lastIsPartial(stats: Stats): boolean {
  const last = stats.buckets.at(-1);
  return last !== undefined && Date.parse(last.start) + intervalMs[stats.interval] > Date.parse(stats.to);
}

export function volumeData(stats: Stats, which: ReadonlyArray<(typeof outcomes)[number]> = outcomes): ChartData {
  return {
    x: stats.buckets.map((b) => b.start),
    partial: lastIsPartial(stats),
    lines: Object.fromEntries(which.map((k) => [k, stats.buckets.map((b) => b[k])])),
  };
}

export function latencyData(stats: Stats): ChartData {
  return {
    x: stats.buckets.map((b) => b.start),
    partial: lastIsPartial(stats),
    lines: {
      'sent p50': stats.buckets.map((b) => b.latency.sent.p50),
      'delivered p50': stats.buckets.map((b) => b.latency.delivered.p50),
      'delivered p95': stats.buckets.map((b) => b.latency.delivered.p95),
    },
  };
}

/** Delivered out of what reached an end (delivered or failed) in the range; null when nothing did. */
export function deliveryRate(stats: Stats): number | null {
  const delivered = stats.buckets.reduce((n, b) => n + b.delivered, 0);
  const failed = stats.buckets.reduce((n, b) => n + b.failed, 0);
  return delivered + failed === 0 ? null : delivered / (delivered + failed);
}
