// The tuning advisor's search, pure: which knob settings to try, in what order, how many runs
// each, when a region is clearly worse, when the budget is spent, and what the runs say. It never
// starts a VM itself: `measure` runs one round (the current configuration and a candidate,
// alternately, tune.ts over compareConfigs), and `now` is the clock, so unit tests drive it with
// synthetic measurements and a synthetic clock.
//
// The search, in stages (each round = ROUND_RUNS runs of the current configuration alternating
// with ROUND_RUNS runs of one candidate):
// 1. halt-poll-ns, coarse: 0, 100 µs, 1 ms, 4 ms;
// 2. halt-poll-ns, fine: 10 µs, 30 µs, 300 µs, 2 ms, nearest the best first; a value between two
//    measured neighbours that are both clearly worse is skipped (the region is clearly worse);
// 3. variants around the best so far: cpu-pm=on, kvm-pv-unhalt toggled, pinning;
// 4. refinement: more rounds for the leader (and a close runner-up) until the leader is
//    significant, a per-candidate cap, or the budget.
// Clearly worse = significantly worse (stats.ts: CI excludes 1 and p < 0.05) than the current
// configuration or than the best candidate; such a candidate gets no more rounds. Only what this
// host can run is tried (`runnable`, the one runnability rule). A round starts only when its
// estimated cost (the runs so far, or the prior before any) fits in what is left of the budget.
//
// A recommendation must be significantly better than the current configuration after a
// Bonferroni correction for the number of candidates measured (p < 0.05 / k and the 95 % CI
// excludes 1): trying many knobs must not turn a chance difference into advice. When nothing
// passes, the advice is to keep the current configuration — a result, not a failure.
import { ALPHA, compareSamples, median, type Better, type Comparison } from './stats.ts';
import { GOAL_KINDS, type GoalKind } from './tune-limits.ts';
import type { VmConfig } from '../vmm/config/vm-config.ts';
import type { HaltHistograms, HaltPollParams } from './halt-poll-model.ts';
import { predictedWindow, predictionReport, type HaltPollPredictionReport } from './advisor-prediction.ts';

export { GOAL_KINDS, type GoalKind };

export interface Goal {
  kind: GoalKind;
  /** host-cpu: the workload's figure every recommendation must meet (its unit; at most for times, at least for rates). */
  latencyBound?: number;
}

/** What a candidate changes on top of the current configuration. */
export interface KnobDelta {
  haltPollNs?: number;
  cpuPm?: boolean;
  pvUnhalt?: boolean;
  pin?: number[];
}

/** One run as the advisor reads it (tune.ts makes it from a RunRecord). */
export interface Sample {
  /** The workload's main figure (p50 for latency workloads). */
  value: number;
  /** The tail (p99) where the workload reports one. */
  tail?: number;
  hostCpuNs?: number;
  pollNs?: number;
  haltWaitNs?: number;
  haltExitsPerS?: number;
  pollHitRate?: number | null;
  /** KVM's halt histograms of the run, all vCPUs summed, and the time they cover (ms). */
  haltHists?: HaltHistograms;
  haltHistsMs?: number;
  wallMs: number;
}

export interface Round {
  baseline: Sample[];
  candidate: Sample[];
  /** The round's wall time, runs and their overhead. */
  wallMs: number;
}

export interface Candidate {
  label: string;
  delta: KnobDelta;
  stage: 'halt-poll' | 'variant';
}

/** The current configuration's knobs, as the host resolves them. */
export interface CurrentKnobs {
  cpus: number;
  haltPollNs?: number;
  cpuPm: boolean;
  /** kvm-pv-unhalt as the guest gets it (machine type default or explicit). */
  pvUnhalt: boolean;
  pin?: number[];
}

