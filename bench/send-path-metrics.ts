/**
 * Where the time of POST /api/v1/messages goes, from the service's own
 * `relaybox_http_stage_duration_seconds` histogram on GET /metrics.
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
