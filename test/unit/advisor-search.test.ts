// The tuning advisor's search (electron/experiments/advisor.ts) on synthetic measurements: a
// model of how the workload's figure depends on the knobs, seeded noise, and a synthetic clock
// that each run advances. No VM runs here; tune.ts and the kvm tests run the same search on KVM.
import { describe, expect, it } from 'vitest';
import {
  AdvisorError, HALT_POLL_COARSE, ROUND_RUNS, goalProblem, labelOf, minBudgetS, searchKnobs, type Candidate, type KnobDelta, type Round, type SearchInput,
} from '../../electron/experiments/advisor.ts';
import { seededRandom } from '../../electron/experiments/stats.ts';
import { formatTuneMarkdown } from '../../electron/experiments/tune-format.ts';
import type { TuneResult } from '../../electron/experiments/tune.ts';

interface Model {
  /** The workload's figure for a configuration (before noise). */
  value(d: KnobDelta): number;
  /** Host CPU ns per run. */
  cpu?(d: KnobDelta): number;
  noise?: number;
  runMs?: number;
}

function harness(model: Model, over: Partial<SearchInput> = {}) {
  let t = 0;
  const random = seededRandom(42);
  const measuredLabels: string[] = [];
  const noisy = (v: number) => v * (1 + (model.noise ?? 0.08) * (random() * 2 - 1));
  const sample = (d: KnobDelta) => {
    t += model.runMs ?? 1000;
    const value = noisy(model.value(d));
    return {
      value, tail: value * 10, hostCpuNs: noisy(model.cpu?.(d) ?? 100e6), pollNs: d.haltPollNs ? d.haltPollNs / 10 : 0,
      haltWaitNs: 50e6, haltExitsPerS: 700, pollHitRate: d.haltPollNs ? Math.min(1, d.haltPollNs / 2e6) : null, wallMs: model.runMs ?? 1000,
    };
  };
  const input: SearchInput = {
    goal: { kind: 'latency-p50' }, unit: 'ns', lowerIsBetter: true, hasTail: true,
    current: { cpus: 1, cpuPm: false, pvUnhalt: true },
    hostCpus: 2,
    runnable: () => undefined,
    budgetMs: 300_000,
    priorRunMs: 1000,
    now: () => t,
    measure: async (c: Candidate, n: number): Promise<Round> => {
      measuredLabels.push(c.label);
      const t0 = t;
      const baseline = [];
      const candidate = [];
      for (let i = 0; i < n; i++) {
        baseline.push(sample({}));
        candidate.push(sample(c.delta));
      }
      t += 200; // the round's own overhead
      return { baseline, candidate, wallMs: t - t0 };
    },
    ...over,
  };
  return { input, measuredLabels, clock: () => t };
}

// Like this host's timer workload: polling of 1 ms or more cuts the lateness; shorter does nothing.
const timerLike: Model = { value: (d) => 60_000 * ((d.haltPollNs ?? 0) >= 1_000_000 ? 0.6 : 1) };

