// What a chart's header and legend read out, as pure functions of its columns: the max and mean
// over the visible window (not the newest sample, which for a bursty series is mostly 0), and how
// its numbers are written.

/** A column of values; NaN = no value (the store's columns). */
type Column = Float64Array;
import { pct, si } from '../lib/format.ts';

/** Each series' max and mean over the rows in the visible window (null: no value there). */
export interface WindowStats {
  series: { max: number | null; mean: number | null }[];
  /**
   * The header's figures, each of what the chart draws: 'sum' — the highest value of any series
   * (the top of what is drawn) and the sum of the series' means (all vCPUs together: the sum
   * itself is not drawn, so its peak is not shown); 'first' — the first series' max and mean;
   * 'max' — the highest value of any series and the mean of all values.
   */
  total: { max: number | null; mean: number | null };
}

/**
 * A series that is a ratio of two counts per row (the poll hit rate: hits / attempts): its mean
 * over rows is Σ num / Σ den, not the mean of the rows' ratios.
 */
export interface RatioCols { num: Column; den: Column }

/** Max and mean of columns over rows [from, to), and the header's total (see WindowStats). */
export function windowStats(cols: readonly (Column | undefined)[], from: number, to: number, total: 'sum' | 'max' | 'first',
  ratios: readonly (RatioCols | undefined)[] = []): WindowStats {
  let allNum = 0;
  let allDen = 0;
  const series = cols.map((c, k) => {
    let max = -Infinity;
    let sum = 0;
    let n = 0;
    if (c) for (let i = from; i < to; i++) {
      const v = c[i]!;
      if (Number.isNaN(v)) continue;
      if (v > max) max = v;
      sum += v;
      n++;
    }
    if (!n) return { max: null, mean: null };
    const r = ratios[k];
    if (!r) return { max, mean: sum / n };
    let num = 0;
    let den = 0;
    for (let i = from; i < to; i++) {
      const a = r.num[i]!;
      const b = r.den[i]!;
      if (Number.isNaN(a) || Number.isNaN(b)) continue;
      num += a;
      den += b;
    }
    allNum += num;
    allDen += den;
    return { max, mean: den > 0 ? num / den : sum / n };
  });
  const withValues = series.filter((x) => x.max !== null) as { max: number; mean: number }[];
  if (!withValues.length) return { series, total: { max: null, mean: null } };
  const highest = Math.max(...withValues.map((x) => x.max));
  if (total === 'first') return { series, total: series[0]!.max === null ? { max: null, mean: null } : series[0]! };
  if (total === 'sum') return { series, total: { max: highest, mean: withValues.reduce((a, x) => a + x.mean, 0) } };
  // 'max': the mean of every value (per series and row), or all hits over all attempts.
  if (ratios.length && ratios.every((r) => r) && allDen > 0) return { series, total: { max: highest, mean: allNum / allDen } };
  let tSum = 0;
  let tN = 0;
  cols.forEach((c, k) => {
    const m = series[k]!;
    if (!c || m.mean === null) return;
    for (let i = from; i < to; i++) if (!Number.isNaN(c[i]!)) { tSum += c[i]!; tN++; }
  });
  return { series, total: { max: highest, mean: tN ? tSum / tN : null } };
}

/** How a chart's values read: percentages, µs, rates per second (plain numbers, never an SI "m" for milli). */
export function chartFormat(kind: 'rate' | 'fraction' | 'us' | 'bytes'): (v: number | null) => string {
  return (v) => (v === null ? '—' : kind === 'fraction' ? pct(v) : kind === 'us' ? micros(v) : kind === 'rate' ? `${si(v)}/s`
    : kind === 'bytes' ? `${si(v, 'B')}/s` : si(v));
}

/** Microseconds as µs, ms or s by size ("20.7 ms", never "20.7 k µs"). */
export function micros(v: number): string {
  const a = Math.abs(v);
  return a >= 1e6 ? si(v / 1e6, 's') : a >= 1e3 ? si(v / 1e3, 'ms') : si(v, 'µs');
}

/** "1 min", "5 min", "30 s". */
export function windowText(sec: number): string {
  return sec >= 60 && sec % 60 === 0 ? `${sec / 60} min` : `${sec} s`;
}

