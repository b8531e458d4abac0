// What halt polling would do, predicted from the histograms on screen (experiments/halt-poll-model.ts:
// KVM's own grow / shrink rule run over wake-ups drawn from them): per candidate halt-poll-ns the
// share of wake-ups a poll would catch and the host CPU it would burn, a suggestion per goal, and
// the prediction for the value in effect next to what KVM measured in the same window.
import type { HistCounts } from '../../../electron/vmm/telemetry/hist-bins.ts';
import {
  caughtOf, haltPollCandidates, haltPollCurve, haltsPerSecondOf, recommendHaltPoll, wakeDelayDistribution, type HaltPollParams, type HaltPollPrediction,
} from '../../../electron/experiments/halt-poll-model.ts';
import { fmtDuration } from './hist-view.ts';

/** Simulated halts per candidate: fewer than the model's default, recomputed each second. */
const UI_HALTS = 8000;

export interface HaltPollAdviceProps {
  counts: HistCounts;
  /** Seconds the counts cover, and the vCPUs they are of (the CPU a window burns is per second per vCPU). */
  seconds: number;
  vcpus: number;
  pollNs: number | null;
  params: HaltPollParams;
  /** Sets halt-poll-ns on the running VM; absent when it cannot be changed now. */
  onApply?: (ns: number) => void;
}

const pct = (x: number) => `${(x * 100).toFixed(x > 0 && x < 0.1 ? 1 : 0)} %`;

export function HaltPollAdvice({ counts, seconds, vcpus, pollNs, params, onApply }: HaltPollAdviceProps) {
  const dist = wakeDelayDistribution(counts);
  if (dist.halts === 0 || !(seconds > 0)) return null;
  const curve = haltPollCurve(dist, haltPollCandidates(pollNs ?? undefined), params, haltsPerSecondOf(dist, seconds, vcpus), { halts: UI_HALTS });
  const latency = recommendHaltPoll(curve, 'latency');
  const cpu = recommendHaltPoll(curve, 'cpu');
  const now = pollNs === null ? undefined : curve.find((p) => p.maxPollNs === pollNs);
  const measured = caughtOf(counts);
  return (
    <div className="hp-advice" data-testid="halt-poll-advice" data-latency-ns={latency.valueNs ?? ''} data-cpu-ns={cpu.valueNs ?? ''}
      data-predicted-now={now?.caughtShare ?? ''} data-measured-now={measured ?? ''}>
      <h4 className="small">Halt-poll prediction from these histograms</h4>
      <table className="hp-curve small">
        <caption className="sr-only">Predicted share of wake-ups caught and host CPU per candidate halt-poll-ns</caption>
        <tbody>
          <tr><th scope="row">halt-poll-ns</th>{curve.map((p) => <td key={p.maxPollNs} className={cellClass(p, pollNs)}>{p.maxPollNs === 0 ? 'off' : fmtDuration(p.maxPollNs)}</td>)}</tr>
          <tr><th scope="row">wake-ups caught</th>{curve.map((p) => <td key={p.maxPollNs} className={cellClass(p, pollNs)} data-ns={p.maxPollNs} data-caught={p.caughtShare}>{pct(p.caughtShare)}</td>)}</tr>
          <tr><th scope="row">host CPU / vCPU</th>{curve.map((p) => <td key={p.maxPollNs} className={cellClass(p, pollNs)}>{pct(p.pollCpuShare)}</td>)}</tr>
        </tbody>
      </table>
      <ul className="hp-suggest small">
        {[{ r: latency, label: 'Lowest latency' }, { r: cpu, label: 'Least CPU' }].map(({ r, label }) => (
          <li key={r.goal} data-goal={r.goal}>
            <strong>{label}:</strong> {r.why}{' '}
            {onApply && r.valueNs !== null && r.valueNs !== pollNs && (
              <button type="button" className="btn small" data-ns={r.valueNs} onClick={() => onApply(r.valueNs!)}>Apply {r.valueNs === 0 ? 'off' : fmtDuration(r.valueNs)}</button>
            )}
          </li>
        ))}
        {now && measured !== null && (
          <li data-testid="halt-poll-now-vs-predicted">
            At the halt-poll-ns in effect ({pollNs === 0 ? 'off' : fmtDuration(pollNs!)}): predicted {pct(now.caughtShare)} caught, KVM measured {pct(measured)} in this window.
          </li>
        )}
      </ul>
      {(pollNs ?? 0) < curve.at(-1)!.maxPollNs && (
        <p className="muted small" data-testid="halt-poll-sharpen">
          Windows above the one in effect ({!pollNs ? 'off' : fmtDuration(pollNs)}) are predicted from halts that slept, whose times include the
          host's wake-up of the vCPU thread: apply a wider window for a minute to sharpen them.
        </p>
      )}
      <p className="muted small">
        KVM's own rule (grow ×{params.grow} from {fmtDuration(params.growStart)}, shrink ÷{params.shrink || '∞'}) over wake-ups drawn from the
        histograms; a halt that slept after a failed poll is shifted by the mean failed poll (docs/experiments.md).
      </p>
    </div>
  );
}

function cellClass(p: HaltPollPrediction, pollNs: number | null): string {
  return p.maxPollNs === pollNs ? 'num now' : 'num';
}