export interface SearchInput {
  goal: Goal;
  /** The workload: its unit, its direction, whether it reports a tail. */
  unit: string;
  lowerIsBetter: boolean;
  hasTail: boolean;
  current: CurrentKnobs;
  /** The host's halt_poll_ns: what a configuration without halt-poll-ns polls (where the curve places it). */
  defaultHaltPollNs?: number;
  hostCpus: number;
  /** Why this host cannot run a candidate (the runnability check), or undefined when it can. */
  runnable(delta: KnobDelta): string | undefined;
  budgetMs: number;
  /** The expected wall time of one run before any is measured. */
  priorRunMs: number;
  measure(c: Candidate, runsPerSide: number, signal?: AbortSignal): Promise<Round>;
  now(): number;
  signal?: AbortSignal;
  /** Told before each round: what runs, and the time used so far. */
  onRound?(c: Candidate, round: number, elapsedMs: number): void;
  /**
   * The host KVM's grow / shrink parameters: after the first round, the search tries the window
   * the current configuration's halt histograms predict (advisor-prediction.ts) before the rest.
   */
  haltPollParams?: HaltPollParams;
}

/** Runs per side in one round: the fewest with which a rank test can reach p < 0.05 (5 vs 5: p >= 0.008). */
export const ROUND_RUNS = 5;
/** A candidate gets at most this many runs: past it, more runs would not change advice worth having. */
export const MAX_CANDIDATE_RUNS = 30;
/** Rounds are estimated at this multiple of the runs' mean wall time (runs vary; a round must not overrun). */
export const ROUND_COST_MARGIN = 1.2;
export const HALT_POLL_COARSE = [0, 100_000, 1_000_000, 4_000_000] as const;
export const HALT_POLL_FINE = [10_000, 30_000, 300_000, 2_000_000] as const;

/** A request the advisor cannot carry out as given (one line for a user). */
export class AdvisorError extends Error {
  override name = 'AdvisorError';
}

/** Whether a goal fits a workload; the one-line reason when it does not. */
export function goalProblem(goal: Goal, w: { name: string; unit: string; lowerIsBetter: boolean; hasTail: boolean }): string | undefined {
  if (goal.kind === 'latency-p99' && !w.hasTail) return `workload ${w.name} reports no tail latency (p99); use --goal latency-p50 or throughput`;
  if (goal.kind === 'latency-p50' && !w.lowerIsBetter) return `workload ${w.name} measures a rate (${w.unit}), not a latency; use --goal throughput`;
  if (goal.kind === 'throughput' && w.hasTail) return `workload ${w.name} measures a wake-up latency (${w.unit}), not a throughput; use --goal latency-p50 or latency-p99`;
  if (goal.kind === 'host-cpu') {
    if (goal.latencyBound === undefined) return `--goal host-cpu needs --latency-bound N: the ${w.unit} figure every configuration must meet`;
    if (!(goal.latencyBound > 0) || !Number.isFinite(goal.latencyBound)) return `the latency bound must be a number above 0 (${w.unit})`;
  } else if (goal.latencyBound !== undefined) {
    return '--latency-bound goes with --goal host-cpu';
  }
  return undefined;
}

/** The goal in words, e.g. "timer p50 (ns), lower is better". */
export function describeGoal(goal: Goal, unit: string, lowerIsBetter: boolean): string {
  switch (goal.kind) {
    case 'latency-p50': return `lowest p50 (${unit})`;
    case 'latency-p99': return `lowest p99 (${unit})`;
    case 'throughput': return `${lowerIsBetter ? 'lowest' : 'highest'} ${unit}`;
    case 'host-cpu': return `least host CPU per run with the workload's figure ${lowerIsBetter ? 'at most' : 'at least'} ${goal.latencyBound} ${unit}`;
  }
}

/** The config-string keys of a delta (config-string.ts syntax), appended to the current configuration's string. */
export function deltaString(d: KnobDelta): string {
  const parts: string[] = [];
  if (d.haltPollNs !== undefined) parts.push(`halt-poll-ns=${d.haltPollNs}`);
  if (d.cpuPm !== undefined) parts.push(`cpu-pm=${d.cpuPm ? 'on' : 'off'}`);
  if (d.pvUnhalt !== undefined) parts.push(`kvm-pv-unhalt=${d.pvUnhalt ? 'on' : 'off'}`);
  if (d.pin !== undefined) parts.push(`pin=${d.pin.join('+')}`);
  return parts.join(',');
}

