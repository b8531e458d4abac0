// KVM's halt histograms kept per second and drawn as bars (hist-bins.ts, hist-view.ts): sums over
// a window per vCPU and for all, trimming, the bars' buckets and labels, the median, and where a
// halt-poll-ns falls across the bars.
import { describe, expect, it } from 'vitest';
import { HistogramBins, bucketLowNs, histTotal } from '../../electron/vmm/telemetry/hist-bins.ts';
import { barPosition, fmtDuration, histBars, histMedianNs } from '../../renderer/src/charts/hist-view.ts';

const hist = (at: Record<number, number>, n = 32) => Array.from({ length: n }, (_, i) => at[i] ?? 0);

describe('HistogramBins', () => {
  it('sums one-second bins per vCPU and for all, from a time on', () => {
    const b = new HistogramBins(1000, 600_000);
    b.add(100, 0, { halt_wait_hist: hist({ 10: 2 }) });
    b.add(200, 0, { halt_wait_hist: hist({ 10: 1, 12: 1 }), halt_poll_success_hist: null });
    b.add(250, 1, { halt_wait_hist: hist({ 20: 5 }) });
    b.add(1500, 0, { halt_wait_hist: hist({ 12: 4 }), halt_poll_fail_hist: hist({ 14: 3 }) });
    expect(b.all().map((x) => [x.t, x.vcpu])).toEqual([[0, 0], [0, 1], [1000, 0]]);
    expect(b.sum().halt_wait_hist![10]).toBe(3);
    expect(b.sum().halt_wait_hist![12]).toBe(5);
    expect(b.sum().halt_wait_hist![20]).toBe(5);
    expect(b.sum(-Infinity, 1).halt_wait_hist![20]).toBe(5);
    expect(b.sum(-Infinity, 1).halt_poll_fail_hist).toBeUndefined();
    // From 1.2 s on: the bin of second 1 only.
    expect(histTotal(b.sum(1200).halt_wait_hist)).toBe(4);
    expect(histTotal(b.sum(1200).halt_poll_fail_hist)).toBe(3);
    expect(b.vcpus()).toEqual([0, 1]);
  });

  it("keeps KVM's time sums with the counts they time, and none for a window where a part lacks them", () => {
    const b = new HistogramBins(1000, 600_000);
    const sums = (fail: number, success: number) => ({ halt_poll_fail_ns: fail, halt_poll_success_ns: success });
    b.add(100, 0, { halt_wait_hist: hist({ 10: 2 }), ...sums(2500, 0) });
    b.add(200, 1, { halt_poll_success_hist: hist({ 17: 4 }), ...sums(0, 500_000) });
    b.add(1100, 0, { halt_wait_hist: hist({ 10: 1 }), ...sums(900, 0) });
    expect(b.sum()).toMatchObject({ halt_poll_fail_ns: 3400, halt_poll_success_ns: 500_000 });
    expect(b.sum(-Infinity, 1)).toMatchObject({ halt_poll_fail_ns: 0, halt_poll_success_ns: 500_000 });
    // No counts, no bin: the sums of an interval without halts have nothing to place.
    b.add(2100, 0, sums(5, 5));
    expect(b.sum(2000)).toEqual({});
    // A second that got one interval without its sums (a reset, a source without them) keeps none,
    // and a window over it has none: a partial sum would misplace every count in it.
    b.add(3100, 0, { halt_wait_hist: hist({ 10: 1 }), ...sums(100, 0) });
    b.add(3200, 0, { halt_wait_hist: hist({ 10: 1 }), halt_poll_fail_ns: null, halt_poll_success_ns: 0 });
    b.add(3300, 0, { halt_wait_hist: hist({ 10: 1 }), ...sums(100, 0) });
    expect(b.sum(3000).halt_wait_hist![10]).toBe(3);
    expect(b.sum(3000).halt_poll_fail_ns).toBeUndefined();
    expect(b.sum(3000).halt_poll_success_ns).toBeUndefined();
    expect(b.sum()).not.toHaveProperty('halt_poll_fail_ns');
    expect(b.sum(0, 1).halt_poll_success_ns).toBe(500_000);
    // Sums that KVM could not give are refused like bad counts.
    b.add(4100, 2, { halt_wait_hist: hist({ 10: 1 }), ...sums(-1, 0) });
    expect(b.sum(4000, 2).halt_poll_fail_ns).toBeUndefined();
  });

  it('adds nothing for a first sample, a reset or an interval without halts', () => {
    const b = new HistogramBins();
    b.add(0, 0, { halt_wait_hist: null, halt_poll_success_hist: hist({}) });
    expect(b.all()).toEqual([]);
  });

  it('drops what KVM could not have given (counts may come from the network): odd times, vCPUs and counts', () => {
    const b = new HistogramBins(1, 600);
    b.add(NaN, 0, { halt_wait_hist: hist({ 5: 1 }) });
    b.add(Infinity, 0, { halt_wait_hist: hist({ 5: 1 }) });
    b.add(1, -1, { halt_wait_hist: hist({ 5: 1 }) });
    b.add(1, 1.5, { halt_wait_hist: hist({ 5: 1 }) });
    b.add(1, 0, { halt_wait_hist: [1, -2], halt_poll_success_hist: ['3' as unknown as number], halt_poll_fail_hist: new Array(65).fill(1) });
    b.add(1, 0, { halt_wait_hist: [NaN, 1] });
    expect(b.all()).toEqual([]);
    b.add(2, 3, { halt_wait_hist: hist({ 5: 1 }), halt_poll_fail_hist: [-1] });
    expect(b.all()).toEqual([{ t: 2, vcpu: 3, counts: { halt_wait_hist: hist({ 5: 1 }) } }]);
  });

  it('keeps only its span', () => {
    const b = new HistogramBins(1, 10);
    for (let t = 0; t < 30; t++) b.add(t, 0, { halt_wait_hist: hist({ 5: 1 }) });
    expect(b.all()[0]!.t).toBeGreaterThanOrEqual(18);
    expect(histTotal(b.sum().halt_wait_hist)).toBe(b.all().length);
  });
});

