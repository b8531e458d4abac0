// The statistics behind the verdicts (electron/experiments/stats.ts), checked against values
// worked out by hand or from published tables, and the spec's one validation (spec.ts).
import { describe, expect, it } from 'vitest';
import {
  betterOf, bootstrapRatioOfMedians, compareRows, compareSamples, mannWhitney, median, medianInterval, seededRandom,
} from '../../electron/experiments/stats.ts';
import { ExperimentError, MAX_RUNS, fewRunsWarning, totalRuns, validateSpec } from '../../electron/experiments/spec.ts';
import { MAX_CONTENTION } from '../../electron/experiments/limits.ts';
import { contentionCpus, contentionText } from '../../electron/experiments/contention.ts';

describe('Mann-Whitney U', () => {
  it('exact p for small tie-free samples matches the counting argument', () => {
    // 3 vs 3, completely separated: 2 of the C(6,3) = 20 orderings are as extreme -> p = 0.1.
    expect(mannWhitney([1, 2, 3], [4, 5, 6])).toEqual({ u: 0, p: 0.1, exact: true });
    // 5 vs 5 separated: 2 / C(10,5) = 2/252.
    expect(mannWhitney([10, 11, 12, 13, 14], [1, 2, 3, 4, 5]).p).toBeCloseTo(2 / 252, 12);
    // 4 vs 4 separated: 2/70.
    expect(mannWhitney([1, 2, 3, 4], [5, 6, 7, 8]).p).toBeCloseTo(2 / 70, 12);
    // Interleaved evenly: no evidence at all.
    expect(mannWhitney([1, 3, 5, 7], [2, 4, 6, 8]).p).toBeGreaterThan(0.6);
  });

  it('the exact distribution sums to C(m+n, m) and is symmetric', () => {
    // U of the first sample over all orderings of 4 vs 6: P(U <= k) = P(U >= 24 - k).
    const a = [1, 2, 3, 4];
    const b = [5, 6, 7, 8, 9, 10];
    const lo = mannWhitney(a, b);
    const hi = mannWhitney(b.map((v) => v - 100), a);
    expect(lo.p).toBeCloseTo(2 / 210, 12);
    expect(hi.p).toBeCloseTo(lo.p, 12);
  });

  it('ties use the normal approximation with tie correction', () => {
    const r = mannWhitney([1, 1, 2, 2, 3, 3], [3, 3, 4, 4, 5, 5]);
    expect(r.exact).toBe(false);
    expect(r.p).toBeGreaterThan(0.001);
    expect(r.p).toBeLessThan(0.02);
    expect(mannWhitney([7, 7, 7], [7, 7, 7]).p).toBe(1);
  });
});

describe('the distribution-free interval of a median', () => {
  it('is the order statistics the binomial table gives, and none for too few samples', () => {
    const xs = (n: number) => Array.from({ length: n }, (_, i) => n - i); // unsorted on purpose
    expect(medianInterval(xs(5))).toBeNull(); // 2 / 2^5 > 5 %: no interval at 95 %
    expect(medianInterval(xs(6))).toEqual([1, 6]);
    expect(medianInterval(xs(8))).toEqual([1, 8]);
    expect(medianInterval(xs(9))).toEqual([2, 8]);
    expect(medianInterval(xs(16))).toEqual([4, 13]);
    expect(medianInterval(xs(24))).toEqual([7, 18]);
    expect(() => medianInterval(xs(1001))).toThrow(RangeError); // past the exact table's range, never an inverted interval
  });

  it('holds the median at least 95 % of the time (skewed samples, seeded)', () => {
    const rand = seededRandom(7);
    let held = 0;
    let trials = 0;
    for (; trials < 4000; trials++) {
      // Exponential samples, median ln 2.
      const xs = Array.from({ length: 12 + (trials % 13) }, () => -Math.log(1 - rand()));
      const ci = medianInterval(xs)!;
      if (ci[0] <= Math.LN2 && Math.LN2 <= ci[1]) held++;
    }
    expect(held / trials).toBeGreaterThanOrEqual(0.95);
    expect(held / trials).toBeLessThan(0.995); // not a trivially wide interval
  });
});

