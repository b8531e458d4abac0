// The statistics behind an experiment's verdicts: is the difference between two configurations'
// runs real, or noise? Pure functions of numbers (no Node, no I/O), deterministic (the bootstrap
// is seeded), so the runner, `unhalt bench`, the service and a tuning loop get the same answer
// from the same runs.
//
// Two statements per pair, both from the runs alone (no normality assumed):
// - the ratio of medians (candidate / baseline) with a bootstrap 95 % percentile confidence
//   interval (each side resampled with replacement, 4000 times, seeded);
// - the Mann-Whitney U rank test's two-sided p (exact when there are no ties and the samples are
//   small, the normal approximation with tie correction otherwise).
// A difference is called significant only when both agree: the interval excludes 1 and p < 0.05.
// The percentile bootstrap alone is too generous for few runs (with 3 runs each it can exclude 1
// where no rank test can: the smallest two-sided p of 3 vs 3 is 0.1).

/** Which way is better for a workload's unit: times are better lower, counts and rates higher. */
export type Better = 'lower' | 'higher';

export function betterOf(unit: string): Better {
  return /^(ns|us|µs|ms|s)(\/.*)?$/.test(unit) ? 'lower' : 'higher';
}

export const ALPHA = 0.05;
export const BOOTSTRAP_RESAMPLES = 4000;
/** Any fixed seed: the point is that the same runs give the same interval every time. */
export const BOOTSTRAP_SEED = 0x5eed;

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * The distribution-free confidence interval of a median: the order statistics [x(k), x(n+1-k)]
 * with k the largest for which P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2, so the interval
 * holds the population median with at least `confidence`. null when n is too small for any k
 * (fewer than 6 samples at 95 %).
 */
export function medianInterval(xs: readonly number[], confidence = 0.95): [number, number] | null {
  const n = xs.length;
  // 0.5 ** n underflows past ~1074 samples: the table below is for the few dozen a check takes.
  if (n > 1000) throw new RangeError(`medianInterval takes at most 1000 samples, got ${n}`);
  const tail = (1 - confidence) / 2;
  // P(Bin(n, 1/2) <= j), summed term by term (n stays small: a few dozen samples).
  let k = 0;
  let cdf = 0;
  let term = 0.5 ** n; // P(Bin = 0)
  for (let j = 0; j < n; j++) {
    cdf += term; // now P(Bin <= j)
    if (cdf > tail) break;
    k = j + 1;
    term = (term * (n - j)) / (j + 1);
  }
  if (k < 1) return null;
  const s = [...xs].sort((a, b) => a - b);
  return [s[k - 1]!, s[n - k]!];
}

/** A small seeded PRNG (mulberry32): uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The bootstrap percentile interval of median(candidate) / median(baseline); null when a
 * baseline resample can have a median of 0 or a side has no runs.
 */
export function bootstrapRatioOfMedians(
  baseline: readonly number[], candidate: readonly number[],
  opts: { resamples?: number; seed?: number; confidence?: number } = {},
): [number, number] | null {
  if (!baseline.length || !candidate.length) return null;
  if (baseline.some((v) => v === 0)) return null;
  const n = opts.resamples ?? BOOTSTRAP_RESAMPLES;
  const random = seededRandom(opts.seed ?? BOOTSTRAP_SEED);
  const ratios = new Float64Array(n);
  const a = new Float64Array(baseline.length);
  const b = new Float64Array(candidate.length);
  const resampledMedian = (src: readonly number[], dst: Float64Array) => {
    for (let i = 0; i < dst.length; i++) dst[i] = src[Math.floor(random() * src.length)]!;
    dst.sort();
    const m = dst.length >> 1;
    return dst.length % 2 ? dst[m]! : (dst[m - 1]! + dst[m]!) / 2;
  };
  for (let i = 0; i < n; i++) {
    const mb = resampledMedian(baseline, a);
    ratios[i] = resampledMedian(candidate, b) / mb;
  }
  ratios.sort();
  const tail = (1 - (opts.confidence ?? 0.95)) / 2;
  const at = (q: number) => ratios[Math.min(n - 1, Math.max(0, Math.round(q * (n - 1))))]!;
  return [at(tail), at(1 - tail)];
}

/** The Mann-Whitney U test of two samples: U of `a`, and the two-sided p. */
export function mannWhitney(a: readonly number[], b: readonly number[]): { u: number; p: number; exact: boolean } {
  const m = a.length;
  const n = b.length;
  if (!m || !n) return { u: 0, p: 1, exact: true };
  // Mid-ranks over the pooled sample.
  const pooled = [...a.map((v) => ({ v, a: true })), ...b.map((v) => ({ v, a: false }))].sort((x, y) => x.v - y.v);
  const ranks = new Float64Array(pooled.length);
  let tieTerm = 0;
  for (let i = 0; i < pooled.length;) {
    let j = i;
    while (j + 1 < pooled.length && pooled[j + 1]!.v === pooled[i]!.v) j++;
    const t = j - i + 1;
    for (let k = i; k <= j; k++) ranks[k] = (i + j) / 2 + 1;
    tieTerm += t * t * t - t;
    i = j + 1;
  }
  let rankSumA = 0;
  pooled.forEach((x, i) => { if (x.a) rankSumA += ranks[i]!; });
  const u = rankSumA - (m * (m + 1)) / 2;
  const mean = (m * n) / 2;
  if (tieTerm === 0 && m + n <= 60) {
    const dist = uDistribution(m, n);
    const total = dist.reduce((s, c) => s + c, 0);
    // P(U <= u) and P(U >= u); U is an integer without ties.
    let low = 0;
    for (let k = 0; k <= u; k++) low += dist[k]!;
    let high = 0;
    for (let k = u; k < dist.length; k++) high += dist[k]!;
    return { u, p: Math.min(1, (2 * Math.min(low, high)) / total), exact: true };
  }
  const N = m + n;
  const variance = ((m * n) / 12) * ((N + 1) - tieTerm / (N * (N - 1)));
  if (variance <= 0) return { u, p: 1, exact: false }; // every value equal
  const z = Math.max(0, Math.abs(u - mean) - 0.5) / Math.sqrt(variance);
  return { u, p: Math.min(1, 2 * (1 - normalCdf(z))), exact: false };
}

