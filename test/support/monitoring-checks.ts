import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitoringDir, type Prometheus, type PromSample } from './prometheus.ts';

export interface PanelQuery {
  panel: string;
  unit: string;
  expr: string;
  legend: string;
}

/** Every query of every Grafana dashboard in monitoring/, with its panel's unit and the query's legend. */
export function panelQueries(): PanelQuery[] {
  const files = ['relaybox-dashboard.json'];
  return files.flatMap((file) => {
    const dashboard = JSON.parse(readFileSync(join(monitoringDir, file), 'utf8')) as {
      panels: Array<{
        title: string;
        fieldConfig?: { defaults?: { unit?: string } };
        targets?: Array<{ expr: string; legendFormat?: string }>;
      }>;
    };
    return dashboard.panels.flatMap((p) =>
      (p.targets ?? []).map((q) => ({
        panel: p.title,
        unit: p.fieldConfig?.defaults?.unit ?? 'short',
        expr: q.expr,
        legend: q.legendFormat ?? '',
      })),
    );
  });
}

/**
 * The unit a query's result has, read from what it computes: a recorded
 * ratio is a share (percentunit), a rate of a counter is per second, a
 * quantile or a gauge of a `_seconds` metric is seconds, anything else a
 * plain number.
 */
export function unitOf(expr: string): 'percentunit' | 'per-second' | 's' | 'short' {
  if (/:ratio_rate\w+/.test(expr)) return 'percentunit';
  if (/histogram_quantile\(/.test(expr)) return /_seconds_bucket\b/.test(expr) ? 's' : 'short';
  if (/\brate\(\w+_(total|count)\b/.test(expr)) return 'per-second';
  if (/\b\w+_seconds\b/.test(expr)) return 's';
  return 'short';
}

const perSecondUnits = new Set(['reqps', 'ops', 'rps', 'wps', 'cps']);

/** What is wrong with a panel query's answer: it does not parse, is empty, has no number, or does not match the panel's unit or legend. */
export async function panelProblems(prom: Prometheus, q: PanelQuery): Promise<string[]> {
  const answer = await prom.query(q.expr);
  if (answer.status !== 'success') return [`does not run: ${answer.error}`];
  const result: PromSample[] = answer.result;
  const problems: string[] = [];
  if (result.length === 0) problems.push('no series');
  else if (!result.some((s) => Number.isFinite(Number(s.value[1]))))
    problems.push('no series with a number (NaN only)');
  const unit = unitOf(q.expr);
  const matches = unit === 'per-second' ? perSecondUnits.has(q.unit) : q.unit === unit;
  if (!matches) problems.push(`unit ${q.unit}, but the query gives ${unit}`);
  for (const [, label] of q.legend.matchAll(/\{\{\s*(\w+)\s*\}\}/g)) {
    const missing = result.filter((s) => s.metric[label!] === undefined).length;
    if (missing > 0) problems.push(`legend names {{${label}}}, missing from ${missing} of ${result.length} series`);
  }
  return problems;
}

/**
 * The first thing an alert's runbook says to run: the first code span of the
 * first step under "## Check".
 */
export function firstDiagnostic(alert: string): string {
  const page = readFileSync(join(monitoringDir, '..', 'docs', 'runbooks', `${alert}.md`), 'utf8');
  const check = page.split(/^## Check$/m)[1]?.split(/^## /m)[0] ?? '';
  const first = /^1\. ([\s\S]*?)(?=^\d+\. |$(?![\s\S]))/m.exec(check)?.[1] ?? '';
  const code = /`([^`]+)`/.exec(first)?.[1];
  if (!code) throw new Error(`${alert}.md: no command in the first step of "## Check"`);
  return code;
}