// Each search computes dozens of bootstrap intervals: generous time on a shared, busy machine.
describe('the tuning advisor\'s search', { timeout: 60_000 }, () => {
  it('recommends polling of 1 ms or more where that is what helps, with its evidence', async () => {
    const h = harness(timerLike);
    const advice = await searchKnobs(h.input);
    expect(advice.recommendation.kind).toBe('change');
    if (advice.recommendation.kind !== 'change') return;
    expect(advice.recommendation.delta.haltPollNs).toBeGreaterThanOrEqual(1_000_000);
    expect(advice.confidence.significant).toBe(true);
    expect(advice.confidence.comparison!.p!).toBeLessThan(0.05 / advice.confidence.candidates);
    expect(advice.confidence.comparison!.ratio!).toBeLessThan(0.7);
    // The curve: the goal against halt-poll-ns, one point per value measured, ordered.
    const xs = advice.curve.map((p) => p.haltPollNs);
    expect(xs).toEqual([...xs].sort((a, b) => a - b));
    expect(xs).toEqual(expect.arrayContaining([...HALT_POLL_COARSE]));
    expect(advice.why.join(' ')).toMatch(/Polls succeed \d+ % of the time at \d/);
    expect(advice.price?.text).toMatch(/host CPU .* per run/);
    expect(advice.budget.usedMs).toBeLessThanOrEqual(300_000);
  });

  it('says "keep the current configuration" when no knob makes a difference', async () => {
    const h = harness({ value: () => 5_000, noise: 0.15 });
    const advice = await searchKnobs(h.input);
    expect(advice.recommendation).toEqual({ kind: 'keep' });
    expect(advice.headline).toBe('keep the current configuration: no knob made a significant difference');
    expect(advice.confidence.significant).toBe(false);
    expect(advice.points.length).toBeGreaterThanOrEqual(8); // every halt-poll value and the variants were tried
    expect(advice.why[0]).toMatch(/None of the \d+ candidates tried was significantly better/);
  });

  it('never starts a round that cannot finish within the budget', async () => {
    for (const budgetMs of [14_000, 40_000, 75_000]) {
      const h = harness({ ...timerLike, runMs: 1000 }, { budgetMs });
      const advice = await searchKnobs(h.input);
      expect(h.clock()).toBeLessThanOrEqual(budgetMs);
      expect(advice.budget.usedMs).toBeLessThanOrEqual(budgetMs);
      expect(advice.budget.stoppedBy).toBe('budget');
      expect(advice.skipped.some((s) => s.reason === 'not tried: the budget was spent')).toBe(true);
      expect(advice.budget.rounds).toBe(h.measuredLabels.length);
    }
    // The estimate follows the measured runs, not the prior: runs twice as slow as expected fit half as many rounds.
    const slow = harness({ ...timerLike, runMs: 2000 }, { budgetMs: 75_000, priorRunMs: 1000 });
    await searchKnobs(slow.input);
    expect(slow.clock()).toBeLessThanOrEqual(75_000);
    expect(slow.measuredLabels.length).toBeLessThanOrEqual(3);
  });

  it('refuses a budget too small for the current configuration and one candidate, before any run', async () => {
    const h = harness(timerLike, { budgetMs: 5_000 });
    await expect(searchKnobs(h.input)).rejects.toThrow(AdvisorError);
    await expect(searchKnobs(h.input)).rejects.toThrow(/a budget of 5 s is too small: the current configuration and one candidate need 5 runs each/);
    expect(h.measuredLabels).toEqual([]);
  });

  it('runs a first round on the smallest budget it accepts, whatever the prior (time before the round included)', async () => {
    // 22.5 s a run (the nested lane's L1) made a first round of exactly 270 s, the minimum was
    // 270 s, and the milliseconds before the round put it over: 0 rounds, "keep". Each prior here,
    // with 2 s of checks and set-up before the first round.
    for (const priorRunMs of [1500, 2250, 22_500, 40_000]) {
      const budgetMs = minBudgetS(priorRunMs) * 1000;
      const h = harness({ ...timerLike, runMs: priorRunMs }, { priorRunMs, budgetMs });
      let calls = 0;
      const advice = await searchKnobs({ ...h.input, now: () => h.clock() + (calls++ > 0 ? 2000 : 0) });
      expect(advice.budget.rounds, `prior ${priorRunMs} ms, budget ${budgetMs} ms`).toBeGreaterThanOrEqual(1);
      await expect(searchKnobs({ ...h.input, budgetMs: budgetMs - 10_000 })).rejects.toThrow(/is too small/);
    }
  });

  it('a budget spent before the first round is a failure naming why, not advice to keep', async () => {
    // The checks and set-up took longer than the budget's room for them.
    const h = harness(timerLike, { priorRunMs: 1000, budgetMs: minBudgetS(1000) * 1000 });
    let calls = 0;
    const base = h.input.now;
    await expect(searchKnobs({ ...h.input, now: () => base() + (calls++ > 0 ? 60_000 : 0) }))
      .rejects.toThrow(/^the budget of 20 s was spent before the first round could start \(60 s went on the checks and set-up\); give more than 20 s/);
    expect(h.measuredLabels).toEqual([]);
  });

  it('stops clearly worse candidates early and skips a region between two of them', async () => {
    // Polling makes a rate worse from 1 ms up: those are stopped after one round, and 2 ms,
    // between 1 ms and 4 ms, is never run.
    const h = harness({ value: (d) => 1000 * ((d.haltPollNs ?? 0) >= 1_000_000 ? 0.5 : 1), noise: 0.05 }, {
      goal: { kind: 'throughput' }, unit: 'handoffs/s', lowerIsBetter: false, hasTail: false,
    });
    const advice = await searchKnobs(h.input);
    for (const label of ['halt-poll-ns=1000000', 'halt-poll-ns=4000000']) {
      const p = advice.points.find((x) => x.label === label)!;
      expect(p.stopped).toMatch(/significantly worse than the current configuration/);
      expect(p.runs).toBe(ROUND_RUNS);
      expect(h.measuredLabels.filter((l) => l === label)).toHaveLength(1);
    }
    expect(h.measuredLabels).not.toContain('halt-poll-ns=2000000');
    expect(advice.skipped).toContainEqual({ label: 'halt-poll-ns=2000000', reason: expect.stringMatching(/region between halt-poll-ns=1000000 and halt-poll-ns=4000000 is clearly worse/) });
    expect(advice.recommendation).toEqual({ kind: 'keep' });
  });

  it('tries only what this host can run, and says why the rest was left out', async () => {
    const h = harness(timerLike, {
      current: { cpus: 2, cpuPm: false, pvUnhalt: true },
      runnable: (d) => (d.cpuPm ? 'cpu-pm=on needs KVM_CAP_X86_DISABLE_EXITS with HLT' : undefined),
    });
    const advice = await searchKnobs(h.input);
    expect(h.measuredLabels.some((l) => l.includes('cpu-pm'))).toBe(false);
    expect(advice.skipped.find((s) => s.label.includes('cpu-pm=on'))?.reason).toBe('this host cannot run it: cpu-pm=on needs KVM_CAP_X86_DISABLE_EXITS with HLT');
    // Two vCPUs: kvm-pv-unhalt toggled and pinning are tried, around the best polling.
    const aroundBest = (knob: string) => h.measuredLabels.find((l) => l.endsWith(`,${knob}`));
    expect(Number(/^halt-poll-ns=(\d+),/.exec(aroundBest('kvm-pv-unhalt=off') ?? '')?.[1])).toBeGreaterThanOrEqual(1_000_000);
    expect(Number(/^halt-poll-ns=(\d+),/.exec(aroundBest('pin=0+1') ?? '')?.[1])).toBeGreaterThanOrEqual(1_000_000);

    const noPoll = harness(timerLike, { runnable: (d) => (d.haltPollNs !== undefined ? 'halt-poll-ns needs KVM_CAP_HALT_POLL' : undefined) });
    const a2 = await searchKnobs(noPoll.input);
    expect(noPoll.measuredLabels.some((l) => l.includes('halt-poll'))).toBe(false);
    expect(a2.skipped[0]).toEqual({ label: 'halt-poll-ns', reason: 'this host cannot run it: halt-poll-ns needs KVM_CAP_HALT_POLL' });
    expect(a2.recommendation).toEqual({ kind: 'keep' });
  });

  it('least host CPU under a latency bound: the cheapest configuration that meets the bound', async () => {
    // Polling costs CPU; cpu-pm=on halves it here but misses the bound.
    const model: Model = {
      value: (d) => (d.cpuPm ? 90_000 : 50_000),
      cpu: (d) => (d.cpuPm ? 40e6 : 100e6 + (d.haltPollNs ?? 200_000) * 100),
      noise: 0.05,
    };
    const h = harness(model, { goal: { kind: 'host-cpu', latencyBound: 60_000 } });
    const advice = await searchKnobs(h.input);
    expect(advice.recommendation.kind).toBe('change');
    if (advice.recommendation.kind !== 'change') return;
    expect(advice.recommendation.delta).toEqual({ haltPollNs: 0 });
    expect(advice.points.find((p) => p.label.includes('cpu-pm=on'))?.meetsBound).toBe(false);
  });

  it('checks a goal against the workload', () => {
    const timer = { name: 'timer', unit: 'ns', lowerIsBetter: true, hasTail: true };
    const spin = { name: 'spinlock', unit: 'handoffs/s', lowerIsBetter: false, hasTail: false };
    expect(goalProblem({ kind: 'latency-p99' }, timer)).toBeUndefined();
    expect(goalProblem({ kind: 'latency-p99' }, spin)).toBe('workload spinlock reports no tail latency (p99); use --goal latency-p50 or throughput');
    expect(goalProblem({ kind: 'latency-p50' }, spin)).toMatch(/measures a rate \(handoffs\/s\), not a latency; use --goal throughput/);
    expect(goalProblem({ kind: 'throughput' }, timer)).toMatch(/measures a wake-up latency/);
    expect(goalProblem({ kind: 'host-cpu' }, timer)).toMatch(/needs --latency-bound N/);
    expect(goalProblem({ kind: 'latency-p50', latencyBound: 5 }, timer)).toBe('--latency-bound goes with --goal host-cpu');
  });

  it('stops at once when cancelled', async () => {
    const abort = new AbortController();
    const h = harness(timerLike, { signal: abort.signal, onRound: (_c, round) => { if (round === 2) abort.abort(); } });
    const advice = await searchKnobs(h.input);
    expect(h.measuredLabels).toHaveLength(2);
    expect(advice.budget.rounds).toBe(2);
  });
  it('prints the advice as markdown: recommendation, confidence, why, price, the curve, every configuration', async () => {
    const advice = await searchKnobs(harness(timerLike).input);
    const md = formatTuneMarkdown({
      kind: 'tune', advice, recommendedConfig: 'cpus=1,memory=128,machine=unhalt-1.1,halt-poll-ns=1000000', failures: [],
      tune: { guest: 'probe', workload: 'timer', config: 'cpus=1,memory=128,machine=unhalt-1.1', goal: 'latency-p50', budgetS: 300 },
    } as unknown as TuneResult);
    expect(md).toMatch(/^# Tuning advisor: timer\n/);
    expect(md).toMatch(/\*\*Recommendation: halt-poll-ns=\d+\*\*/);
    expect(md).toContain('recommended configuration: `cpus=1,memory=128,machine=unhalt-1.1,halt-poll-ns=1000000`');
    expect(md).toMatch(/confidence: 0\.\d\d× \(95 % CI [0-9.]+–[0-9.]+, (p < 0\.001|p = [0-9.]+)\); significant at 0\.05 \/ \d+ = 0\.\d+ \(\d+ candidates tried\)/);
    expect(md).toContain('## Why');
    expect(md).toContain('## Price in host CPU (medians per run)');
    expect(md).toContain('## lowest p50 (ns) against halt-poll-ns');
    expect(md).toMatch(/^\| 1 ms \| [0-9.]+ ns \|/m);
    expect(md).toMatch(/^\| current \| \d+ \| /m);
  });
});

describe('the search starts from KVM\'s histograms', { timeout: 60_000 }, () => {
  it('tries the window the current configuration\'s histograms predict right after the first round, and reports it next to what was measured there', async () => {
    // Wake-ups 65-131 µs after each HLT (bucket 17): a window of 131 µs or more catches them all.
    const hist = (at: number, n: number) => Array.from({ length: 32 }, (_, i) => (i === at ? n : 0));
    const h = harness(timerLike, { current: { cpus: 1, cpuPm: false, pvUnhalt: true, haltPollNs: 0 }, haltPollParams: { grow: 2, growStart: 10_000, shrink: 2 } });
    const measure = h.input.measure;
    h.input.measure = async (c, n, sig) => {
      const r = await measure(c, n, sig);
      const catches = (c.delta.haltPollNs ?? 0) >= 131_072;
      for (const s of r.baseline) s.haltHists = { halt_wait_hist: hist(17, 1000) };
      for (const s of r.candidate) s.haltHists = catches ? { halt_poll_success_hist: hist(17, 1000) } : { halt_wait_hist: hist(17, 1000) };
      return r;
    };
    const advice = await searchKnobs(h.input);
    const p = advice.prediction!;
    expect(p.valueNs).toBeGreaterThanOrEqual(131_072);
    expect(p.valueNs).toBeLessThanOrEqual(262_144);
    expect(p.predictedCaught).toBeGreaterThan(0.95);
    expect(h.measuredLabels[0]).toBe(labelOf({ haltPollNs: HALT_POLL_COARSE[1] }));
    expect(h.measuredLabels[1]).toBe(labelOf({ haltPollNs: p.valueNs }));
    expect(p.measuredCaught).toBe(1);
    expect(p.text).toMatch(/^KVM's halt histograms of the current configuration predicted halt-poll-ns=\d+ \(Polling up to .* would catch \d+ % of wake-ups .*\); measured there: 100 % of wake-ups caught \(predicted \d+ %\)\.$/);
  });

  it('without histograms it searches as before and predicts nothing', async () => {
    const h = harness(timerLike, { haltPollParams: { grow: 2, growStart: 10_000, shrink: 2 } });
    const advice = await searchKnobs(h.input);
    expect(advice.prediction).toBeUndefined();
    expect(h.measuredLabels.slice(0, 3)).toEqual(HALT_POLL_COARSE.slice(0, 3).map((ns) => labelOf({ haltPollNs: ns })));
  });
});