/** The configuration with a delta applied (what Apply stores: the machine type and every other setting kept). */
export function applyDelta(c: VmConfig, d: KnobDelta): VmConfig {
  const out: VmConfig = { ...c, cpuFeatures: { ...c.cpuFeatures } };
  if (d.haltPollNs !== undefined) out.haltPollNs = d.haltPollNs;
  if (d.cpuPm !== undefined) out.cpuPm = d.cpuPm;
  if (d.pvUnhalt !== undefined) out.cpuFeatures['kvm-pv-unhalt'] = d.pvUnhalt;
  if (d.pin !== undefined) out.pin = [...d.pin];
  return out;
}

export function labelOf(d: KnobDelta): string {
  return deltaString(d) || 'current';
}

/** One measured candidate (or the current configuration), as reported. */
export interface PointReport {
  label: string;
  delta: KnobDelta;
  stage: Candidate['stage'] | 'current';
  runs: number;
  /** Medians of the goal's figure, of the workload's main figure, and of the counters. */
  median: number;
  valueMedian: number;
  tailMedian?: number;
  hostCpuNs?: number;
  pollNs?: number;
  haltWaitNs?: number;
  haltExitsPerS?: number;
  pollHitRate?: number;
  /** Against the current configuration's runs of the same rounds (absent for the current one). */
  comparison?: Comparison;
  /** Why it got no more rounds, when it was stopped early. */
  stopped?: string;
  /** host-cpu: whether it meets the latency bound. */
  meetsBound?: boolean;
}

export interface Advice {
  goal: Goal;
  goalText: string;
  unit: string;
  /** The goal's figure's unit (ns of host CPU for host-cpu). */
  metricUnit: string;
  better: Better;
  /** What to do: apply `delta` (empty: keep the current configuration). */
  recommendation: { kind: 'change'; label: string; delta: KnobDelta } | { kind: 'keep' };
  headline: string;
  /** Plain words that cite the counters. */
  why: string[];
  /** The recommendation against the current configuration, corrected for the candidates tried. */
  confidence: { comparison?: Comparison; candidates: number; alpha: number; significant: boolean; text: string };
  /** Host CPU the recommendation costs, per run, against the current configuration. */
  price?: { hostCpuNs: [number | null, number | null]; pollNs: [number | null, number | null]; haltWaitNs: [number | null, number | null]; text: string };
  current: PointReport;
  points: PointReport[];
  /** The goal against halt-poll-ns: the current configuration's point (if its value is known) and every halt-poll candidate. */
  curve: { haltPollNs: number; label: string; median: number; ci?: [number, number]; pollHitRate?: number; stopped?: string }[];
  /** Candidates never run: what this host cannot run, regions skipped, the budget. */
  skipped: { label: string; reason: string }[];
  /** The window KVM's histograms predicted, tried first, next to what was measured there. */
  prediction?: HaltPollPredictionReport;
  budget: { budgetMs: number; usedMs: number; rounds: number; runs: number; stoppedBy: 'done' | 'budget' };
}

interface Measured {
  c: Candidate;
  base: Sample[];
  cand: Sample[];
  stopped?: string;
  capped?: boolean;
}

/** What the first round costs at `priorRunMs` a run: the current configuration and one candidate, with a margin. */
export const firstRoundMs = (priorRunMs: number): number => ROUND_RUNS * 2 * priorRunMs * ROUND_COST_MARGIN;

/**
 * Room a budget keeps, beyond the first round, for what comes before it (the checks, the first VM's
 * set-up): without it the smallest budget accepted could not start the round it was sized for.
 */
export const START_SLACK = 0.1;

/** The smallest budget a search accepts at `priorRunMs` a run, in whole tens of seconds: the first round and its slack. */
export const minBudgetS = (priorRunMs: number): number => Math.ceil(firstRoundMs(priorRunMs) * (1 + START_SLACK) / 10_000) * 10;

