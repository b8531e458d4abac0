// An experiment's result: the before/after table (like docs/experiments.md's tables), a bar
// chart of the ratios, and CSV / JSON / PNG export.
import { useEffect, useRef } from 'react';
import type { Comparison, ExperimentDetail, ExperimentResultRow } from '../../../../electron/service/api.ts';
import { si, pct, ratio } from '../../lib/format.ts';
import { palette, onThemeChange } from '../../lib/theme.ts';
import { downloadText, downloadUrl, toCsv, safeName } from '../../lib/export.ts';
import { HistCompare } from './HistCompare.tsx';

const CSV_HEADER = ['config', 'runner', 'unit', 'median', 'min', 'max', 'ratio_to_first', 'ratio_to_reference',
  'halt_exits_per_s', 'poll_hit_rate', 'runs', 'ci95_low', 'ci95_high', 'p', 'verdict', 'ran_as'];

/** The verdict of a row against the first row of its VMM, if it has one. */
function verdictOf(comparisons: readonly Comparison[] | undefined, r: ExperimentResultRow): Comparison | undefined {
  return comparisons?.find((c) => c.candidate === r.config && c.runner === r.runner);
}

function pText(p: number): string {
  return p < 0.001 ? 'p < 0.001' : `p = ${p.toFixed(3)}`;
}

/** One display scale for a column of results: ns-based units become ns, µs, ms or s by size. */
function displayUnit(unit: string, sample: number): { label: string; scale: number } {
  const m = /^ns(\/.*)?$/.exec(unit);
  if (!m) return { label: unit, scale: 1 };
  const per = m[1] ?? '';
  const a = Math.abs(sample);
  const [name, scale] = a >= 1e9 ? ['s', 1e-9] : a >= 1e6 ? ['ms', 1e-6] : a >= 1e3 ? ['µs', 1e-3] : ['ns', 1];
  return { label: `${name}${per}`, scale };
}

function num(v: number, scale: number): string {
  const x = v * scale;
  const a = Math.abs(x);
  return a >= 1e6 || (a < 0.01 && a !== 0) ? si(x) : a >= 100 ? x.toFixed(0) : a >= 10 ? x.toFixed(1) : x.toFixed(2);
}

