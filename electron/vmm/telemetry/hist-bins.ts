// KVM's halt histograms over time, coarse enough to keep ten minutes of every vCPU: the counts of
// each second (bin) summed per vCPU, so a window of the last N minutes is a sum of bins. Pure: the
// sampler, the service's backfill and the renderer's store all keep them this way.
import { KVM_HISTOGRAM_SUMS, KVM_VCPU_HISTOGRAMS } from './fields.ts';

export type HistName = (typeof KVM_VCPU_HISTOGRAMS)[number];
export const HIST_NAMES: readonly HistName[] = KVM_VCPU_HISTOGRAMS;
export type HistSumName = (typeof KVM_HISTOGRAM_SUMS)[number];

/**
 * Each histogram's counts per bucket (bucket i: [2^(i-1), 2^i) ns; 0: zero; the last open-ended),
 * and KVM's time sums over the same span (ns), where every part of the span had them.
 */
export type HistCounts = Partial<Record<HistName, number[]>> & Partial<Record<HistSumName, number>>;

/** One vCPU's counts in one bin: `t` is the bin's start, in the producer's time unit. */
export interface HistBin {
  t: number;
  vcpu: number;
  counts: HistCounts;
}

export class HistogramBins {
  private bins: HistBin[] = [];
  /** Bins that got an interval without its sums: they keep none from then on. */
  private readonly withoutSums = new WeakSet<HistBin>();
  readonly binWidth: number;
  readonly keep: number;

  /** `binWidth` and `keep` in the unit of the times given to add() (ms in the VMM, s in the renderer). */
  constructor(binWidth = 1000, keep = 600_000) {
    this.binWidth = binWidth;
    this.keep = keep;
  }

  /**
   * Adds one vCPU's interval counts at time t (null or absent histograms: nothing to add, as for
   * the first sample or a reset). Counts all zero add nothing either.
   */
  add(t: number, vcpu: number, counts: Partial<Record<string, unknown>>): void {
    // Counts may come from the network (the renderer's events): what KVM could not have is dropped.
    if (!Number.isFinite(t) || !Number.isSafeInteger(vcpu) || vcpu < 0 || vcpu > MAX_VCPU_INDEX) return;
    const start = Math.floor(t / this.binWidth) * this.binWidth;
    let bin: HistBin | undefined;
    for (const name of HIST_NAMES) {
      const c = counts[name];
      if (!isCounts(c) || !c.some((n) => n > 0)) continue;
      bin ??= this.binFor(start, vcpu);
      const into = bin.counts[name] ??= [];
      addInto(into, c);
    }
    // The sums go with the counts they time: a span without counts has nothing for them to place.
    if (bin && !this.withoutSums.has(bin)) {
      if (KVM_HISTOGRAM_SUMS.every((name) => isSum(counts[name]))) {
        for (const name of KVM_HISTOGRAM_SUMS) bin.counts[name] = (bin.counts[name] ?? 0) + (counts[name] as number);
      } else {
        this.withoutSums.add(bin);
        for (const name of KVM_HISTOGRAM_SUMS) delete bin.counts[name];
      }
    }
    this.trim(t);
  }

  /** Adds a bin as it was kept elsewhere (a backfill): same as add() at its start. */
  addBin(b: HistBin): void {
    this.add(b.t, b.vcpu, b.counts);
  }

  /** The sum of every bin from `since` on, of one vCPU or of all. */
  sum(since = -Infinity, vcpu?: number): HistCounts {
    const out: HistCounts = {};
    const missing = new Set<HistSumName>();
    for (const b of this.bins) {
      if (b.t + this.binWidth <= since || (vcpu !== undefined && b.vcpu !== vcpu)) continue;
      for (const name of HIST_NAMES) {
        const c = b.counts[name];
        if (c) addInto(out[name] ??= [], c);
      }
      for (const name of KVM_HISTOGRAM_SUMS) {
        const v = b.counts[name];
        if (v === undefined) missing.add(name);
        else out[name] = (out[name] ?? 0) + v;
      }
    }
    // A sum over part of the span would misplace the whole span's counts: then there is none.
    for (const name of missing) delete out[name];
    return out;
  }

  /** Every bin kept, oldest first (for a backfill). */
  all(): readonly HistBin[] {
    return this.bins;
  }

  /** The vCPUs that have any counts kept. */
  vcpus(): number[] {
    return [...new Set(this.bins.map((b) => b.vcpu))].sort((a, b) => a - b);
  }

  clear(): void {
    this.bins = [];
  }

  private binFor(start: number, vcpu: number): HistBin {
    // Samples arrive in time order: the bin is among the last ones (one per vCPU).
    for (let i = this.bins.length - 1; i >= 0; i--) {
      const b = this.bins[i]!;
      if (b.t < start) break;
      if (b.t === start && b.vcpu === vcpu) return b;
    }
    const bin: HistBin = { t: start, vcpu, counts: {} };
    let at = this.bins.length;
    while (at > 0 && this.bins[at - 1]!.t > start) at--;
    this.bins.splice(at, 0, bin);
    return bin;
  }

  private trim(now: number): void {
    let drop = 0;
    while (drop < this.bins.length && this.bins[drop]!.t + this.binWidth < now - this.keep) drop++;
    if (drop) this.bins.splice(0, drop);
  }
}

/** A vCPU index beyond any KVM's (KVM_MAX_VCPUS is at most 4096). */
const MAX_VCPU_INDEX = 4095;
/** More buckets than any KVM histogram has (KVM's log histograms have 32). */
const MAX_BUCKETS = 64;

/** Counts per bucket as KVM gives them: a short list of whole numbers >= 0. */
function isCounts(c: unknown): c is number[] {
  return Array.isArray(c) && c.length <= MAX_BUCKETS && c.every((n) => typeof n === 'number' && Number.isFinite(n) && n >= 0);
}

/** A time sum as KVM gives it: a whole number of ns >= 0. */
function isSum(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}

/** Total count of a histogram (0 for none). */
export function histTotal(c: readonly number[] | undefined): number {
  let n = 0;
  for (const x of c ?? []) n += x;
  return n;
}

/** Bucket i's lower bound in ns (bucket 0: exactly 0). */
export function bucketLowNs(i: number): number {
  return i === 0 ? 0 : 2 ** (i - 1);
}

function addInto(into: number[], c: readonly number[]): void {
  for (let i = 0; i < c.length; i++) into[i] = (into[i] ?? 0) + (c[i] ?? 0);
}