/**
 * How many of the C(m+n, m) orderings of two tie-free samples give each U: the coefficients of
 * the Gaussian binomial [m+n choose m]_q = prod_{k=1..m} (1 - q^(n+k)) / (1 - q^k).
 */
function uDistribution(m: number, n: number): number[] {
  let poly = [1];
  for (let k = 1; k <= m; k++) {
    // Multiply by (1 - q^(n+k)).
    const times = new Array<number>(poly.length + n + k).fill(0);
    poly.forEach((c, i) => { times[i]! += c; times[i + n + k]! -= c; });
    // Divide by (1 - q^k): c'[i] = c[i] + c'[i-k] (exact: the quotient is a polynomial).
    const quotient = new Array<number>(times.length - k).fill(0);
    for (let i = 0; i < quotient.length; i++) quotient[i] = times[i]! + (i >= k ? quotient[i - k]! : 0);
    poly = quotient;
  }
  return poly;
}

/** The standard normal CDF (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7). */
function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const erf = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return z >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
}

export type VerdictKind = 'better' | 'worse' | 'no significant difference' | 'too few runs';

/** What the runs of two configurations say about their difference. */
export interface Comparison {
  /** The reference configuration (the first of its VMM) and the one compared with it. */
  baseline: string;
  candidate: string;
  runner: string;
  /** Runs with a value on each side. */
  n: [number, number];
  /** median(candidate) / median(baseline); null when the baseline's median is 0. */
  ratio: number | null;
  /** Bootstrap 95 % interval of that ratio. */
  ci95: [number, number] | null;
  /** Mann-Whitney two-sided p. */
  p: number | null;
  significant: boolean;
  verdict: VerdictKind;
  /** The verdict in one line, e.g. "0.56× (95 % CI 0.48–0.63, p = 0.002): better". */
  text: string;
}

/** Compares two samples; `better` says which direction is an improvement. */
export function compareSamples(baseline: readonly number[], candidate: readonly number[], better: Better,
  names: { baseline: string; candidate: string; runner: string } = { baseline: 'A', candidate: 'B', runner: '' }): Comparison {
  const n: [number, number] = [baseline.length, candidate.length];
  const mb = baseline.length ? median(baseline) : NaN;
  const ratio = baseline.length && candidate.length && mb !== 0 ? median(candidate) / mb : null;
  if (Math.min(...n) < 2) {
    return { ...names, n, ratio, ci95: null, p: null, significant: false, verdict: 'too few runs', text: describeComparison(ratio, null, null, 'too few runs') };
  }
  const ci95 = bootstrapRatioOfMedians(baseline, candidate);
  const { p } = mannWhitney(candidate, baseline);
  const significant = ci95 !== null && (ci95[0] > 1 || ci95[1] < 1) && p < ALPHA;
  const up = ratio !== null && ratio > 1;
  const verdict: VerdictKind = !significant ? 'no significant difference' : (up === (better === 'higher')) ? 'better' : 'worse';
  return { ...names, n, ratio, ci95, p, significant, verdict, text: describeComparison(ratio, ci95, p, verdict) };
}

export function describeComparison(ratio: number | null, ci: [number, number] | null, p: number | null, verdict: VerdictKind): string {
  const r = ratio === null ? '—' : `${ratio.toFixed(2)}×`;
  const parts = [ci ? `95 % CI ${ci[0].toFixed(2)}–${ci[1].toFixed(2)}` : '', p === null ? '' : p < 0.001 ? 'p < 0.001' : `p = ${formatP(p)}`].filter(Boolean);
  return `${r}${parts.length ? ` (${parts.join(', ')})` : ''}: ${verdict}`;
}

export function formatP(p: number): string {
  return p < 0.001 ? '< 0.001' : p.toFixed(3);
}

/** The rows that compare: every row against the first row of the same VMM (the "ratio to first"). */
export function compareRows(rows: readonly { config: string; runner: string; runs: readonly number[] }[], better: Better): Comparison[] {
  const out: Comparison[] = [];
  for (const row of rows) {
    const first = rows.find((r) => r.runner === row.runner);
    if (!first || first === row) continue;
    out.push(compareSamples(first.runs, row.runs, better, { baseline: first.config, candidate: row.config, runner: row.runner }));
  }
  return out;
}
