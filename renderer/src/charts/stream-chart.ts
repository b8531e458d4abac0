// A uPlot chart fed from a VmTelemetry store: built once per "shape" (series set), then only
// setData() on the frames after new samples arrive. Knob-change and restart markers are drawn as
// dashed vertical lines. Nothing here touches React.
import uPlot from 'uplot';
import { val } from './telemetry-store.ts';
import type { VmTelemetry, Rows, Column } from './telemetry-store.ts';
import { palette, seriesColor } from '../lib/theme.ts';
import { queueDraw, cancelDraw } from './draw-queue.ts';
import { chartFormat, windowStats, windowText, type RatioCols, type WindowStats } from './window-stats.ts';
import { binRows, binSeconds, highest, type Binned } from './bins.ts';
import { TIME_INCRS, axisNum, clockLabel, niceMax, usAxisLabels } from './axis.ts';
import { placeMarkerLabels, type PlacedLabel } from './marker-labels.ts';

export { chartFormat, windowText, type WindowStats };

export interface SeriesDef {
  key: string;
  label: string;
  color?: string;
  /** A ratio of two count columns per row (poll hits / attempts): means are Σ num / Σ den. */
  ratio?: { num: string; den: string };
}

export interface ChartDef {
  id: string;
  title: string;
  /** One line under the title: what the chart shows and where it comes from. */
  help: string;
  /** The rows drawn: KVM's samples, the guest's latencies, devices, or the guest's own idle (guest-idle.ts). */
  source: 'samples' | 'latency' | 'devices' | 'guest';
  /** bytes: a rate of bytes per second. */
  kind: 'rate' | 'fraction' | 'us' | 'bytes';
  /** What the header's max / mean are of: the per-row sum of the series (default for rates), their max, or the first series. */
  total?: 'sum' | 'max' | 'first';
  series(t: VmTelemetry): SeriesDef[];
  /** The legend lists series by their mean, largest first (named series; vCPUs keep their order). */
  legendByValue?: boolean;
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
  onDraw?: (info: { points: number; last: (number | null)[]; hasData: boolean; window: WindowStats; drawn: Drawn }) => void;
}

/** What the last draw put on screen: the highest point of the lines and of the bands, the bin width. */
export interface Drawn {
  lineMax: number;
  bandMax: number;
  binSec: number;
  labels: PlacedLabel[];
  /** The scales' ends (x in epoch seconds), the plot's left and right edge in CSS px. */
  xMax: number | null;
  yMax: number | null;
  plot: [number, number];
  /** The tick labels the axes wrote (uPlot's own list of what it drew). */
  xLabels: string[];
  yLabels: string[];
}

/** The labels uPlot wrote on an axis (its `_values`, kept after each draw). */
function axisLabels(u: uPlot | null, i: number): string[] {
  const a = u?.axes[i] as { _values?: (string | null)[] } | undefined;
  return (a?._values ?? []).filter((v): v is string => typeof v === 'string' && v !== '');
}

