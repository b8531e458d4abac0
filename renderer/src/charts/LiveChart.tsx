// One live chart: a StreamChart mounted in a box of fixed height, resized to its container's
// width; readouts and test data attributes are written straight to the DOM on each redraw.
import { useEffect, useRef } from 'react';
import { StreamChart, chartPng, rowsOf, PLOT_HEIGHT } from './stream-chart.ts';
import type { ChartDef } from './stream-chart.ts';
import { telemetryFor } from './telemetry-store.ts';
import { onThemeChange } from '../lib/theme.ts';
import { downloadUrl, safeName } from '../lib/export.ts';
import { chartFormat, windowText } from './stream-chart.ts';
import { ChartHelp } from './ChartHelp.tsx';

export function LiveChart({ vmId, vmName, def, windowSec, note, emptyText }: {
  vmId: string;
  vmName: string;
  def: ChartDef;
  windowSec: number;
  note?: React.ReactNode;
  /** What the empty chart says, where this VM has a better reason than the chart's own (def.empty). */
  emptyText?: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<HTMLDivElement>(null);
  const readout = useRef<HTMLSpanElement>(null);
  const empty = useRef<HTMLDivElement>(null);
  const exportNote = useRef<HTMLSpanElement>(null);
  const chart = useRef<StreamChart | null>(null);
  const windowRef = useRef(windowSec);
  windowRef.current = windowSec;
  const emptyRef = useRef(emptyText);
  emptyRef.current = emptyText;

  useEffect(() => {
    const t = telemetryFor(vmId);
    let nonZero = 0;
    let counted = 0;
    let lastReadout = 0;
    let readoutWindow = windowRef.current;
    const readoutText = document.createTextNode('');
    readout.current!.replaceChildren(readoutText);
    const c = new StreamChart(plot.current!, t, def, {
      windowSec: () => windowRef.current,
      onDraw: ({ points, last, hasData, window, drawn }) => {
        const el = box.current;
        if (!el) return;
        const vals = last.filter((v): v is number => v !== null);
        const sums = def.id !== 'exits-by-kind' && (def.total ?? (def.kind === 'rate' || def.kind === 'bytes' ? 'sum' : 'max')) === 'sum';
        const total = vals.length ? (sums ? vals.reduce((a, b) => a + b, 0) : Math.max(...vals)) : null;
        // Rows received with a non-zero value in any series (cumulative; the end-to-end test reads it).
        // `counted` is in absolute rows (rows dropped by trims included), so trims keep its place.
        const rows = rowsOf(t, def);
        const total0 = rows.dropped + points;
        if (total0 < counted) counted = 0; // history was replaced
        if (total0 > counted) {
          const cols = def.series(t).map((s) => rows.cols.get(s.key)).filter((x) => x !== undefined);
          for (let i = Math.max(0, counted - rows.dropped); i < points; i++) if (cols.some((col) => col[i]! > 0)) nonZero++;
          counted = total0;
        }
        el.dataset.points = String(points);
        el.dataset.latest = total === null ? '' : String(total);
        el.dataset.nonzeroPoints = String(nonZero);
        el.dataset.windowMax = window.total.max === null ? '' : String(window.total.max);
        el.dataset.windowMean = window.total.mean === null ? '' : String(window.total.mean);
        // What is drawn: the top of the lines (bin means) and of the bands (bin peaks), each
        // series' window mean, the bin width, and where the marker labels went (CSS px).
        el.dataset.lineMax = String(drawn.lineMax);
        el.dataset.bandMax = String(drawn.bandMax);
        el.dataset.seriesMeans = window.series.map((s) => (s.mean === null ? '' : String(s.mean))).join(' ');
        el.dataset.binSec = String(drawn.binSec);
        el.dataset.xMax = String(drawn.xMax ?? '');
        el.dataset.yMax = String(drawn.yMax ?? '');
        el.dataset.plot = drawn.plot.map((v) => v.toFixed(1)).join(' ');
        el.dataset.xLabels = drawn.xLabels.join('|');
        el.dataset.yLabels = drawn.yLabels.join('|');
        el.dataset.markerLabels = JSON.stringify(drawn.labels.map((l) => ({ x: +l.x.toFixed(1), tx: +l.tx.toFixed(1), w: +l.width.toFixed(1), line: l.line, text: l.text })));
        // The readout is text in the layout: change it at most twice a second, and only when it differs.
        const now = performance.now();
        if (now - lastReadout >= 500 || readoutWindow !== windowRef.current) {
          lastReadout = now;
          readoutWindow = windowRef.current;
          // What the header says is what it is, over the visible window: the highest point drawn
          // (a bin's peak: the top of the bands) and the mean of the chart's total (all vCPUs
          // summed for rates, the first series, or the mean of every value; hits over attempts
          // for the poll hit rate).
          const { max, mean } = window.total;
          const f = chartFormat(def.kind);
          const [maxOf, meanOf] = headerScopes(def, def.series(t)[0]?.label ?? '');
          const last = `last ${windowText(windowRef.current)}`;
          // One scope for both ("per vCPU") goes in the parentheses; two ("per vCPU", "all vCPUs") go by their figures.
          const text = max === null ? '' : maxOf === meanOf ? `max ${f(max)} · mean ${f(mean)} (${maxOf ? `${maxOf.trim()}, ` : ''}${last})`
            : `max ${f(max)}${maxOf} · mean ${f(mean)}${meanOf} (${last})`;
          if (readoutText.nodeValue !== text) readoutText.nodeValue = text;
        }
        const isEmpty = !hasData;
        if (hasData && exportNote.current?.textContent) exportNote.current.textContent = '';
        if (empty.current && empty.current.hidden === isEmpty) empty.current.hidden = !isEmpty;
      },
    });
    chart.current = c;
    const ro = new ResizeObserver((entries) => {
      const w = entries[0]?.contentRect.width;
      if (w) c.setWidth(w);
    });
    ro.observe(plot.current!);
    const io = new IntersectionObserver((entries) => {
      for (const e of entries) c.setVisible(e.isIntersecting);
    });
    io.observe(box.current!);
    const offTheme = onThemeChange(() => c.refresh());
    return () => {
      ro.disconnect();
      io.disconnect();
      offTheme();
      c.destroy();
      chart.current = null;
    };
  }, [vmId, def]);

  useEffect(() => {
    chart.current?.refresh();
  }, [windowSec]);

  // Judged at the click from the data itself, not from the last draw: a chart off screen does not
  // draw, so a flag set by drawing would be stale. An empty chart gives no picture, and says why.
  const exportPng = () => {
    const c = chart.current;
    const note = exportNote.current;
    if (!c || !note) return;
    if (c.windowStats().total.max === null) {
      note.textContent = `Nothing to export: no data in the last ${windowText(windowRef.current)}${(emptyRef.current ?? def.empty) ? ` (${emptyRef.current ?? def.empty})` : ''}.`;
      return;
    }
    note.textContent = '';
    const url = chartPng(c, `${vmName}: ${def.title}`);
    if (url) downloadUrl(`${safeName(vmName)}-${def.id}.png`, url);
  };

  return (
    <figure className="chart" ref={box} data-chart={def.id} aria-labelledby={`${vmId}-${def.id}-t`}>
      <figcaption className="chart-head">
        <span className="chart-title" id={`${vmId}-${def.id}-t`}>{def.title}</span>
        <span className="chart-readout" ref={readout} />
        <button type="button" className="icon-btn" onClick={exportPng} aria-label={`Export ${def.title} as PNG`} title="Export PNG">⤓</button>
      </figcaption>
      <ChartHelp text={def.help} />
      <span className="chart-export-note" role="status" ref={exportNote} />
      {note}
      <div className="chart-plot" ref={plot} style={{ minHeight: PLOT_HEIGHT + 46 }}>
        <div className="chart-empty" ref={empty}>{emptyText ?? def.empty}</div>
      </div>
    </figure>
  );
}

/** What the header's max and mean are of: " per vCPU", " all vCPUs", " all"... */
function headerScopes(def: ChartDef, first: string): [string, string] {
  const total = def.total ?? (def.kind === 'rate' || def.kind === 'bytes' ? 'sum' : 'max');
  const perVcpu = def.source === 'samples' || def.source === 'guest';
  const one = def.source === 'devices' ? ' per series' : perVcpu ? ' per vCPU' : '';
  if (total === 'first') return [` ${first}`, ` ${first}`];
  if (total === 'sum') return [one, def.source === 'devices' ? ' all devices' : ' all vCPUs'];
  return [one, def.source === 'devices' ? ' per series' : perVcpu ? ' per vCPU' : ''];
}