export function ResultsView({ detail }: { detail: ExperimentDetail }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const rows = detail.rows;
  const refLabel = rows.some((r) => r.runner === 'bare') ? 'bare' : rows.some((r) => r.runner === 'qemu') ? 'QEMU' : 'reference';
  const base = `unhalt-${safeName(detail.spec.workload)}-${detail.id.slice(0, 8)}`;
  const unit = displayUnit(rows[0]?.unit ?? '', rows[0]?.median ?? 0);
  return (
    <div className="results">
      <div className="table-wrap">
        <table className="results-table" data-testid="results-table">
          <caption className="sr-only">Results per configuration</caption>
          <thead>
            <tr>
              <th scope="col">config</th>
              <th scope="col">runner</th>
              <th scope="col" className="num">median{unit.label ? ` (${unit.label})` : ''}</th>
              <th scope="col" className="num">min–max</th>
              <th scope="col" className="num">ratio to first</th>
              <th scope="col" className="num">ratio to {refLabel}</th>
              <th scope="col" className="num">halt_exits/s</th>
              <th scope="col" className="num">poll hit rate</th>
              <th scope="col">verdict vs first</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r, i) => {
              const v = verdictOf(detail.comparisons, r);
              return (
              <tr key={i} className={`runner-${r.runner}`} data-config={r.config} data-runner={r.runner} data-verdict={v?.verdict ?? ''}>
                <th scope="row">{r.config}
                  {r.caveat && <span className="badge ran-as" title={r.caveat}> ran differently†</span>}
                </th>
                <td>{r.runner}</td>
                <td className="num">{num(r.median, unit.scale)}</td>
                <td className="num">{num(r.min, unit.scale)} – {num(r.max, unit.scale)}</td>
                <td className="num">{ratio(r.ratioToFirst)}</td>
                <td className="num">{ratio(r.ratioToReference)}</td>
                <td className="num">{si(r.haltExitsPerS)}</td>
                <td className="num">{pct(r.pollHitRate)}</td>
                <td className="verdict">{v ? <span className={`badge verdict-${v.verdict.replace(/ /g, '-')}`} title={v.text}>{v.verdict}</span>
                  : rows.find((x) => x.runner === r.runner) === r ? <span className="muted small">baseline</span> : '—'}</td>
              </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      {(detail.comparisons?.length ?? 0) > 0 && (
        <ul className="verdicts" aria-label="Verdicts">
          {detail.comparisons!.map((c, i) => (
            <li key={i} data-config={c.candidate} data-runner={c.runner} data-verdict={c.verdict}>
              <strong>{c.candidate}</strong> vs {c.baseline} <span className="muted">({c.runner}, {c.n[1]} vs {c.n[0]} runs)</span>:{' '}
              {ratio(c.ratio)}{c.ci95 ? `, 95 % CI ${c.ci95[0].toFixed(2)}–${c.ci95[1].toFixed(2)}` : ''}{c.p !== null ? `, ${pText(c.p)}` : ''}
              {' — '}<span className={`badge verdict-${c.verdict.replace(/ /g, '-')}`}>{c.verdict}</span>
              {rows.some((r) => r.caveat && r.runner === c.runner && (r.config === c.candidate || r.config === c.baseline))
                ? <span className="muted small"> († not the knob it is labelled with)</span> : null}
            </li>
          ))}
        </ul>
      )}
      {rows.some((r) => r.caveat) && (
        <ul className="caveats" aria-label="Rows that ran differently from their label">
          {rows.filter((r) => r.caveat).map((r, i) => <li key={i} className="small">† {r.config} ({r.runner}) {r.caveat}</li>)}
        </ul>
      )}
      {(detail.notes?.length ?? 0) > 0 && (
        <ul className="notes" aria-label="Notes">
          {detail.notes!.filter((n) => !rows.some((r) => r.caveat && n === `${r.config} (${r.runner}): ${r.caveat}`))
            .map((n, i) => <li key={i} className="small">{n}</li>)}
        </ul>
      )}
      {(detail.failures?.length ?? 0) > 0 && (
        <ul className="failures" aria-label="Failed runs">
          {detail.failures!.map((f, i) => <li key={i} className="small error">failed: {f.config} ({f.runner}) run {f.run}: {f.error}</li>)}
        </ul>
      )}
      <p className="muted small">
        {/^(ns|us|µs|ms|s)(\/.*)?$/.test(rows[0]?.unit ?? '') ? 'Lower is better (a time).' : 'Higher is better (a count or rate).'}
        {' '}Ratios compare medians; each median is over {detail.spec.runs} run{detail.spec.runs === 1 ? '' : 's'}.
        {' '}A difference is significant when the bootstrap 95 % interval of the ratio excludes 1 and the Mann-Whitney rank test gives p &lt; 0.05.
      </p>
      <RatioBars rows={rows} canvasRef={canvas} refLabel={refLabel} />
      <HistCompare detail={detail} />
      <div className="export-row" role="group" aria-label="Export">
        <button type="button" className="btn small" onClick={() => downloadText(`${base}.csv`, toCsv(CSV_HEADER, rows.map((r) => csvRow(r, verdictOf(detail.comparisons, r)))), 'text/csv')}>Export CSV</button>
        <button type="button" className="btn small" onClick={() => downloadText(`${base}.json`, JSON.stringify(detail, null, 2), 'application/json')}>Export JSON</button>
        <button type="button" className="btn small" onClick={() => { const u = canvas.current?.toDataURL('image/png'); if (u) downloadUrl(`${base}.png`, u); }}>Export PNG</button>
      </div>
      {Object.keys(detail.environment ?? {}).length > 0 && (
        <details className="env">
          <summary>Environment</summary>
          <pre>{JSON.stringify(detail.environment, null, 2)}</pre>
        </details>
      )}
    </div>
  );
}

function csvRow(r: ExperimentResultRow, v: Comparison | undefined): unknown[] {
  return [r.config, r.runner, r.unit, r.median, r.min, r.max, r.ratioToFirst, r.ratioToReference, r.haltExitsPerS, r.pollHitRate, r.runs,
    v?.ci95?.[0] ?? null, v?.ci95?.[1] ?? null, v?.p ?? null, v?.verdict ?? null, r.caveat ?? null];
}

const BAR_H = 16;
const ROW_H = 40;
/** A row that ran differently from its label gets a line saying how, under its bars. */
const CAVEAT_H = 14;

function RatioBars({ rows, canvasRef, refLabel }: { rows: ExperimentResultRow[]; canvasRef: React.RefObject<HTMLCanvasElement | null>; refLabel: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = canvasRef.current!;
    const draw = () => {
      const width = Math.max(300, box.current?.clientWidth ?? 600);
      const tops: number[] = [];
      let acc = 10;
      for (const r of rows) { tops.push(acc); acc += ROW_H + (r.caveat ? CAVEAT_H : 0); }
      const height = acc + 30;
      const dpr = window.devicePixelRatio || 1;
      el.width = width * dpr;
      el.height = height * dpr;
      el.style.width = `${width}px`;
      el.style.height = `${height}px`;
      const ctx = el.getContext('2d')!;
      const p = palette();
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = p.surface;
      ctx.fillRect(0, 0, width, height);
      const labelW = Math.min(220, width * 0.35);
      const plotW = width - labelW - (rows.some((r) => r.ratioToReference !== null) ? 130 : 60);
      const max = Math.max(1.2, ...rows.flatMap((r) => [r.ratioToFirst ?? 0, r.ratioToReference ?? 0]));
      const x = (v: number) => labelW + (v / max) * plotW;
      ctx.font = '12px system-ui, sans-serif';
      ctx.textBaseline = 'middle';
      rows.forEach((r, i) => {
        const y = tops[i]!;
        ctx.fillStyle = p.text;
        const label = `${r.config}${r.caveat ? ' †' : ''} · ${r.runner}`;
        if (r.caveat) {
          ctx.fillStyle = p.muted;
          ctx.font = 'italic 11px system-ui, sans-serif';
          const text = `† ${r.caveat}`;
          const room = Math.floor((width - 8) / 6);
          ctx.fillText(text.length > room ? `${text.slice(0, room - 1)}…` : text, 4, y + BAR_H + 8 + CAVEAT_H / 2);
          ctx.font = '12px system-ui, sans-serif';
          ctx.fillStyle = p.text;
        }
        ctx.fillText(label.length > 34 ? `${label.slice(0, 33)}…` : label, 4, y + BAR_H / 2);
        if (r.ratioToFirst !== null) {
          ctx.fillStyle = p.series[0] || '#36c';
          ctx.fillRect(labelW, y, x(r.ratioToFirst) - labelW, BAR_H);
          ctx.fillStyle = p.text;
          ctx.fillText(ratio(r.ratioToFirst), x(r.ratioToFirst) + 4, y + BAR_H / 2);
        }
        if (r.ratioToReference !== null) {
          ctx.fillStyle = p.series[1] || '#c63';
          ctx.fillRect(labelW, y + BAR_H + 2, x(r.ratioToReference) - labelW, BAR_H / 2);
          ctx.fillStyle = p.muted;
          ctx.font = '11px system-ui, sans-serif';
          ctx.fillText(`${ratio(r.ratioToReference)} vs ${refLabel}`, x(r.ratioToReference) + 4, y + BAR_H + 2 + BAR_H / 4);
          ctx.font = '12px system-ui, sans-serif';
        }
      });
      // 1.0 line
      ctx.strokeStyle = p.marker;
      ctx.setLineDash([4, 3]);
      ctx.beginPath();
      ctx.moveTo(x(1), 4);
      ctx.lineTo(x(1), height - 24);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = p.muted;
      ctx.font = '11px system-ui, sans-serif';
      ctx.fillText('1.0×', x(1) - 10, height - 14);
      // legend
      ctx.fillStyle = p.series[0] || '#36c';
      ctx.fillRect(labelW, height - 18, 10, 8);
      ctx.fillStyle = p.muted;
      ctx.fillText('ratio to the first configuration', labelW + 14, height - 14);
      if (rows.some((r) => r.ratioToReference !== null)) {
        const off = labelW + 200;
        ctx.fillStyle = p.series[1] || '#c63';
        ctx.fillRect(off, height - 18, 10, 4);
        ctx.fillStyle = p.muted;
        ctx.fillText(`ratio to ${refLabel}`, off + 14, height - 14);
      }
    };
    draw();
    const ro = new ResizeObserver(() => draw());
    if (box.current) ro.observe(box.current);
    const off = onThemeChange(draw);
    return () => {
      ro.disconnect();
      off();
    };
  }, [rows, refLabel]);
  return (
    <div className="bars" ref={box}>
      <canvas ref={canvasRef} role="img" aria-label={`Ratios: ${rows.map((r) => `${r.config} ${r.runner} ${ratio(r.ratioToFirst)}${r.caveat ? ` († ${r.caveat})` : ''}`).join('; ')}`} />
    </div>
  );
}
