// A uPlot chart fed from a VmTelemetry store: built once per "shape" (series set), then only
// setData() on the frames after new samples arrive. Knob-change and restart markers are drawn as
// dashed vertical lines. Nothing here touches React.
import uPlot from 'uplot';
import { val } from './telemetry-store.ts';
import type { VmTelemetry, Rows, Column } from './telemetry-store.ts';
import { palette, seriesColor } from '../lib/theme.ts';
import { queueDraw, cancelDraw } from './draw-queue.ts';
import { chartFormat, windowStats, windowText, type WindowStats } from './window-stats.ts';

export { chartFormat, windowText, type WindowStats };

export interface SeriesDef {
  key: string;
  label: string;
  color?: string;
}

export interface ChartDef {
  id: string;
  title: string;
  /** One line under the title: what the chart shows and where it comes from. */
  help: string;
  source: 'samples' | 'latency' | 'devices';
  /** bytes: a rate of bytes per second. */
  kind: 'rate' | 'fraction' | 'us' | 'bytes';
  /** What the header's max / mean are of: the per-row sum of the series (default for rates), their max, or the first series. */
  total?: 'sum' | 'max' | 'first';
  series(t: VmTelemetry): SeriesDef[];
  /** What the empty chart says. */
  empty: string;
}

export const PLOT_HEIGHT = 150;
/** A chart redraws at most four times a second (samples arrive in batches of two, five a second). */
const MIN_REDRAW_MS = 250;
/** The legend's newest-value readout changes at most twice a second (each change is a layout). */
const LEGEND_MS = 500;

export interface ChartOptions {
  /** Seconds of history on screen (the x window ends at the newest point). */
  windowSec: () => number;
  /** Called after each redraw with the number of points drawn (for readouts / test hooks). */
  onDraw?: (info: { points: number; last: (number | null)[]; hasData: boolean; window: WindowStats }) => void;
}

export class StreamChart {
  private u: uPlot | null = null;
  private shape = -1;
  private width = 400;
  private off: (() => void) | null = null;

  constructor(
    private readonly host: HTMLElement,
    private readonly telemetry: VmTelemetry,
    private readonly def: ChartDef,
    private readonly opts: ChartOptions,
  ) {
    this.width = Math.max(200, Math.floor(host.clientWidth));
    this.build();
    this.off = telemetry.listen(this.queued);
  }

  private rows(): Rows {
    return rowsOf(this.telemetry, this.def);
  }

  private build(): void {
    this.u?.destroy();
    const p = palette();
    const t = this.telemetry;
    const defs = this.def.series(t);
    const kind = this.def.kind;
    const fmt = this.fmt();
    const axis = {
      stroke: p.muted,
      grid: { stroke: p.grid, width: 1 },
      ticks: { stroke: p.grid, width: 1 },
      font: '11px system-ui, sans-serif',
    };
    const markers = this.markersPlugin();
    const opts: uPlot.Options = {
      width: this.width,
      height: PLOT_HEIGHT,
      pxAlign: 1,
      cursor: { drag: { x: false, y: false }, points: { size: 5 } },
      legend: { show: true, live: true },
      scales: {
        x: {
          time: true,
          range: (_u, _min, max) => {
            const w = this.opts.windowSec();
            const hi = Number.isFinite(max) && max > 0 ? max : Date.now() / 1000;
            return [hi - w, hi];
          },
        },
        y: {
          // Never clipped: a share of time is 0-100 % unless a value goes past it (then the axis
          // grows to show it); other kinds start at 0 and grow with their maximum.
          range: (_u, _min, max) => [0, !(Number.isFinite(max) && max > 0) ? 1 : kind === 'fraction' && max <= 1 ? 1 : niceMax(max)],
        },
      },
      axes: [
        { ...axis, space: 70, values: (_u, splits) => splits.map(clockLabel) },
        {
          ...axis,
          size: 56,
          values: (_u, splits) => splits.map((v) => (kind === 'fraction' ? `${Math.round(v * 100)}%`
            : kind === 'us' ? (v >= 1000 ? `${axisNum(v / 1000)} ms` : `${axisNum(v)} µs`) : kind === 'bytes' ? `${axisNum(v)}B` : axisNum(v))),
        },
      ],
      series: [
        { label: 'time', value: (_u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleTimeString()) },
        ...defs.map((s, i) => ({
          label: s.label,
          stroke: s.color ?? seriesColor(i),
          width: 1.5,
          points: { show: false },
          spanGaps: false,
          value: (_u: uPlot, v: number | null) => fmt(v),
        })),
      ],
      plugins: [markers],
      // uPlot rewrites the legend's values on its own updates: write ours back while not hovered.
      hooks: { setLegend: [() => this.writeLegend()] },
    };
    this.u = new uPlot(opts, this.data(defs), this.host);
    this.u.root.dataset.chart = this.def.id;
    this.u.over.addEventListener('mouseenter', () => { this.hovering = true; });
    this.u.over.addEventListener('mouseleave', () => {
      this.hovering = false;
      this.lastLegend = 0;
      this.afterDraw();
    });
    this.shape = t.shape;
    this.currentDefs = defs;
    this.afterDraw();
  }