/** Share of the plot's width in pixels (uPlot's y axis takes the rest). */
const AXIS_PX = 60;

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
          range: () => {
            const w = this.opts.windowSec();
            const newest = this.telemetry.newestX();
            const hi = Number.isFinite(newest) ? newest : Date.now() / 1000;
            return [hi - w, hi];
          },
        },
        y: {
          // A share of time is 0-100 % (each delta is spread over the intervals it covers,
          // halt-wait.ts, so none goes past it); other kinds start at 0 and grow with the top of
          // what is drawn, the bands' peaks included.
          range: (_u, _min, max) => {
            if (kind === 'fraction') return [0, 1];
            const top = Math.max(Number.isFinite(max) ? max : 0, this.bandMax);
            return [0, top > 0 ? niceMax(top) : 1];
          },
        },
      },
      axes: [
        // Whole minutes apart, ticks need no seconds ("16:04"), and the shorter labels fit twice as many.
        { ...axis, space: () => (this.opts.windowSec() >= 300 ? 45 : 60), incrs: TIME_INCRS,
          values: (_u, splits, _axis, _space, incr) => splits.map((v) => clockLabel(v, incr >= 60)) },
        {
          ...axis,
          size: 56,
          values: (_u, splits) => (kind === 'us' ? usAxisLabels(splits) : splits.map((v) => (kind === 'fraction' ? `${Math.round(v * 100)}%`
            : kind === 'bytes' ? `${axisNum(v)}B` : axisNum(v)))),
        },
      ],
      series: [
        { label: '', value: (_u, v) => (v == null ? '—' : new Date(v * 1000).toLocaleTimeString()) },
        ...defs.map((s, i) => ({
          label: s.label,
          stroke: s.color ?? seriesColor(i),
          width: 1.5,
          points: { show: false },
          spanGaps: false,
          value: (_u: uPlot, v: number | null) => fmt(v),
        })),
      ],
      plugins: [this.bandsPlugin(), markers],
      // uPlot rewrites the legend's values on its own updates: write ours back while not hovered.
      hooks: { setLegend: [() => this.writeLegend()] },
    };
    this.u = new uPlot(opts, this.data(defs), this.host);
    this.u.root.dataset.chart = this.def.id;
    // In series order, whatever order writeLegend puts them in on screen.
    this.legendRows = Array.from(this.u.root.querySelectorAll<HTMLElement>('.u-legend .u-series'));
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
   * What uPlot draws: the rows in the visible window, binned (bins.ts): each bin's mean as the
   * line, its min-max as the band the bands plugin draws under it. The window ends at the VM's
   * newest row of any kind, so every chart shows the same minutes.
   */
  private data(defs: SeriesDef[]): uPlot.AlignedData {
    const { rows, from, to } = this.visible();
    const w = this.opts.windowSec();
    const binSec = binSeconds(w, this.width - AXIS_PX);
    // The oldest bin whole too: its rows from before the window's start are taken in (its point
    // may lie just off the plot's left edge).
    const first = to > from ? rows.lowerBound(rows.x[to - 1]! - Math.ceil(w / binSec) * binSec + 2e-6) : from;
    const binned = binRows(rows.x, defs.map((s) => rows.cols.get(s.key)), Math.min(first, from), to, binSec, this.ratios(defs, rows));
    this.binned = binned;
    this.bandMax = highest(binned.max);
    return [binned.x, ...binned.mean] as uPlot.AlignedData;
  }

  private binned: Binned | null = null;
  private bandMax = 0;
  private labels: PlacedLabel[] = [];

  /** The rows in the visible window: [from, to) of the chart's rows. */
  private visible(): { rows: Rows; from: number; to: number } {
    const rows = this.rows();
    const n = rows.length;
    const newest = this.telemetry.newestX();
    const hi = Number.isFinite(newest) ? newest : Date.now() / 1000;
    return { rows, from: rows.lowerBound(hi - this.opts.windowSec()), to: n };
  }

  private ratios(defs: SeriesDef[], rows: Rows): (RatioCols | undefined)[] {
    return defs.map((s) => {
      const num = s.ratio && rows.cols.get(s.ratio.num);
      const den = s.ratio && rows.cols.get(s.ratio.den);
      return num && den ? { num, den } : undefined;
    });
  }

  /**
   * New data arrived: redraw in a frame of the draw queue's choosing — only while the chart is on
   * screen, and no more often than the newest data moves the plot by a pixel (a 10-minute window
   * advances a pixel about every second).
   */
  private readonly queued = () => {
    if (!this.onScreen) {
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

  private onScreen = true;
  private stale = false;
  private lastDraw = 0;
  private timer: ReturnType<typeof setTimeout> | 0 = 0;

  /** The chart scrolled into or out of view (IntersectionObserver). */
  setVisible(v: boolean): void {
    this.onScreen = v;
    // Back on screen: always redraw (data may have come, and time has moved the window on).
    if (v) {
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
    const { rows, from, to } = this.visible();
    const defs = this.currentDefs;
    return windowStats(defs.map((s) => rows.cols.get(s.key)), from, to, this.totalKind(), this.ratios(defs, rows));
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
    const dpr = devicePixelRatio || 1;
    const drawn: Drawn = {
      lineMax: highest((u?.data.slice(1) ?? []) as (number | null)[][]), bandMax: this.bandMax, binSec: this.binned?.binSec ?? 0,
      labels: this.labels, xMax: u?.scales.x?.max ?? null, yMax: u?.scales.y?.max ?? null,
      plot: u ? [u.bbox.left / dpr, (u.bbox.left + u.bbox.width) / dpr] : [0, 0], xLabels: axisLabels(u, 0), yLabels: axisLabels(u, 1),
    };
    this.opts.onDraw({ points: n, last, hasData, window: stats, drawn });
  }

  private stats: WindowStats | null = null;

  /**
   * The legend's values while nobody hovers: each series' mean · max over the visible window, and
   * the first row saying so. A chart of named series (kinds of exits, latencies, devices) lists
   * them by mean, largest first, so the ones that matter lead; the legend wraps, never clips.
   */
  private writeLegend(): void {
    const u = this.u;
    const stats = this.stats;
    if (!u || !stats || this.hovering) return;
    const rows = this.legendRows;
    const f = this.fmt();
    rows.forEach((tr, i) => {
      const cell = tr.querySelector<HTMLElement>('.u-value');
      const s = stats.series[i - 1];
      const text = i === 0 ? `each: mean · max, last ${windowText(this.opts.windowSec())}` : !s || s.max === null ? '—' : `${f(s.mean)} · ${f(s.max)}`;
      if (cell && cell.textContent !== text) cell.textContent = text;
    });
    if (!this.def.legendByValue || rows.length < 3) return;
    const order = rows.slice(1).map((tr, i) => ({ tr, m: stats.series[i]?.mean ?? -1 })).sort((a, b) => b.m - a.m).map((x) => x.tr);
    const parent = rows[0]!.parentElement;
    const now = Array.from(parent?.children ?? []).slice(1);
    if (parent && order.some((tr, i) => now[i] !== tr)) parent.append(...order);
  }

  private legendRows: HTMLElement[] = [];

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

  /**
   * Each bin's min-max of each series as a faint band in the series' colour, drawn under the
   * lines (after the axes): the peaks a bin's mean hides stay in sight without being the ink the
   * eye reads.
   */
  private bandsPlugin(): uPlot.Plugin {
    return {
      hooks: {
        drawAxes: [
          (u: uPlot) => {
            const b = this.binned;
            if (!b || !b.x.length) return;
            const ctx = u.ctx;
            const { left, top, width, height } = u.bbox;
            const half = Math.max(1, (u.valToPos(b.binSec, 'x', true) - u.valToPos(0, 'x', true)) / 2);
            ctx.save();
            ctx.beginPath();
            ctx.rect(left, top, width, height);
            ctx.clip();
            ctx.globalAlpha = 0.2;
            this.currentDefs.forEach((d, k) => {
              const lo = b.min[k]!;
              const hi = b.max[k]!;
              ctx.fillStyle = d.color ?? seriesColor(k);
              for (let i = 0; i < b.x.length; i++) {
                const a = lo[i];
                const z = hi[i];
                if (a == null || z == null || z <= a) continue;
                const x = u.valToPos(b.x[i]!, 'x', true);
                const y1 = u.valToPos(z, 'y', true);
                const y0 = u.valToPos(a, 'y', true);
                ctx.fillRect(x - half, y1, 2 * half, Math.max(1, y0 - y1));
              }
            });
            ctx.restore();
          },
        ],
      },
    };
  }

  private markersPlugin(): uPlot.Plugin {
    const t = this.telemetry;
    return {
      hooks: {
        draw: [
          (u: uPlot) => {
            if (!t.markers.length) { this.labels = []; return; }
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
            const dpr = devicePixelRatio;
            const shown = t.markers.filter((m) => m.x >= xmin && m.x <= xmax).map((m) => ({ x: Math.round(u.valToPos(m.x, 'x', true)), label: m.label }));
            for (const m of shown) {
              ctx.beginPath();
              ctx.moveTo(m.x, top);
              ctx.lineTo(m.x, top + height);
              ctx.stroke();
            }
            // Labels by their lines, inside the plot, never on each other (marker-labels.ts).
            const lineH = 11 * dpr;
            const placed = placeMarkerLabels(shown, (s) => ctx.measureText(s).width, left, left + width, 3, 3 * dpr);
            for (const l of placed) ctx.fillText(l.text, l.tx, top + 2 * dpr + l.line * lineH);
            // In CSS pixels, for the figure's data attribute (what a test reads of the drawing).
            this.labels = placed.map((l) => ({ ...l, x: l.x / dpr, tx: l.tx / dpr, width: l.width / dpr }));
            ctx.restore();
          },
        ],
      },
    };
  }
}

/** The rows a chart draws from. */
export function rowsOf(t: VmTelemetry, def: Pick<ChartDef, 'source'>): Rows {
  return def.source === 'samples' ? t.samples : def.source === 'devices' ? t.devices : def.source === 'guest' ? t.guestIdle.rows : t.latency;
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
