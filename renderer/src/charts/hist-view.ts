// KVM's halt histograms as bars a person can read (pure; unit-tested without a browser): one bar
// per log2 bucket from 1 µs up, everything shorter folded into the first, the last open-ended.
import { bucketLowNs, histTotal, type HistCounts } from '../../../electron/vmm/telemetry/hist-bins.ts';
import { durationText } from '../../../electron/experiments/halt-poll-model.ts';

/** A duration as the app writes it everywhere (the halt-poll prediction's sentences too). */
export const fmtDuration = durationText;

/** Bucket 11 is [1024, 2048) ns: shorter durations are drawn in the first bar ("< 2.05 µs"). */
const FIRST_BUCKET = 11;
/** KVM's histograms have 32 buckets: the last (2^30 ns up, ~1.07 s) is open-ended. */
const BUCKETS = 32;

export interface HistBar {
  /** Lower bound (ns) of the bar; 0 for the first, which holds everything below 2 µs. */
  lowNs: number;
  /** Upper bound (ns); null for the last, open-ended bar. */
  highNs: number | null;
  label: string;
  wait: number;
  success: number;
  fail: number;
}

/** The bars of one window's histograms (a bar per bucket, the same bars for all three). */
export function histBars(c: HistCounts): HistBar[] {
  const n = Math.max(BUCKETS, c.halt_wait_hist?.length ?? 0, c.halt_poll_success_hist?.length ?? 0, c.halt_poll_fail_hist?.length ?? 0);
  const bars: HistBar[] = [];
  for (let i = FIRST_BUCKET; i < n; i++) {
    const first = i === FIRST_BUCKET;
    const last = i === n - 1;
    const from = first ? 0 : i;
    const sum = (h: number[] | undefined) => {
      let s = 0;
      for (let b = from; b <= i; b++) s += h?.[b] ?? 0;
      if (last) for (let b = i + 1; b < (h?.length ?? 0); b++) s += h![b]!;
      return s;
    };
    const lowNs = first ? 0 : bucketLowNs(i);
    const highNs = last ? null : bucketLowNs(i + 1);
    bars.push({
      lowNs, highNs,
      label: first ? `< ${fmtDuration(highNs!)}` : last ? `≥ ${fmtDuration(lowNs)}` : `${fmtDuration(lowNs)}–${fmtDuration(highNs!)}`,
      wait: sum(c.halt_wait_hist), success: sum(c.halt_poll_success_hist), fail: sum(c.halt_poll_fail_hist),
    });
  }
  return bars;
}

/**
 * The bar position (0 = the first bar's left edge, 1 = one bar further) of a duration, so a
 * halt-poll-ns can be drawn across the bars: log2 inside a bar.
 */
export function barPosition(ns: number, bars: readonly HistBar[]): number {
  if (!(ns > 0) || !bars.length) return 0;
  for (let i = 0; i < bars.length; i++) {
    const b = bars[i]!;
    if (b.highNs === null || ns < b.highNs) {
      if (i === 0) return ns / b.highNs!; // linear in the folded first bar
      return i + (b.highNs === null ? 0 : Math.log2(ns / b.lowNs));
    }
  }
  return bars.length;
}

/** The median duration of a histogram (ns), log-interpolated inside its bucket; null without counts. */
export function histMedianNs(h: readonly number[] | undefined): number | null {
  const total = histTotal(h as number[] | undefined);
  if (!h || total === 0) return null;
  let seen = 0;
  for (let i = 0; i < h.length; i++) {
    const n = h[i]!;
    if (n === 0) continue;
    if (seen + n >= total / 2) {
      if (i === 0) return 0;
      const low = bucketLowNs(i);
      const frac = (total / 2 - seen) / n;
      return low * 2 ** frac;
    }
    seen += n;
  }
  return null;
}
