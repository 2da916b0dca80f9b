import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { h } from './dom.ts';

/** One line of a chart: its label, its colour, and how its values read (a count, or milliseconds). */
export interface Line {
  label: string;
  color: string;
}

/** The data a chart was last given: x as ISO times, one array per line, null where there is no value. */
export interface ChartData {
  x: string[];
  lines: Record<string, Array<number | null>>;
}

export interface Chart {
  figure: HTMLElement;
  set(data: ChartData): void;
  stop(): void;
}

/**
 * A time-series chart (uPlot, drawn on a canvas) in a figure with a caption.
 * What it was given is also on the figure as `data-chart` (JSON), and a
 * screen reader hears a one-line summary of the totals rather than the canvas.
 * `points` marks each value, for sparse lines such as latency, where a value
 * between two empty buckets has no line to draw.
 */
export function timeChart(
  id: string,
  caption: string,
  lines: Line[],
  opts: { height?: number; unit?: string; small?: boolean; points?: boolean } = {},
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
  const unit = opts.unit ?? '';
  const width = () => Math.max(200, Math.floor((figure.clientWidth || 600) - 4));
  let chart: uPlot | undefined;
  const resize = new ResizeObserver(() => chart?.setSize({ width: width(), height: opts.height ?? 200 }));
  resize.observe(figure);

  function make(data: uPlot.AlignedData): uPlot {
    return new uPlot(
      {
        width: width(),
        height: opts.height ?? 200,
        legend: { show: !opts.small },

        scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [{}, { size: unit ? 72 : 50, values: (_u, ticks) => ticks.map((t) => `${t}${unit}`) }],
        series: [
          {},
          ...lines.map((l) => ({
            label: l.label,
            stroke: l.color,
            width: 2,
            spanGaps: false,
            points: { show: opts.points ?? false, size: 5 },
          })),
        ],
      },
      data,
      plot,
    );
  }

  return {
    figure,
    set(data) {
      const aligned: uPlot.AlignedData = [
        data.x.map((t) => Date.parse(t) / 1000),
        ...lines.map((l) => data.lines[l.label] ?? data.x.map(() => null)),
      ];
      if (chart) chart.setData(aligned);
      else chart = make(aligned);
      figure.dataset.chart = JSON.stringify({
        x: data.x,
        lines: Object.fromEntries(lines.map((l, i) => [l.label, chart!.data[i + 1]])),
      });
      summary.textContent = `${caption}: ${lines
        .map((l) => {
          const values = (data.lines[l.label] ?? []).filter((v): v is number => v !== null);
          return unit
            ? `${l.label} up to ${values.length ? Math.max(...values) : 0}${unit}`
            : `${l.label} ${values.reduce((a, b) => a + b, 0)}`;
        })
        .join(', ')}.`;
    },
    stop() {
      resize.disconnect();
      chart?.destroy();
    },
  };
}
