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
   * The header's figures: 'sum' and 'first' — the max and mean over rows of the series' sum (or
   * of the first series); 'max' — the highest value of any series and the mean of all values.
   */
  total: { max: number | null; mean: number | null };
}

/** Max and mean of columns over rows [from, to), and of their per-row sum / max / first. */
export function windowStats(cols: readonly (Column | undefined)[], from: number, to: number, total: 'sum' | 'max' | 'first'): WindowStats {
  const series = cols.map((c) => {
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
    return n ? { max, mean: sum / n } : { max: null, mean: null };
  });
  let tMax = -Infinity;
  let tSum = 0;
  let tN = 0;
  if (total === 'max') {
    // The highest value of any series, and the mean of every value (per series and row).
    for (const x of series) if (x.max !== null && x.max > tMax) tMax = x.max;
    cols.forEach((c, k) => {
      const m = series[k]!;
      if (!c || m.mean === null) return;
      let n = 0;
      for (let i = from; i < to; i++) if (!Number.isNaN(c[i]!)) n++;
      tSum += m.mean * n;
      tN += n;
    });
  } else {
    for (let i = from; i < to; i++) {
      let row = NaN;
      for (let k = 0; k < cols.length; k++) {
        const v = cols[k]?.[i];
        if (v === undefined || Number.isNaN(v)) continue;
        if (total === 'first') {
          if (k === 0) row = v;
        } else row = Number.isNaN(row) ? v : row + v;
      }
      if (Number.isNaN(row)) continue;
      if (row > tMax) tMax = row;
      tSum += row;
      tN++;
    }
  }
  return { series, total: tN ? { max: tMax, mean: tSum / tN } : { max: null, mean: null } };
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