/** Runs the search; rejects with AdvisorError when the budget cannot fit one round. */
export async function searchKnobs(input: SearchInput): Promise<Advice> {
  const { goal, signal } = input;
  const better: Better = goal.kind === 'host-cpu' ? 'lower' : input.lowerIsBetter ? 'lower' : 'higher';
  const metric = (s: Sample): number | undefined => goal.kind === 'latency-p99' ? s.tail : goal.kind === 'host-cpu' ? s.hostCpuNs : s.value;
  const t0 = input.now();
  const elapsed = () => input.now() - t0;
  const first = firstRoundMs(input.priorRunMs);
  if (first * (1 + START_SLACK) > input.budgetMs) {
    throw new AdvisorError(`a budget of ${seconds(input.budgetMs)} is too small: the current configuration and one candidate need ${ROUND_RUNS} runs each, `
      + `about ${seconds(input.priorRunMs)} per run here (${seconds(first)} in all); give at least ${seconds(minBudgetS(input.priorRunMs) * 1000)}, and minutes for a search worth having`);
  }

  const measured = new Map<string, Measured>();
  const skipped: Advice['skipped'] = [];
  let rounds = 0;
  let runs = 0;
  let roundWallMs = 0;
  let outOfBudget = false;

  const values = (xs: Sample[]) => xs.map(metric).filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  const allBase = () => [...measured.values()].flatMap((m) => m.base);
  // Comparisons are a 4000-resample bootstrap each: computed once per state of the runs.
  const memo = new Map<string, Comparison>();
  const compared = (key: string, f: () => Comparison) => memo.get(key) ?? (memo.set(key, f()), memo.get(key)!);
  const vsCurrent = (m: Measured) => compared(`${m.c.label}|${m.base.length}|${m.cand.length}`,
    () => compareSamples(values(m.base), values(m.cand), better, { baseline: 'current', candidate: m.c.label, runner: 'unhalt' }));
  const vsOther = (a: Measured, b: Measured) => compared(`${a.c.label}|${a.cand.length}~${b.c.label}|${b.cand.length}`,
    () => compareSamples(values(a.cand), values(b.cand), better));
  /** Lower is better: the candidate's median over the current configuration's in the same rounds, turned so that < 1 is an improvement. */
  const score = (m: Measured) => {
    const b = values(m.base);
    const c = values(m.cand);
    if (!b.length || !c.length || median(b) === 0) return Infinity;
    const r = median(c) / median(b);
    return better === 'lower' ? r : 1 / r;
  };
  const meetsBound = (xs: Sample[]): boolean => {
    if (goal.kind !== 'host-cpu') return true;
    const v = xs.map((s) => s.value);
    if (!v.length) return false;
    return input.lowerIsBetter ? median(v) <= goal.latencyBound! : median(v) >= goal.latencyBound!;
  };
  const contenders = () => [...measured.values()].filter((m) => !m.stopped && meetsBound(m.cand) && Number.isFinite(score(m))).sort((a, b) => score(a) - score(b));
  const correctedAlpha = () => ALPHA / Math.max(1, measured.size);
  const decisive = (m: Measured) => {
    const cmp = vsCurrent(m);
    return cmp.verdict === 'better' && cmp.p !== null && cmp.p < correctedAlpha();
  };

  const estimateRunMs = () => (runs > 0 ? roundWallMs / runs : input.priorRunMs);
  const fits = (perSide: number) => elapsed() + 2 * perSide * estimateRunMs() * ROUND_COST_MARGIN <= input.budgetMs;

  /** Marks candidates that are clearly worse than the current configuration or the best one. */
  const stopClearlyWorse = () => {
    const best = contenders()[0];
    for (const m of measured.values()) {
      if (m.stopped) continue;
      const cur = vsCurrent(m);
      if (cur.verdict === 'worse') { m.stopped = `significantly worse than the current configuration (${cur.text.replace(/: worse$/, '')})`; continue; }
      if (best && best !== m && score(best) < 1) {
        const vsBest = vsOther(best, m);
        if (vsBest.verdict === 'worse') m.stopped = `significantly worse than ${best.c.label} (${vsBest.text.replace(/: worse$/, '')})`;
      }
    }
  };

  const round = async (c: Candidate): Promise<boolean> => {
    if (signal?.aborted) return false;
    if (!fits(ROUND_RUNS)) { outOfBudget = true; return false; }
    const m = measured.get(c.label) ?? { c, base: [], cand: [] };
    input.onRound?.(c, rounds + 1, elapsed());
    const r = await input.measure(c, ROUND_RUNS, signal);
    measured.set(c.label, m);
    m.base.push(...r.baseline);
    m.cand.push(...r.candidate);
    rounds++;
    runs += 2 * ROUND_RUNS; // runs that gave no value took their time too
    roundWallMs += r.wallMs;
    stopClearlyWorse();
    return true;
  };

  const tryCandidate = async (delta: KnobDelta, stage: Candidate['stage']): Promise<void> => {
    const label = labelOf(delta);
    if (measured.has(label) || skipped.some((s) => s.label === label)) return;
    const why = input.runnable(delta);
    if (why) { skipped.push({ label, reason: `this host cannot run it: ${why}` }); return; }
    if (outOfBudget) { skipped.push({ label, reason: 'not tried: the budget was spent' }); return; }
    if (!(await round({ label, delta, stage })) && !signal?.aborted) skipped.push({ label, reason: 'not tried: the budget was spent' });
  };

  // Stages 1 and 2: halt polling, from the window KVM's histograms predict.
  let predicted: ReturnType<typeof predictedWindow>;
  let predictionTried = false;
  const pollOf = (m: Measured) => m.c.delta.haltPollNs!;
  const haltPollCandidates = () => [...measured.values()].filter((m) => m.c.stage === 'halt-poll');
  const haltPollProblem = input.runnable({ haltPollNs: 0 });
  if (haltPollProblem) {
    skipped.push({ label: 'halt-poll-ns', reason: `this host cannot run it: ${haltPollProblem}` });
  } else {
    for (const ns of HALT_POLL_COARSE) {
      if (ns === input.current.haltPollNs) continue;
      await tryCandidate({ haltPollNs: ns }, 'halt-poll');
      // The current configuration's runs now have histograms: their prediction goes next.
      if (!predictionTried && input.haltPollParams && rounds > 0) {
        predictionTried = true;
        predicted = predictedWindow(allBase(), input.haltPollParams, input.current.cpus, goal.kind);
        if (predicted && predicted.valueNs !== input.current.haltPollNs) await tryCandidate({ haltPollNs: predicted.valueNs }, 'halt-poll');
      }
    }
    const bestPoll = () => {
      const ranked = contenders().filter((m) => m.c.stage === 'halt-poll');
      return ranked[0] && score(ranked[0]) < 1 ? pollOf(ranked[0]) : (input.current.haltPollNs ?? input.defaultHaltPollNs ?? 200_000);
    };
    const logDistance = (a: number, b: number) => Math.abs(Math.log10(a + 1_000) - Math.log10(b + 1_000));
    const fine = HALT_POLL_FINE.filter((ns) => ns !== input.current.haltPollNs);
    while (fine.length && !signal?.aborted) {
      const target = bestPoll();
      fine.sort((a, b) => logDistance(a, target) - logDistance(b, target));
      const ns = fine.shift()!;
      const measuredPolls = haltPollCandidates();
      const below = measuredPolls.filter((m) => pollOf(m) < ns).sort((a, b) => pollOf(b) - pollOf(a))[0];
      const above = measuredPolls.filter((m) => pollOf(m) > ns).sort((a, b) => pollOf(a) - pollOf(b))[0];
      if (below?.stopped && above?.stopped) {
        skipped.push({ label: labelOf({ haltPollNs: ns }), reason: `skipped: the region between ${below.c.label} and ${above.c.label} is clearly worse (both were stopped early)` });
        continue;
      }
      await tryCandidate({ haltPollNs: ns }, 'halt-poll');
    }
  }

  // Stage 3: the other knobs, around the best halt polling so far.
  const around = (() => {
    const best = contenders().find((m) => m.c.stage === 'halt-poll');
    return best && score(best) < 1 ? { ...best.c.delta } : {};
  })();
  const variants: KnobDelta[] = [];
  // cpu-pm=on keeps HLT in the guest, so no halt exit is left to poll on: it is tried without the
  // halt polling found above (a recommendation naming both would set a knob that does nothing).
  if (!input.current.cpuPm) variants.push({ ...withoutHaltPolling(around), cpuPm: true });
  if (input.current.cpus >= 2) variants.push({ ...around, pvUnhalt: !input.current.pvUnhalt });
  if (!input.current.pin) variants.push({ ...around, pin: Array.from({ length: Math.min(input.current.cpus, input.hostCpus) }, (_, i) => i) });
  for (const v of variants) {
    if (signal?.aborted) break;
    await tryCandidate(v, 'variant');
  }

  // Stage 4: refine the leader until it is decisive (and a close runner-up is settled).
  while (!signal?.aborted && !outOfBudget) {
    const ranked = contenders();
    const leader = ranked[0];
    if (!leader || score(leader) >= 1) break;
    let target: Measured | undefined;
    if (!decisive(leader)) target = leader;
    else {
      const runnerUp = ranked.find((m) => m !== leader && !m.capped && score(m) < 1);
      if (runnerUp && vsOther(leader, runnerUp).verdict !== 'worse') target = runnerUp;
    }
    if (!target) break;
    if (target.cand.length >= MAX_CANDIDATE_RUNS) {
      target.capped = true;
      if (target === leader) break;
      continue;
    }
    if (!(await round(target.c))) break;
  }

  // Nothing measured because the budget ran out first is no advice: "keep" would read as a finding.
  if (rounds === 0 && outOfBudget && !signal?.aborted) {
    throw new AdvisorError(`the budget of ${seconds(input.budgetMs)} was spent before the first round could start (${seconds(elapsed())} went on the checks and set-up); `
      + `give more than ${seconds(minBudgetS(input.priorRunMs) * 1000)}, and minutes for a search worth having`);
  }
  const advice = report({
    input, better, metric, measured, skipped, correctedAlpha: correctedAlpha(), decisive, vsCurrent, score, meetsBound,
    allBase: allBase(), usedMs: elapsed(), rounds, runs, outOfBudget,
  });
  if (predicted) advice.prediction = predictionReport(predicted, measured.get(labelOf({ haltPollNs: predicted.valueNs }))?.cand ?? []);
  return advice;
}