  private currentDefs: SeriesDef[] = [];
  private hovering = false;
  private lastLegend = 0;

  /**
   * What uPlot draws: the rows in the visible window only, as plain arrays (null = gap), reduced
   * to each pixel column's first/min/max/last when there are more rows than pixels (a 10-minute
   * window holds 6000 rows per series in ~500 px). A few thousand short-lived values per draw.
   */
  private data(defs: SeriesDef[]): uPlot.AlignedData {
    const rows = this.rows();
    const n = rows.length;
    const hi = n ? rows.x[n - 1]! : Date.now() / 1000;
    const from = rows.lowerBound(hi - this.opts.windowSec());
    const cols = defs.map((s) => rows.cols.get(s.key));
    return visibleData(rows.x, cols, from, n, Math.max(50, this.width - 60));
  }

  /**
   * New data arrived: redraw in a frame of the draw queue's choosing — only while the chart is on
   * screen, and no more often than the newest data moves the plot by a pixel (a 10-minute window
   * advances a pixel about every second).
   */
  private readonly queued = () => {
    if (!this.visible) {
      this.stale = true;
      return;
    }
    if (this.timer) return;
    const minInterval = Math.max(MIN_REDRAW_MS, (this.opts.windowSec() * 1000) / Math.max(100, this.width - 60));
    const wait = this.lastDraw + minInterval - performance.now();
    if (wait <= 0) queueDraw(this.update);
    else this.timer = setTimeout(() => {
      this.timer = 0;
      queueDraw(this.update);
    }, wait);
  };

  private visible = true;
  private stale = false;
  private lastDraw = 0;
  private timer: ReturnType<typeof setTimeout> | 0 = 0;

  /** The chart scrolled into or out of view (IntersectionObserver). */
  setVisible(v: boolean): void {
    this.visible = v;
    if (v && this.stale) {
      this.stale = false;
      queueDraw(this.update);
    }
  }

  private readonly update = (): void => {
    if (!this.u) return;
    this.lastDraw = performance.now();
    if (this.telemetry.shape !== this.shape) {
      this.build();
      return;
    }
    this.u.setData(this.data(this.currentDefs));
    this.afterDraw();
  };

  /** The total the header reads out: rates add up over vCPUs, fractions and latencies do not. */
  private totalKind(): 'sum' | 'max' | 'first' {
    return this.def.total ?? (this.def.kind === 'rate' || this.def.kind === 'bytes' ? 'sum' : 'max');
  }

  /** The visible window's statistics (the same rows uPlot was given). */
  windowStats(): WindowStats {
    const rows = this.rows();
    const n = rows.length;
    const hi = n ? rows.x[n - 1]! : 0;
    const from = rows.lowerBound(hi - this.opts.windowSec());
    return windowStats(this.currentDefs.map((s) => rows.cols.get(s.key)), from, n, this.totalKind());
  }

