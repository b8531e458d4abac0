// A tune's result (the advisor's Advice): the recommendation and Apply, why (in words that cite
// the counters), the confidence, the price in host CPU, the curve of the goal against
// halt-poll-ns, every configuration measured and what was not run. Shown on the VM page's
// Advisor panel and in the experiments list.
import { useState } from 'react';
import type { AdviceDto, ExperimentDetail, VmRecord } from '../../../../electron/service/api.ts';
import { api, errorMessage, useApp } from '../../state/app.ts';

type Curve = AdviceDto['curve'];

const pct = (v: number | undefined) => (v === undefined ? '—' : `${Math.round(v * 100)} %`);
const msOf = (v: number | null | undefined) => (v === undefined || v === null ? '—' : `${+(v / 1e6).toPrecision(3)} ms`);
const nsLabel = (v: number) => (v === 0 ? '0' : v >= 1e6 ? `${+(v / 1e6).toPrecision(3)} ms` : v >= 1e3 ? `${+(v / 1e3).toPrecision(3)} µs` : `${v} ns`);
const figure = (v: number, unit: string) => (!Number.isFinite(v) ? '—' : unit === 'ns host CPU' ? `${msOf(v)} host CPU` : `${+v.toPrecision(4)} ${unit}`);

export function TuneResult({ detail, vm }: { detail: ExperimentDetail; vm?: VmRecord }) {
  const a = detail.advice!;
  const vms = useApp((s) => s.vms);
  const target = vm ?? vms.find((v) => v.id === detail.tune?.vmId);
  const [applying, setApplying] = useState(false);
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const change = a.recommendation.kind === 'change' ? a.recommendation : undefined;
  const running = target && target.status.state !== 'stopped';
  const apply = async () => {
    if (!target) return;
    setApplying(true);
    setError(null);
    try {
      const rec = await api.applyTune(detail.id, target.id);
      setStatus(`Applied: ${rec.config.name} now has ${change!.label} (machine ${rec.config.machine}).`);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setApplying(false);
    }
  };
  return (
    <div className="tune-result" data-testid="tune-result" data-recommendation={a.recommendation.kind} data-experiment-id={detail.id}>
      <h3>Recommendation: {change ? change.label : 'keep the current configuration'}</h3>
      <p data-testid="tune-headline">{a.headline}</p>
      {detail.recommendedConfig && <p className="small">Configuration: <code data-testid="tune-config">{detail.recommendedConfig}</code></p>}
      <p className="small" data-testid="tune-confidence"><strong>Confidence:</strong> {a.confidence.text}</p>
      {change && target && (
        <div className="toolbar">
          <button type="button" className="btn primary" disabled={applying || !!running}
            title={running ? 'Stop the VM first: a running VM\'s settings are fixed at boot' : `Store ${change.label} in ${target.config.name}'s configuration`}
            onClick={() => void apply()}>{applying ? 'Applying…' : `Apply to ${target.config.name}`}</button>
          {running && <span className="muted small">Stop the VM to apply: its settings are fixed at boot.</span>}
        </div>
      )}
      {detail.applied && !status && <p className="hint small">Applied to {detail.applied.vmName} on {new Date(detail.applied.at).toLocaleString()}: <code>{detail.applied.config}</code></p>}
      {status && <p className="hint" role="status">{status}</p>}
      {error && <p className="error" role="alert">{error}</p>}
      <h4>Why</h4>
      <ul className="tune-why">
        {a.why.map((w, i) => <li key={i}>{w}</li>)}
        {a.prediction && <li data-testid="tune-prediction">{a.prediction.text}</li>}
      </ul>
      {a.curve.length > 1 && <CurveChart curve={a.curve} unit={a.metricUnit} title={`${a.goalText} against halt-poll-ns`} />}
      <table className="results tune-points" aria-label="Every configuration measured">
        <thead>
          <tr><th>configuration</th><th>runs</th><th>median</th><th>ratio (95 % CI)</th><th>poll hit rate</th><th>halt exits/s</th><th>host CPU/run</th><th>poll CPU/run</th><th /></tr>
        </thead>
        <tbody>
          {[a.current, ...a.points].map((p) => (
            <tr key={p.label} className={change?.label === p.label ? 'recommended' : undefined}>
              <td><code>{p.label}</code></td>
              <td>{p.runs}</td>
              <td>{figure(p.median, a.metricUnit)}</td>
              <td>{p.comparison?.ratio != null ? `${p.comparison.ratio.toFixed(2)}×${p.comparison.ci95 ? ` (${p.comparison.ci95[0].toFixed(2)}–${p.comparison.ci95[1].toFixed(2)})` : ''}` : '1.00×'}</td>
              <td>{pct(p.pollHitRate)}</td>
              <td>{p.haltExitsPerS === undefined ? '—' : Math.round(p.haltExitsPerS)}</td>
              <td>{msOf(p.hostCpuNs)}</td>
              <td>{msOf(p.pollNs)}</td>
              <td className="small">{p.label === 'current' ? 'current' : p.stopped ? `stopped early: ${p.stopped}` : p.meetsBound === false ? 'misses the bound' : p.comparison?.verdict ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {a.price && (
        <table className="results tune-price" aria-label="Price in host CPU per run">
          <thead><tr><th>host CPU per run (medians)</th><th>current</th><th>recommended</th></tr></thead>
          <tbody>
            <tr><td>vCPU threads</td><td>{msOf(a.price.hostCpuNs[0])}</td><td>{msOf(a.price.hostCpuNs[1])}</td></tr>
            <tr><td>of which polling</td><td>{msOf(a.price.pollNs[0])}</td><td>{msOf(a.price.pollNs[1])}</td></tr>
            <tr><td>halted, waiting</td><td>{msOf(a.price.haltWaitNs[0])}</td><td>{msOf(a.price.haltWaitNs[1])}</td></tr>
          </tbody>
        </table>
      )}
      {a.skipped.length > 0 && (
        <details className="small">
          <summary>Not run ({a.skipped.length})</summary>
          <ul>{a.skipped.map((s) => <li key={s.label}><code>{s.label}</code>: {s.reason}</li>)}</ul>
        </details>
      )}
      <p className="muted small">Budget {Math.round(a.budget.budgetMs / 1000)} s, used {Math.round(a.budget.usedMs / 1000)} s: {a.budget.rounds} rounds, {a.budget.runs} runs{a.budget.stoppedBy === 'budget' ? ', stopped by the budget' : ''}.</p>
    </div>
  );
}

/** The goal's median against halt-poll-ns (log scale; 0 at the left edge), with each point's 95 % interval. */
function CurveChart({ curve, unit, title }: { curve: Curve; unit: string; title: string }) {
  const W = 520;
  const H = 200;
  const pad = { l: 70, r: 16, t: 16, b: 36 };
  const xs = curve.map((p) => p.haltPollNs);
  const logX = (ns: number) => Math.log10(Math.max(ns, 1_000));
  const lo = logX(Math.min(...xs.filter((x) => x > 0), 10_000)) - 0.5;
  const hi = logX(Math.max(...xs, 1_000_000));
  const x = (ns: number) => pad.l + ((ns === 0 ? lo : logX(ns)) - lo) / (hi - lo || 1) * (W - pad.l - pad.r);
  const ys = curve.flatMap((p) => [p.median, ...(p.ci ?? [])]).filter(Number.isFinite);
  const yMin = Math.min(...ys) * 0.95;
  const yMax = Math.max(...ys) * 1.05;
  const y = (v: number) => pad.t + (1 - (v - yMin) / (yMax - yMin || 1)) * (H - pad.t - pad.b);
  const path = curve.filter((p) => Number.isFinite(p.median)).map((p, i) => `${i ? 'L' : 'M'}${x(p.haltPollNs).toFixed(1)},${y(p.median).toFixed(1)}`).join(' ');
  return (
    <figure className="tune-curve">
      <svg viewBox={`0 0 ${W} ${H}`} width="100%" role="img" aria-label={`${title}: ${curve.map((p) => `${nsLabel(p.haltPollNs)} ${figure(p.median, unit)}`).join(', ')}`} data-testid="tune-curve">
        <line x1={pad.l} y1={H - pad.b} x2={W - pad.r} y2={H - pad.b} className="axis" stroke="currentColor" opacity={0.4} />
        <line x1={pad.l} y1={pad.t} x2={pad.l} y2={H - pad.b} className="axis" stroke="currentColor" opacity={0.4} />
        <text x={pad.l - 6} y={y(yMax) + 10} textAnchor="end" fontSize="10" fill="currentColor">{figure(yMax, unit)}</text>
        <text x={pad.l - 6} y={y(yMin)} textAnchor="end" fontSize="10" fill="currentColor">{figure(yMin, unit)}</text>
        <path d={path} fill="none" stroke="var(--accent, #3b82f6)" strokeWidth={1.5} />
        {curve.map((p) => (
          <g key={p.label}>
            {p.ci && <line x1={x(p.haltPollNs)} x2={x(p.haltPollNs)} y1={y(p.ci[0])} y2={y(p.ci[1])} stroke="currentColor" opacity={0.5} />}
            <circle cx={x(p.haltPollNs)} cy={y(p.median)} r={p.label === 'current' ? 5 : 3.5} fill={p.stopped ? 'var(--bad, #dc2626)' : p.label === 'current' ? 'none' : 'var(--accent, #3b82f6)'}
              stroke="var(--accent, #3b82f6)"><title>{`${p.label}: ${figure(p.median, unit)}${p.pollHitRate !== undefined ? `, polls succeed ${pct(p.pollHitRate)}` : ''}${p.stopped ? ` (stopped early)` : ''}`}</title></circle>
            <text x={x(p.haltPollNs)} y={H - pad.b + 14} textAnchor="middle" fontSize="10" fill="currentColor">{nsLabel(p.haltPollNs)}</text>
          </g>
        ))}
        <text x={(W + pad.l) / 2} y={H - 4} textAnchor="middle" fontSize="10" fill="currentColor">halt-poll-ns (log scale)</text>
      </svg>
      <figcaption className="muted small">{title}; bars: 95 % interval (from the ratio to the current configuration); red: stopped early as clearly worse</figcaption>
    </figure>
  );
}
