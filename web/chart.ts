import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { h } from './dom.ts';

/** One line of a chart: its label and its colour. */
export interface Line {
  label: string;
  color: string;
}

/**
 * The data a chart was last given: x as ISO times, one array per line, null
 * where there is no value. `partial` says the last bucket is still filling
 * (the current minute, hour or day): it is drawn dashed, not as a fall.
 */
export interface ChartData {
  x: string[];
  lines: Record<string, Array<number | null>>;
  partial?: boolean;
}

export interface Chart {
  figure: HTMLElement;
  set(data: ChartData): void;
  stop(): void;
}

const cssVar = (name: string) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#57606a';

/** Durations read in milliseconds up to 2 s, in seconds above; counts as they are. */
function durationFormat(max: number): (v: number | null) => string {
  if (max >= 2_000)
    return (v) => (v === null ? '—' : `${(v / 1000).toLocaleString('en', { maximumFractionDigits: 1 })} s`);
  return (v) => (v === null ? '—' : `${Math.round(v).toLocaleString('en')} ms`);
}
const countFormat = (v: number | null) => (v === null ? '—' : v.toLocaleString('en'));

/**
 * A time-series chart (uPlot, drawn on a canvas) in a figure with a caption.
 * What it was given is also on the figure as `data-chart` (JSON), and a
 * screen reader hears a one-line summary of the totals rather than the canvas.
 * The legend shows the latest values until the pointer picks a point. A
 * partial last bucket is drawn as a dashed segment of its own (hidden from
 * the legend), so a minute that has just begun does not read as a drop.
 * `duration` lines are milliseconds, shown in ms or s as their size asks;
 * `points` marks each value, for sparse lines such as latency.
 */
export function timeChart(
  id: string,
  caption: string,
  lines: Line[],
  opts: { height?: number; duration?: boolean; small?: boolean; points?: boolean } = {},
): Chart {
  const plot = h('div', { class: 'plot', 'aria-hidden': 'true' });
  const summary = h('p', { class: 'sr-only', id: `${id}-summary` });
  const figure = h(
    'figure',
    { class: opts.small ? 'chart small' : 'chart', id, 'aria-describedby': `${id}-summary` },
    h('figcaption', null, caption),
    plot,
    summary,
  );
  const height = opts.height ?? 200;
  const width = () => Math.max(200, Math.floor((plot.clientWidth || figure.clientWidth || 600) - 4));
  let format = opts.duration ? durationFormat(0) : countFormat;
  let chart: uPlot | undefined;
  let lastIdx: number | null = null;
  const resize = new ResizeObserver(() => chart?.setSize({ width: width(), height }));
  resize.observe(figure);
  const repaint = () => chart?.redraw(false, true);
  document.addEventListener('themechange', repaint);

  const latest = (u: uPlot) => {
    if (u.cursor.idx == null && lastIdx !== null) u.setLegend({ idx: lastIdx }, false);
  };

  function make(data: uPlot.AlignedData): uPlot {
    const axis = {
      stroke: () => cssVar('--muted'),
      grid: { stroke: () => cssVar('--line'), width: 1 },
      ticks: { stroke: () => cssVar('--line'), width: 1 },
    };
    const series = (l: Line, partial: boolean): uPlot.Series => ({
      label: partial ? `${l.label} (so far)` : l.label,
      class: partial ? 'partial' : undefined,
      stroke: l.color,
      width: 2,
      dash: partial ? [4, 4] : undefined,
      spanGaps: false,
      value: (_u, v) => format(v),
      points: { show: opts.points ?? false, size: 5 },
    });
    return new uPlot(
      {
        width: width(),
        height,
        legend: { show: !opts.small, live: true },
        // From zero, and tall enough that a handful of counts or milliseconds gets whole-number ticks.
        scales: { y: { range: (_u, _min, max) => [0, Math.max(opts.duration ? 10 : 4, max)] } },
        axes: [
          axis,
          {
            ...axis,
            size: opts.duration ? 64 : 50,
            values: (_u, ticks) => ticks.map((t) => (opts.duration ? format(t) : countFormat(t))),
          },
        ],
        series: [{}, ...lines.map((l) => series(l, false)), ...lines.map((l) => series(l, true))],
        hooks: { setCursor: [latest], setData: [latest] },
      },
      data,
      plot,
    );
  }

  return {
    figure,
    set(data) {
      const n = data.x.length;
      const partialAt = data.partial && n >= 2 ? n - 1 : -1;
      const values = (l: Line) => data.lines[l.label] ?? data.x.map(() => null);
      // The settled buckets as they are; the partial one only as a dashed segment from the bucket before it.
      const settled = lines.map((l) => values(l).map((v, i) => (i === partialAt ? null : v)));
      const partial = lines.map((l) => values(l).map((v, i) => (i >= partialAt - 1 && partialAt >= 0 ? v : null)));
      const aligned: uPlot.AlignedData = [data.x.map((t) => Date.parse(t) / 1000), ...settled, ...partial];
      if (opts.duration) {
        const all = lines.flatMap(values).filter((v): v is number => v !== null);
        format = durationFormat(all.length ? Math.max(...all) : 0);
      }
      lastIdx = n === 0 ? null : partialAt >= 0 ? partialAt - 1 : n - 1;
      if (chart) chart.setData(aligned);
      else chart = make(aligned);
      latest(chart);
      figure.dataset.chart = JSON.stringify({
        x: data.x,
        lines: Object.fromEntries(lines.map((l) => [l.label, values(l)])),
        partial: partialAt >= 0,
      });
      summary.textContent = `${caption}: ${lines
        .map((l) => {
          const known = values(l).filter((v): v is number => v !== null);
          return opts.duration
            ? `${l.label} up to ${format(known.length ? Math.max(...known) : 0)}`
            : `${l.label} ${known.reduce((a, b) => a + b, 0)}`;
        })
        .join(', ')}.`;
    },
    stop() {
      resize.disconnect();
      document.removeEventListener('themechange', repaint);
      chart?.destroy();
    },
  };
}