  private afterDraw(): void {
    // While nobody hovers the plot, the legend reads out each series' mean and max over the
    // visible window: the newest value of a bursty series is mostly 0 and says little. Hovering
    // shows the value at the cursor (uPlot's own legend).
    const u = this.u;
    const now = performance.now();
    const stats = this.windowStats();
    this.stats = stats;
    if (u && !this.hovering && now - this.lastLegend >= LEGEND_MS) {
      this.lastLegend = now;
      this.writeLegend();
    }
    if (!this.opts.onDraw) return;
    const rows = this.rows();
    const n = rows.length;
    const last = this.currentDefs.map((s) => (n ? val(rows.cols.get(s.key)?.[n - 1]) : null));
    // Anything to show in the visible window (uPlot's arrays hold just that, a few thousand values)?
    const hasData = !!u && u.data.slice(1).some((col) => (col as (number | null)[]).some((v) => v !== null));
    this.opts.onDraw({ points: n, last, hasData, window: stats });
  }

  private stats: WindowStats | null = null;

  /** The legend's values while nobody hovers: each series' mean · max over the visible window. */
  private writeLegend(): void {
    const u = this.u;
    const stats = this.stats;
    if (!u || !stats || this.hovering) return;
    const cells = u.root.querySelectorAll<HTMLElement>('.u-legend .u-series .u-value');
    const f = this.fmt();
    cells.forEach((cell, i) => {
      const s = stats.series[i - 1];
      const text = i === 0 ? `mean · max, last ${windowText(this.opts.windowSec())}` : !s || s.max === null ? '—' : `${f(s.mean)} · ${f(s.max)}`;
      if (cell.textContent !== text) cell.textContent = text;
    });
  }

  /** How this chart's values read: percentages, µs, or plain numbers (never an SI "m" for milli). */
  fmt(): (v: number | null) => string {
    return chartFormat(this.def.kind);
  }

  setWidth(width: number): void {
    const w = Math.max(200, Math.floor(width));
    if (w === this.width) return;
    this.width = w;
    this.u?.setSize({ width: w, height: PLOT_HEIGHT });
  }

  /** The window or the theme changed: rebuild with current colours and scales. */
  refresh(): void {
    this.build();
  }

  canvas(): HTMLCanvasElement | null {
    return this.u?.ctx.canvas ?? null;
  }

  /** Series labels and colours, for the PNG export's legend. */
  legend(): { label: string; color: string }[] {
    return this.currentDefs.map((s, i) => ({ label: s.label, color: s.color ?? seriesColor(i) }));
  }

  destroy(): void {
    cancelDraw(this.update);
    if (this.timer) clearTimeout(this.timer);
    this.off?.();
    this.off = null;
    this.u?.destroy();
    this.u = null;
  }

  private markersPlugin(): uPlot.Plugin {
    const t = this.telemetry;
    return {
      hooks: {
        draw: [
          (u: uPlot) => {
            if (!t.markers.length) return;
            const p = palette();
            const ctx = u.ctx;
            const { left, top, width, height } = u.bbox;
            const [xmin, xmax] = [u.scales.x!.min!, u.scales.x!.max!];
            ctx.save();
            ctx.beginPath();
            ctx.rect(left, top, width, height);
            ctx.clip();
            ctx.strokeStyle = p.marker;
            ctx.fillStyle = p.marker;
            ctx.lineWidth = Math.max(1, devicePixelRatio);
            ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
            ctx.font = `${10 * devicePixelRatio}px system-ui, sans-serif`;
            ctx.textBaseline = 'top';
            // Labels close to the previous one go one line lower (three lines, then they wrap).
            let lastLabelX = -Infinity;
            let line = 0;
            const lineH = 11 * devicePixelRatio;
            for (const m of t.markers) {
              if (m.x < xmin || m.x > xmax) continue;
              const x = Math.round(u.valToPos(m.x, 'x', true));
              ctx.beginPath();
              ctx.moveTo(x, top);
              ctx.lineTo(x, top + height);
              ctx.stroke();
              line = x - lastLabelX > 90 * devicePixelRatio ? 0 : (line + 1) % 3;
              lastLabelX = x;
              const label = m.label.length > 28 ? `${m.label.slice(0, 27)}…` : m.label;
              const tw = ctx.measureText(label).width;
              const tx = x + 3 * devicePixelRatio + tw > left + width ? x - 3 * devicePixelRatio - tw : x + 3 * devicePixelRatio;
              ctx.fillText(label, tx, top + 2 * devicePixelRatio + line * lineH);
            }
            ctx.restore();
          },
        ],
      },
    };
  }
}

