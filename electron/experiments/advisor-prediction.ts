// The advisor's start from KVM's histograms: the halt-poll window the current configuration's
// histograms predict for the goal (halt-poll-model.ts), tried first, and afterwards that
// prediction next to what KVM measured at it. Pure.
import {
  caughtOf, haltPollCandidates, haltPollCurve, haltsPerSecondOf, recommendHaltPoll, sumHaltHistograms, wakeDelayDistribution,
  type HaltHistograms, type HaltPollParams,
} from './halt-poll-model.ts';
import type { GoalKind } from './tune-limits.ts';

/** The prediction the search started from, and what the runs at its window measured. */
export interface HaltPollPredictionReport {
  valueNs: number;
  /** Share of wake-ups a poll catches, predicted from the current configuration's runs. */
  predictedCaught: number;
  /** The same share as KVM measured it in the runs at valueNs (caughtOf); absent when none ran. */
  measuredCaught?: number;
  /** The prediction's sentence (recommendHaltPoll). */
  why: string;
  text: string;
}

/** What a run gives the prediction: its histograms and the time they cover (else its wall time). */
type HistRun = { haltHists?: HaltHistograms; haltHistsMs?: number; wallMs: number };

/** Runs' histograms summed (a run without them counts for nothing), and the time they cover. */
function pooled(samples: readonly HistRun[]): { hists: HaltHistograms; seconds: number } | undefined {
  const withHists = samples.filter((s) => s.haltHists);
  if (!withHists.length) return undefined;
  return { hists: sumHaltHistograms(withHists.map((s) => s.haltHists!)), seconds: withHists.reduce((a, s) => a + (s.haltHistsMs ?? s.wallMs), 0) / 1000 };
}

/**
 * The window the current configuration's histograms suggest for `goal` (host-cpu: the least CPU;
 * the others: the most wake-ups caught), or undefined without histograms or halts.
 */
export function predictedWindow(
  baseline: readonly HistRun[], params: HaltPollParams, vcpus: number, goal: GoalKind,
): Omit<HaltPollPredictionReport, 'text'> | undefined {
  const p = pooled(baseline);
  if (!p || p.seconds <= 0) return undefined;
  const dist = wakeDelayDistribution(p.hists);
  if (dist.halts === 0) return undefined;
  const curve = haltPollCurve(dist, haltPollCandidates(), params, haltsPerSecondOf(dist, p.seconds, vcpus));
  const rec = recommendHaltPoll(curve, goal === 'host-cpu' ? 'cpu' : 'latency');
  if (rec.valueNs === null || !rec.point) return undefined;
  return { valueNs: rec.valueNs, predictedCaught: rec.point.caughtShare, why: rec.why };
}

/** The prediction with what the runs at its window measured, in one sentence. */
export function predictionReport(
  p: Omit<HaltPollPredictionReport, 'text'>, runsAtValue: readonly HistRun[],
): HaltPollPredictionReport {
  const at = pooled(runsAtValue);
  const measured = at ? caughtOf(at.hists) : null;
  const pct = (x: number) => `${Math.round(x * 100)} %`;
  const text = `KVM's halt histograms of the current configuration predicted halt-poll-ns=${p.valueNs} (${p.why.replace(/\.$/, '')}); `
    + (measured === null ? 'it was not measured.' : `measured there: ${pct(measured)} of wake-ups caught (predicted ${pct(p.predictedCaught)}).`);
  return { ...p, ...(measured !== null ? { measuredCaught: measured } : {}), text };
}