describe('bootstrap interval of the ratio of medians', () => {
  it('is deterministic (seeded) and contains the observed ratio', () => {
    const a = [100, 104, 98, 101, 99, 103, 97];
    const b = [56, 60, 52, 58, 55, 61, 54];
    const ci1 = bootstrapRatioOfMedians(a, b)!;
    const ci2 = bootstrapRatioOfMedians(a, b)!;
    expect(ci1).toEqual(ci2);
    const r = median(b) / median(a);
    expect(ci1[0]).toBeLessThanOrEqual(r);
    expect(ci1[1]).toBeGreaterThanOrEqual(r);
    expect(ci1[1]).toBeLessThan(1);
    expect(bootstrapRatioOfMedians(a, b, { seed: 7 })).not.toEqual(ci1);
  });

  it('has no interval where the baseline has a zero', () => {
    expect(bootstrapRatioOfMedians([0, 1, 2], [1, 2, 3])).toBeNull();
  });

  it('the seeded PRNG is uniform enough', () => {
    const rnd = seededRandom(1);
    const bins = new Array(10).fill(0);
    for (let i = 0; i < 100_000; i++) bins[Math.floor(rnd() * 10)]++;
    for (const c of bins) expect(Math.abs(c - 10_000)).toBeLessThan(500);
  });
});

describe('verdicts', () => {
  it('says better / worse by the unit, and no significant difference for noise', () => {
    const base = [78371, 74915, 78903, 77000, 76500, 78100, 77900];
    const poll = [43797, 34599, 51832, 44000, 42000, 45500, 41000];
    const faster = compareSamples(base, poll, betterOf('ns'), { baseline: 'poll-0', candidate: 'poll-1ms', runner: 'unhalt' });
    expect(faster).toMatchObject({ verdict: 'better', significant: true, n: [7, 7] });
    expect(faster.p!).toBeLessThan(0.01);
    expect(faster.text).toMatch(/^0\.\d\d× \(95 % CI 0\.\d\d–0\.\d\d, p (= [0-9.]+|< 0\.001)\): better$/);
    // The same numbers as a throughput (higher is better) are a loss.
    expect(compareSamples(base, poll, betterOf('handoffs/s')).verdict).toBe('worse');
    // Two samples from the same distribution (a shuffle of one set of numbers).
    const noise = compareSamples([77811, 79674, 78011, 80100, 76900], [78200, 77500, 79900, 78800, 77100], 'lower');
    expect(noise).toMatchObject({ verdict: 'no significant difference', significant: false });
    expect(noise.text).toMatch(/no significant difference$/);
  });

  it('three runs each can never be significant (the rank test cannot reach 0.05), one run is too few', () => {
    expect(compareSamples([100, 101, 102], [50, 51, 52], 'lower')).toMatchObject({ significant: false, verdict: 'no significant difference', p: 0.1 });
    expect(compareSamples([100], [50, 51], 'lower')).toMatchObject({ verdict: 'too few runs', ci95: null, p: null });
  });

  it('compares every row with the first of its VMM', () => {
    const rows = [
      { config: 'A', runner: 'unhalt', runs: [10, 11, 12, 10, 11] },
      { config: 'B', runner: 'unhalt', runs: [20, 21, 22, 20, 21] },
      { config: 'A', runner: 'qemu', runs: [10, 11, 12, 10, 11] },
      { config: 'B', runner: 'qemu', runs: [10, 12, 11, 11, 10] },
    ];
    const c = compareRows(rows, 'lower');
    expect(c.map((x) => [x.candidate, x.baseline, x.runner, x.verdict])).toEqual([
      ['B', 'A', 'unhalt', 'worse'],
      ['B', 'A', 'qemu', 'no significant difference'],
    ]);
  });
});