describe('the bars', () => {
  it('fold everything below 2 µs into the first bar and leave the last open-ended', () => {
    const bars = histBars({ halt_wait_hist: hist({ 0: 1, 5: 2, 11: 3, 12: 4, 31: 5 }) });
    expect(bars.length).toBe(21);
    expect(bars[0]).toMatchObject({ lowNs: 0, highNs: 2048, label: '< 2.05 µs', wait: 6 });
    expect(bars[1]).toMatchObject({ lowNs: 2048, highNs: 4096, wait: 4, label: '2.05 µs–4.1 µs' });
    expect(bars.at(-1)).toMatchObject({ lowNs: 2 ** 30, highNs: null, wait: 5, label: '≥ 1.07 s' });
    expect(bars.reduce((s, b) => s + b.wait + b.success + b.fail, 0)).toBe(15);
  });

  it('place a halt-poll-ns across the bars on a log2 scale', () => {
    const bars = histBars({});
    expect(barPosition(0, bars)).toBe(0);
    expect(barPosition(1024, bars)).toBeCloseTo(0.5);
    expect(barPosition(2048, bars)).toBeCloseTo(1);
    expect(barPosition(3 * 1024, bars)).toBeCloseTo(1 + Math.log2(1.5));
    expect(barPosition(200_000, bars)).toBeCloseTo(Math.log2(200_000) - 10);
  });

  it('read a median inside its bucket and print durations shortly', () => {
    expect(histMedianNs(hist({}))).toBeNull();
    expect(histMedianNs(hist({ 0: 3 }))).toBe(0);
    // All in [2^18, 2^19): half-way through on a log scale.
    expect(histMedianNs(hist({ 19: 10 }))).toBeCloseTo(2 ** 18 * Math.SQRT2);
    expect(histMedianNs(hist({ 10: 1, 20: 3 }))).toBeGreaterThan(2 ** 19);
    expect(bucketLowNs(0)).toBe(0);
    expect(bucketLowNs(11)).toBe(1024);
    expect(fmtDuration(512)).toBe('512 ns');
    expect(fmtDuration(262_144)).toBe('262 µs');
    expect(fmtDuration(33_554_432)).toBe('33.6 ms');
    expect(fmtDuration(2_048_000)).toBe('2.05 ms');
  });
});