interface ReportInput {
  input: SearchInput;
  better: Better;
  metric(s: Sample): number | undefined;
  measured: Map<string, Measured>;
  skipped: Advice['skipped'];
  correctedAlpha: number;
  decisive(m: Measured): boolean;
  vsCurrent(m: Measured): Comparison;
  score(m: Measured): number;
  meetsBound(xs: Sample[]): boolean;
  allBase: Sample[];
  usedMs: number;
  rounds: number;
  runs: number;
  outOfBudget: boolean;
}

function report(r: ReportInput): Advice {
  const { input, better } = r;
  const { goal } = input;
  const med = (xs: (number | undefined | null)[]) => {
    const v = xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x));
    return v.length ? median(v) : undefined;
  };
  const point = (label: string, delta: KnobDelta, stage: PointReport['stage'], xs: Sample[]): PointReport => {
    const p: PointReport = {
      label, delta, stage, runs: xs.length,
      median: med(xs.map(r.metric)) ?? NaN,
      valueMedian: med(xs.map((s) => s.value)) ?? NaN,
    };
    const set = <K extends 'tailMedian' | 'hostCpuNs' | 'pollNs' | 'haltWaitNs' | 'haltExitsPerS' | 'pollHitRate'>(k: K, v: number | undefined) => { if (v !== undefined) p[k] = v; };
    set('tailMedian', med(xs.map((s) => s.tail)));
    set('hostCpuNs', med(xs.map((s) => s.hostCpuNs)));
    set('pollNs', med(xs.map((s) => s.pollNs)));
    set('haltWaitNs', med(xs.map((s) => s.haltWaitNs)));
    set('haltExitsPerS', med(xs.map((s) => s.haltExitsPerS)));
    set('pollHitRate', med(xs.map((s) => s.pollHitRate)));
    if (goal.kind === 'host-cpu') p.meetsBound = r.meetsBound(xs);
    return p;
  };
  const current = point('current', {}, 'current', r.allBase);
  const points = [...r.measured.values()].map((m) => {
    const p = point(m.c.label, m.c.delta, m.c.stage, m.cand);
    p.comparison = r.vsCurrent(m);
    if (m.stopped) p.stopped = m.stopped;
    return p;
  });
  const winners = [...r.measured.values()].filter((m) => !m.stopped && r.meetsBound(m.cand) && r.decisive(m)).sort((a, b) => r.score(a) - r.score(b));
  const winner = winners[0];
  const metricUnit = goal.kind === 'host-cpu' ? 'ns host CPU' : input.unit;
  const k = r.measured.size;
  const alphaText = `${ALPHA} / ${k} = ${+r.correctedAlpha.toPrecision(2)}`;

  const curve: Advice['curve'] = points.filter((p) => p.stage === 'halt-poll').map((p) => ({
    haltPollNs: p.delta.haltPollNs!, label: p.label, median: p.median,
    ...(p.comparison?.ci95 ? { ci: [p.comparison.ci95[0] * current.median, p.comparison.ci95[1] * current.median] as [number, number] } : {}),
    ...(p.pollHitRate !== undefined ? { pollHitRate: p.pollHitRate } : {}),
    ...(p.stopped ? { stopped: p.stopped } : {}),
  }));
  const currentPoll = input.current.haltPollNs ?? input.defaultHaltPollNs;
  if (currentPoll !== undefined && !curve.some((p) => p.haltPollNs === currentPoll)) {
    curve.push({ haltPollNs: currentPoll, label: 'current', median: current.median, ...(current.pollHitRate !== undefined ? { pollHitRate: current.pollHitRate } : {}) });
  }
  curve.sort((a, b) => a.haltPollNs - b.haltPollNs);

  const why: string[] = [];
  const hitRates = points.filter((p) => p.stage === 'halt-poll' && p.pollHitRate !== undefined).sort((a, b) => a.delta.haltPollNs! - b.delta.haltPollNs!)
    .map((p) => `${pct(p.pollHitRate!)} at ${ns(p.delta.haltPollNs!)}`);
  let confidence: Advice['confidence'];
  let headline: string;
  let recommendation: Advice['recommendation'];
  let price: Advice['price'];
  if (winner) {
    const wp = points.find((p) => p.label === winner.c.label)!;
    const cmp = wp.comparison!;
    recommendation = { kind: 'change', label: winner.c.label, delta: winner.c.delta };
    headline = `${winner.c.label}: ${fmt(wp.median, metricUnit)} against ${fmt(current.median, metricUnit)} now (${cmp.ratio!.toFixed(2)}×), significant`;
    confidence = { comparison: cmp, candidates: k, alpha: r.correctedAlpha, significant: true, text: `${cmp.text.replace(/: better$/, '')}; significant at ${alphaText} (${k} candidate${k === 1 ? '' : 's'} tried)` };
    why.push(`${winner.c.label} ${better === 'lower' ? 'cuts' : 'raises'} the goal's figure to ${cmp.ratio!.toFixed(2)}× the current configuration's (${fmt(wp.median, metricUnit)} vs ${fmt(current.median, metricUnit)}, ${wp.runs} vs ${current.runs} runs).`);
    if (winner.c.delta.haltPollNs !== undefined && wp.pollHitRate !== undefined) {
      why.push(`Polls succeed ${pct(wp.pollHitRate)} of the time at ${ns(winner.c.delta.haltPollNs)} (${hitRates.join(', ')}): a wake-up that comes within the polling window is caught without the host's sleep and wake-up${current.pollHitRate !== undefined ? `; the current configuration's polls succeed ${pct(current.pollHitRate)} of the time` : ''}.`);
    }
    if (wp.haltExitsPerS !== undefined && current.haltExitsPerS !== undefined) why.push(`Halt exits: ${Math.round(wp.haltExitsPerS)}/s against ${Math.round(current.haltExitsPerS)}/s now${winner.c.delta.cpuPm ? ' (cpu-pm=on keeps HLT in the guest where the host allows it)' : ''}.`);
    price = {
      hostCpuNs: [current.hostCpuNs ?? null, wp.hostCpuNs ?? null],
      pollNs: [current.pollNs ?? null, wp.pollNs ?? null],
      haltWaitNs: [current.haltWaitNs ?? null, wp.haltWaitNs ?? null],
      text: priceText(current, wp),
    };
    why.push(price.text);
  } else {
    recommendation = { kind: 'keep' };
    headline = 'keep the current configuration: no knob made a significant difference';
    const ranked = points.filter((p) => p.comparison && Number.isFinite(p.median)).sort((a, b) => (better === 'lower' ? a.median - b.median : b.median - a.median));
    const best = ranked[0];
    const cmp = best?.comparison;
    confidence = {
      ...(cmp ? { comparison: cmp } : {}), candidates: k, alpha: r.correctedAlpha, significant: false,
      text: cmp ? `best candidate ${best.label}: ${cmp.text}; a recommendation needs p < ${alphaText} and a 95 % CI that excludes 1` : 'no candidate was measured',
    };
    if (k === 0) why.push('No candidate could be measured (see what was skipped).');
    else {
      why.push(`${k === 1 ? 'The one candidate tried was not' : `None of the ${k} candidates tried was`} significantly better than the current configuration (${fmt(current.median, metricUnit)}, ${current.runs} runs)${best ? `; the closest, ${best.label}, measured ${fmt(best.median, metricUnit)}` : ''}.`);
      const rates = points.filter((p) => p.stage === 'halt-poll' && p.pollHitRate !== undefined).map((p) => p.pollHitRate!);
      if (rates.length && Math.max(...rates) < 0.1) {
        why.push(`Polls almost never succeed (${hitRates.join(', ')}): KVM stops polling as soon as another task wants the host CPU, so on a host this busy halt polling cannot change the result.`);
      } else if (hitRates.length) {
        why.push(`Polls succeed ${hitRates.join(', ')} of the time, yet the figure does not move: this workload's result does not depend on how its vCPUs wait.`);
      }
      if (current.haltExitsPerS !== undefined) why.push(`Halt exits: ${Math.round(current.haltExitsPerS)}/s with the current configuration.`);
    }
    if (goal.kind === 'host-cpu' && current.meetsBound === false) why.push(`The current configuration misses the bound itself (median ${fmt(current.valueMedian, input.unit)}).`);
  }
  if (r.outOfBudget) why.push(`The budget (${seconds(input.budgetMs)}) ended the search: ${r.skipped.filter((s) => s.reason.includes('budget')).length} candidate(s) were not tried.`);
  const stoppedEarly = points.filter((p) => p.stopped).length;
  if (stoppedEarly) why.push(`${stoppedEarly} candidate(s) were stopped early as clearly worse.`);

  return {
    goal, goalText: describeGoal(goal, input.unit, input.lowerIsBetter), unit: input.unit, metricUnit, better,
    recommendation, headline, why, confidence, ...(price ? { price } : {}), current, points, curve, skipped: r.skipped,
    budget: { budgetMs: input.budgetMs, usedMs: r.usedMs, rounds: r.rounds, runs: r.runs, stoppedBy: r.outOfBudget ? 'budget' : 'done' },
  };
}