describe('the experiment spec, checked once', () => {
  const spec = { guest: 'probe', workload: 'ipi', runs: 5, configs: [{ name: 'a', config: 'cpus=2' }, { name: 'b', config: 'cpus=2,halt-poll-ns=0' }] };

  it('refuses 0 runs and more than MAX_RUNS with the same message', () => {
    for (const runs of [0, -1, MAX_RUNS + 1, 2.5, '3']) {
      expect(() => validateSpec({ ...spec, runs })).toThrow(new RegExp(`runs must be a whole number from 1 to ${MAX_RUNS}`));
    }
    expect(() => validateSpec({ ...spec, runs: 0 })).toThrow(ExperimentError);
    expect(validateSpec({ ...spec, runs: MAX_RUNS }).runs).toBe(MAX_RUNS);
  });

  it('counts every run in the progress total: QEMU and bare ones too', () => {
    expect(totalRuns({ ...validateSpec(spec) })).toBe(10);
    expect(totalRuns({ ...validateSpec({ ...spec, vsQemu: true }) })).toBe(20);
    expect(totalRuns({ ...validateSpec({ ...spec, guest: 'linux', workload: 'pipe', bare: true }) })).toBe(15);
    // The probe guest has no bare reference: no bare runs counted.
    expect(totalRuns({ ...validateSpec({ ...spec, bare: true }) })).toBe(10);
  });

  it('takes host contention as a whole number of busy processes from 0 to MAX_CONTENTION (0: none)', () => {
    for (const contention of [-1, MAX_CONTENTION + 1, 1.5, '2', true]) {
      expect(() => validateSpec({ ...spec, contention })).toThrow(new RegExp(`host contention must be a whole number of CPU-bound processes from 0 to ${MAX_CONTENTION}`));
    }
    expect(validateSpec({ ...spec, contention: 2 }).contention).toBe(2);
    expect(validateSpec({ ...spec, contention: 0 }).contention).toBeUndefined();
    expect(contentionText(2, [0, 1])).toBe('host contention: 2 CPU-bound processes on host CPUs 0,1, during every run');
    expect(contentionCpus([1, 1, 0])).toEqual([0, 1]);
  });

  it('warns below 5 runs', () => {
    expect(fewRunsWarning(3)).toMatch(/3 runs per configuration: fewer than 5/);
    expect(fewRunsWarning(5)).toBeUndefined();
  });
});

describe('the verdicts in `unhalt bench` output', () => {
  it('lists one line per pair and marks the QEMU row that ran differently', async () => {
    const { formatMarkdown } = await import('../../electron/experiments/format.ts');
    const { summarize } = await import('../../electron/experiments/summary.ts');
    const { workload } = await import('../../electron/experiments/workloads.ts');
    const timer = workload('probe', 'timer');
    const values: Record<string, number[]> = {
      'poll-0 unhalt': [78371, 74915, 78903, 77000, 76500], 'poll-1ms unhalt': [43797, 34599, 51832, 44000, 42000],
      'poll-0 qemu': [77811, 79674, 78011, 80100, 76900], 'poll-1ms qemu': [78200, 77500, 79900, 78800, 77100],
    };
    const raw = Object.entries(values).flatMap(([key, vs]) => {
      const [config, runner] = key.split(' ') as [string, 'unhalt' | 'qemu'];
      return vs.map((value, i) => ({ config, runner, run: i + 1, value, fields: {}, wallMs: 1000 }));
    });
    const rows = summarize(['poll-0', 'poll-1ms'], ['unhalt', 'qemu'], raw, timer);
    for (const r of rows) if (r.runner === 'qemu') r.caveat = 'ran at the host\'s halt polling (200000 ns)';
    const md = formatMarkdown({
      spec: { guest: 'probe', workload: 'timer', runs: 5, vsQemu: true, configs: [{ name: 'poll-0', config: 'cpus=1,halt-poll-ns=0' }, { name: 'poll-1ms', config: 'cpus=1,halt-poll-ns=1000000' }] },
      status: 'ok', unit: 'ns', rows, comparisons: compareRows(rows, 'lower'), raw, failures: [], environment: { hostKind: 'pvm' }, notes: [],
    });
    expect(md).toMatch(/^\| poll-0 † \| qemu \|/m);
    expect(md).toMatch(/^\| poll-0 \| unhalt \|/m);
    expect(md).toMatch(/^- poll-1ms vs poll-0 \(unhalt, 5 vs 5 runs\): 0\.5\d× \(95 % CI 0\.\d\d–0\.\d\d, p = 0\.008\): better$/m);
    expect(md).toMatch(/^- poll-1ms vs poll-0 \(qemu, 5 vs 5 runs\): 1\.0\d× .*: no significant difference$/m);
  });
});
