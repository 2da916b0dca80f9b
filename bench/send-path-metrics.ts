/**
 * What the service's GET /metrics says of its sends: where the time of POST
 * /api/v1/messages goes (`relaybox_http_stage_duration_seconds`), its store
 * round trips and the embedded store's budget counters.
 */

const metric = 'relaybox_http_stage_duration_seconds';
const route = '/api/v1/messages';
export const stages = ['auth', 'rate_limit', 'validate', 'persist', 'enqueue', 'handler'] as const;

export interface StageSummary {
  stage: string;
  count: number;
  meanMs: number;
  p50Ms: number;
  p90Ms: number;
  /** Upper bound of the first bucket, in ms: a quantile below it is only known to be below it. */
  firstBucketMs: number;
}

interface Histogram {
  /** Cumulative counts by upper bound, ascending; the last bound is +Inf. */
  buckets: Array<{ le: number; count: number }>;
  sum: number;
  count: number;
}

function labelsOf(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const m of text.matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]!] = m[2]!;
  return labels;
}

/** The stage histograms of the messages route, by stage. */
export function parseStageHistograms(exposition: string): Map<string, Histogram> {
  const byStage = new Map<string, Histogram>();
  const get = (stage: string) => {
    let h = byStage.get(stage);
    if (!h) byStage.set(stage, (h = { buckets: [], sum: 0, count: 0 }));
    return h;
  };
  for (const line of exposition.split('\n')) {
    if (!line.startsWith(metric)) continue;
    const m = /^(\w+)\{([^}]*)\}\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = labelsOf(m[2]!);
    if (labels.route !== route || !labels.stage) continue;
    const value = Number(m[3]);
    const h = get(labels.stage);
    if (m[1] === `${metric}_bucket`)
      h.buckets.push({ le: labels.le === '+Inf' ? Infinity : Number(labels.le), count: value });
    else if (m[1] === `${metric}_sum`) h.sum = value;
    else if (m[1] === `${metric}_count`) h.count = value;
  }
  for (const h of byStage.values()) h.buckets.sort((a, b) => a.le - b.le);
  return byStage;
}

/** `after` minus `before`, so that only what the load did is summarized. */
export function subtract(after: Map<string, Histogram>, before: Map<string, Histogram>): Map<string, Histogram> {
  const out = new Map<string, Histogram>();
  for (const [stage, h] of after) {
    const b = before.get(stage);
    const earlier = (le: number) => b?.buckets.find((x) => x.le === le)?.count ?? 0;
    out.set(stage, {
      buckets: h.buckets.map((x) => ({ le: x.le, count: x.count - earlier(x.le) })),
      sum: h.sum - (b?.sum ?? 0),
      count: h.count - (b?.count ?? 0),
    });
  }
  return out;
}

/** Like PromQL's histogram_quantile: linear within the bucket the quantile falls in. */
export function quantile(h: Histogram, q: number): number {
  if (h.count <= 0) return NaN;
  const rank = q * h.count;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const b of h.buckets) {
    if (b.count >= rank) {
      if (b.le === Infinity) return lowerBound; // beyond the last finite bucket: its bound is all we know
      const inBucket = b.count - lowerCount;
      return lowerBound + (b.le - lowerBound) * (inBucket > 0 ? (rank - lowerCount) / inBucket : 0);
    }
    lowerBound = b.le;
    lowerCount = b.count;
  }
  return lowerBound;
}

export function summarizeStages(histograms: Map<string, Histogram>): StageSummary[] {
  return stages
    .filter((s) => histograms.has(s))
    .map((stage) => {
      const h = histograms.get(stage)!;
      return {
        stage,
        count: h.count,
        meanMs: h.count ? (h.sum / h.count) * 1000 : NaN,
        p50Ms: quantile(h, 0.5) * 1000,
        p90Ms: quantile(h, 0.9) * 1000,
        firstBucketMs: (h.buckets[0]?.le ?? 0) * 1000,
      };
    });
}

export async function fetchStageHistograms(base: string): Promise<Map<string, Histogram>> {
  const res = await fetch(`${base}/metrics`);
  if (!res.ok) throw new Error(`GET /metrics answered ${res.status}`);
  return parseStageHistograms(await res.text());
}

/** The sum of relaybox_store_operations_total in a Prometheus exposition. */
export function storeCommands(exposition: string): number {
  let sum = 0;
  for (const m of exposition.matchAll(/^relaybox_store_operations_total\{[^}]*\}\s+(\S+)$/gm)) sum += Number(m[1]);
  return sum;
}

/** The embedded store's budget counters in a Prometheus exposition (docs/performance-budget.md), summed over labels. */
export interface StoreWork {
  statements: number;
  rows: number;
  indexEntries: number;
  storedBytes: number;
}

export function storeWork(exposition: string): StoreWork | undefined {
  const total = (metric: string, only?: RegExp) => {
    let sum = 0;
    let seen = false;
    for (const m of exposition.matchAll(new RegExp(`^${metric}\\{([^}]*)\\}\\s+(\\S+)$`, 'gm'))) {
      seen = true;
      if (!only || only.test(m[1]!)) sum += Number(m[2]);
    }
    return seen ? sum : undefined;
  };
  const statements = total('relaybox_store_statements_total');
  // An earlier version, or a store other than the embedded one, has none of them.
  if (statements === undefined) return undefined;
  return {
    statements,
    rows: total('relaybox_store_rows_written_total') ?? 0,
    indexEntries: total('relaybox_store_index_entries_written_total') ?? 0,
    storedBytes: total('relaybox_store_document_bytes_written_total', /verb="insert"/) ?? 0,
  };
}