function priceText(current: PointReport, rec: PointReport): string {
  const parts: string[] = [];
  if (current.hostCpuNs !== undefined && rec.hostCpuNs !== undefined) parts.push(`host CPU ${ms(rec.hostCpuNs)} per run against ${ms(current.hostCpuNs)} now`);
  if (rec.pollNs !== undefined) parts.push(`of which polling ${ms(rec.pollNs)}${current.pollNs !== undefined ? ` (now ${ms(current.pollNs)})` : ''}`);
  if (rec.haltWaitNs !== undefined && current.haltWaitNs !== undefined) parts.push(`halted waiting ${ms(rec.haltWaitNs)} (now ${ms(current.haltWaitNs)})`);
  return parts.length ? `The price: ${parts.join(', ')}.` : 'The price in host CPU is not known on this host (no per-thread CPU or polling counters).';
}

export function ns(v: number): string {
  if (v === 0) return '0';
  if (v >= 1_000_000) return `${+(v / 1_000_000).toPrecision(3)} ms`;
  if (v >= 1_000) return `${+(v / 1_000).toPrecision(3)} µs`;
  return `${v} ns`;
}

function ms(nsValue: number): string {
  return `${+(nsValue / 1e6).toPrecision(3)} ms`;
}

function pct(x: number): string {
  return `${Math.round(x * 100)} %`;
}

export function fmt(v: number, unit: string): string {
  if (!Number.isFinite(v)) return '—';
  if (unit === 'ns host CPU') return ms(v);
  return `${+v.toPrecision(4)} ${unit}`;
}

export function seconds(msValue: number): string {
  const s = msValue / 1000;
  return s >= 120 ? `${+(s / 60).toPrecision(3)} min` : `${+s.toPrecision(3)} s`;
}

function withoutHaltPolling(d: KnobDelta): KnobDelta {
  const { haltPollNs: _ignored, ...rest } = d;
  return rest;
}