/** The rows a chart draws from. */
export function rowsOf(t: VmTelemetry, def: Pick<ChartDef, 'source'>): Rows {
  return def.source === 'samples' ? t.samples : def.source === 'devices' ? t.devices : t.latency;
}

/**
 * Rows [from, to) as uPlot data. Up to 2 x `buckets` rows are copied as they are; more are
 * reduced per bucket (an equal share of the time span) to the rows holding each series' min and
 * max — the envelope a pixel column would show anyway. NaN becomes null (a gap).
 */
export function visibleData(x: Float64Array, cols: (Column | undefined)[], from: number, to: number, buckets: number): uPlot.AlignedData {
  const count = Math.max(0, to - from);
  const out: (number | null)[][] = cols.map(() => []);
  const xs: number[] = [];
  if (count <= buckets * 2) {
    for (let i = from; i < to; i++) {
      xs.push(x[i]!);
      for (let k = 0; k < cols.length; k++) {
        const v = cols[k]?.[i];
        out[k]!.push(v === undefined || Number.isNaN(v) ? null : v);
      }
    }
    return [xs, ...out] as uPlot.AlignedData;
  }
  const x0 = x[from]!;
  const span = x[to - 1]! - x0 || 1;
  let i = from;
  for (let b = 0; b < buckets && i < to; b++) {
    const end = b === buckets - 1 ? x[to - 1]! + 1 : x0 + (span * (b + 1)) / buckets;
    const start = i;
    while (i < to && x[i]! < end) i++;
    if (i === start) continue;
    // Two output rows per bucket: for each series the earlier-occurring of (min, max) first.
    xs.push(x[start]!, x[i - 1]!);
    for (let k = 0; k < cols.length; k++) {
      const c = cols[k];
      let min = Infinity;
      let max = -Infinity;
      let minAt = -1;
      let maxAt = -1;
      if (c) {
        for (let j = start; j < i; j++) {
          const v = c[j]!;
          if (v < min) { min = v; minAt = j; }
          if (v > max) { max = v; maxAt = j; }
        }
      }
      const o = out[k]!;
      if (minAt < 0) o.push(null, null);
      else if (minAt <= maxAt) o.push(min, max);
      else o.push(max, min);
    }
  }
  return [xs, ...out] as uPlot.AlignedData;
}

/** Axis numbers: 0.25, 2.5, 40, 1.2k, 3M. */
function axisNum(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (a >= 10 || a === 0) return String(Math.round(v));
  return String(+v.toFixed(2));
}

/** Wall-clock tick labels (HH:MM:SS), one line. */
function clockLabel(v: number): string {
  const d = new Date(v * 1000);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

function niceMax(max: number): number {
  const m = max * 1.1;
  const p = 10 ** Math.floor(Math.log10(m));
  const n = m / p;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * p;
}

/** The chart as a PNG: title, plot and legend on the theme's background. */
export function chartPng(chart: StreamChart, title: string): string | null {
  const src = chart.canvas();
  if (!src) return null;
  const p = palette();
  const dpr = devicePixelRatio || 1;
  const pad = 10 * dpr;
  const titleH = 24 * dpr;
  const legendH = 22 * dpr;
  const out = document.createElement('canvas');
  out.width = src.width + 2 * pad;
  out.height = src.height + titleH + legendH + 2 * pad;
  const ctx = out.getContext('2d')!;
  ctx.fillStyle = p.surface || '#fff';
  ctx.fillRect(0, 0, out.width, out.height);
  ctx.fillStyle = p.text;
  ctx.font = `600 ${13 * dpr}px system-ui, sans-serif`;
  ctx.textBaseline = 'middle';
  ctx.fillText(title, pad, pad + titleH / 2);
  ctx.drawImage(src, pad, pad + titleH);
  let x = pad;
  const y = pad + titleH + src.height + legendH / 2;
  ctx.font = `${11 * dpr}px system-ui, sans-serif`;
  for (const l of chart.legend()) {
    ctx.fillStyle = l.color;
    ctx.fillRect(x, y - 4 * dpr, 12 * dpr, 8 * dpr);
    x += 16 * dpr;
    ctx.fillStyle = p.text;
    ctx.fillText(l.label, x, y);
    x += ctx.measureText(l.label).width + 14 * dpr;
  }
  return out.toDataURL('image/png');
}
