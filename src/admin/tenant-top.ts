import type { OrganizationDoc } from '../identity/identity-store.ts';
import type { MessageDoc } from '../messages/message-store.ts';
import { bucketStart, rollupIntervals, type RollupDoc, type RollupInterval } from '../messages/message-rollups.ts';
import type { Collection, Filter, TenantMeasure } from '../store/collection.ts';
import type { DeliveryDoc } from '../webhooks/webhook-store.ts';

/** What organizations are ranked by. */
export const tenantFigures = ['queued', 'sent', 'failed', 'webhook_lag'] as const;
export type TenantFigureName = (typeof tenantFigures)[number];

/** The windows `sent` and `failed` are counted over, each read from the rollup buckets of one interval. */
export const figureWindows = {
  '1h': { interval: '1m', buckets: 60 },
  '24h': { interval: '1h', buckets: 24 },
  '7d': { interval: '1d', buckets: 7 },
} as const satisfies Record<string, { interval: RollupInterval; buckets: number }>;
export type FigureWindow = keyof typeof figureWindows;

export const figureUnits = {
  queued: 'messages',
  sent: 'messages',
  failed: 'messages',
  webhook_lag: 'seconds',
} as const;

export interface TenantTopRow {
  organization: { id: string; name: string | null };
  value: number;
  unit: (typeof figureUnits)[TenantFigureName];
}

export interface TenantTop {
  by: TenantFigureName;
  unit: (typeof figureUnits)[TenantFigureName];
  window: FigureWindow | null;
  /** The first bucket counted (sent, failed); null for a figure of now. */
  from: string | null;
  at: string;
  data: TenantTopRow[];
}

export interface TenantTopSources {
  organizations: Collection<OrganizationDoc>;
  messages: Collection<MessageDoc>;
  rollups: Collection<RollupDoc>;
  deliveries: Collection<DeliveryDoc>;
}

/**
 * The organizations that rank first by one figure, for platform operators:
 * each figure is read from what the service keeps anyway, grouped and ranked
 * by the store in one command (`Collection.topTenants`), then the names of the
 * few organizations answered are read.
 *
 * - queued: messages stored with status queued (a group send's own record
 *   aside), due or waiting for a retry or a scheduled job;
 * - sent, failed: the `all` rollup buckets of the window's interval, the
 *   current one and those before it (1h: the last 60 one-minute buckets);
 * - webhook_lag: the age of the organization's oldest pending webhook
 *   delivery (not yet succeeded nor given up).
 */
export async function topTenants(
  src: TenantTopSources,
  q: { by: TenantFigureName; limit: number; window: FigureWindow },
  nowMs = Date.now(),
): Promise<TenantTop> {
  let collection: Collection<any>;
  let filter: Filter;
  let measure: TenantMeasure;
  let from: string | null = null;
  if (q.by === 'queued') {
    collection = src.messages;
    filter = { status: 'queued', fanout: { $ne: true } };
    measure = { count: true };
  } else if (q.by === 'webhook_lag') {
    collection = src.deliveries;
    filter = { status: 'pending' };
    measure = { earliest: 'createdAt' };
  } else {
    const { interval, buckets } = figureWindows[q.window];
    from = new Date(bucketStart(nowMs, interval) - (buckets - 1) * rollupIntervals[interval]).toISOString();
    collection = src.rollups;
    filter = { interval, dim: 'all', start: { $gte: from } };
    measure = { sum: q.by };
  }
  const figures = await collection.topTenants(filter, measure, q.limit);
  const unit = figureUnits[q.by];
  const names = await Promise.all(
    figures.map(({ tenantId }) =>
      src.organizations.findOne({ tenantId }, { id: tenantId }).then((org) => org?.name ?? null),
    ),
  );
  return {
    by: q.by,
    unit,
    window: from === null ? null : q.window,
    from,
    at: new Date(nowMs).toISOString(),
    data: figures.map(({ tenantId, value }, i) => ({
      organization: { id: tenantId, name: names[i]! },
      value: typeof value === 'string' ? Math.max(0, Math.round(nowMs - Date.parse(value)) / 1000) : value,
      unit,
    })),
  };
}
