// What a chart draws of its rows: the mean over each time bin as the line, and each bin's
// min-max as a band around it (pure; unit-tested without a browser). Drawing every 100 ms sample
// made a bursty series (a burst of wake-ups once a second, idle between) read at its bursts'
// height, ~10x its mean: the eye follows the ink. A bin is at least a second and a few pixels,
// so the line reads the mean at every zoom and the band still shows the peaks.
import type { RatioCols } from './window-stats.ts';

type Column = Float64Array;

/** The line's points per bin (x at the mean time of its rows, so points stay in order around gaps; null = a gap) and each bin's min and max. */
export interface Binned {
  x: number[];
  mean: (number | null)[][];
  min: (number | null)[][];
  max: (number | null)[][];
  /** Width of a bin in seconds. */
  binSec: number;
}

/** Bin widths a window may use: at least a second (the slowest burst period the probe has). */
const STEPS = [1, 2, 5, 10, 15, 30, 60];
/** Pixels a bin spans at least: narrower bins would draw the samples again. */
export const MIN_BIN_PX = 4;

/** The bin width for a window of `windowSec` seconds drawn `plotPx` pixels wide. */
export function binSeconds(windowSec: number, plotPx: number): number {
  const want = (windowSec * MIN_BIN_PX) / Math.max(1, plotPx);
  return STEPS.find((s) => s >= want) ?? STEPS[STEPS.length - 1]!;
}

/**
 * Rows [from, to) binned by `binSec` seconds counted back from the newest row, so the newest bin
 * is a whole one: a bin that holds only the newest sample or two would draw a burst at its own
 * height again, at the end of the line where the eye looks first. A series' mean in a bin is the mean of its values there, or Σ num / Σ den for a ratio
 * series; min and max are over its values. A row with no value in any series (a line break at
 * a restart) ends the bin and leaves a gap.
 */
export function binRows(x: Float64Array, cols: readonly (Column | undefined)[], from: number, to: number, binSec: number,
  ratios: readonly (RatioCols | undefined)[] = []): Binned {
  const k = cols.length;
  const out: Binned = { x: [], mean: cols.map(() => []), min: cols.map(() => []), max: cols.map(() => []), binSec };
  const sum = new Float64Array(k);
  const n = new Float64Array(k);
  const num = new Float64Array(k);
  const den = new Float64Array(k);
  const lo = new Float64Array(k);
  const hi = new Float64Array(k);
  // A hair past the newest row, so that it opens bin 0 (rounding never puts it in bin -1).
  const anchor = to > from ? x[to - 1]! + 1e-6 : 0;
  let bin = NaN;
  let rows = 0;
  let sumX = 0;
  let firstX = NaN;
  const reset = () => {
    sum.fill(0); n.fill(0); num.fill(0); den.fill(0); lo.fill(Infinity); hi.fill(-Infinity);
    rows = 0;
    sumX = 0;
  };
  const flush = () => {
    if (!rows) return;
    out.x.push(sumX / rows);
    for (let s = 0; s < k; s++) {
      const has = n[s]! > 0;
      out.mean[s]!.push(!has ? null : ratios[s] && den[s]! > 0 ? num[s]! / den[s]! : sum[s]! / n[s]!);
      out.min[s]!.push(has ? lo[s]! : null);
      out.max[s]!.push(has ? hi[s]! : null);
    }
  };
  const gap = (at: number) => {
    out.x.push(at);
    for (let s = 0; s < k; s++) { out.mean[s]!.push(null); out.min[s]!.push(null); out.max[s]!.push(null); }
  };
  reset();
  for (let i = from; i < to; i++) {
    const b = Math.floor((anchor - x[i]!) / binSec);
    if (b !== bin) {
      // A bin whose rows cover less than its second half (the first after the VM's start or a
      // gap) is no whole bin: its rows go into the next one instead of drawing a mean of two.
      const binStart = anchor - (bin + 1) * binSec;
      if (!(rows > 0 && firstX - binStart > binSec / 2)) {
        flush();
        reset();
      }
      bin = b;
    }
    let any = false;
    for (let s = 0; s < k; s++) {
      const v = cols[s]?.[i];
      if (v === undefined || Number.isNaN(v)) continue;
      any = true;
      sum[s] += v;
      n[s]++;
      if (v < lo[s]!) lo[s] = v;
      if (v > hi[s]!) hi[s] = v;
      const r = ratios[s];
      if (r && !Number.isNaN(r.num[i]!) && !Number.isNaN(r.den[i]!)) { num[s] += r.num[i]!; den[s] += r.den[i]!; }
    }
    if (any) {
      if (!rows) firstX = x[i]!;
      rows++;
      sumX += x[i]!;
    }
    else if (cols.length) {
      // A line break: what came before is one bin, the gap its own point, then a new bin.
      flush();
      gap(x[i]!);
      reset();
      bin = NaN;
    }
  }
  flush();
  return out;
}

/** The highest value in any of these arrays (0 for none). */
export function highest(arrays: readonly (readonly (number | null)[])[]): number {
  let m = 0;
  for (const a of arrays) for (const v of a) if (v !== null && v > m) m = v;
  return m;
}
