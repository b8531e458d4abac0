// The halt-polling model (electron/experiments/halt-poll-model.ts): KVM's window rules checked on
// traces worked out by hand from kvm_vcpu_halt, the histograms' reconstruction, and predictions
// on synthetic histograms against values derived by hand (a Markov chain where the halts are
// independent draws).
import { describe, expect, it } from 'vitest';
import {
  KVM_HALT_POLL_PARAMS as KVM, caughtOf, haltPollCandidates, haltPollParamsOf, haltPollCurve, meanWakeDelayNs, predictHaltPolling, predictStaticPolling,
  recommendHaltPoll, sampleWakeDelays, simulateHaltPolling, simulateStaticPolling, sumHaltHistograms, wakeDelayDistribution,
  type HaltPollParams,
} from '../../electron/experiments/halt-poll-model.ts';

/** A 32-bucket KVM histogram with the given counts. */
const hist = (counts: Record<number, number>) => Array.from({ length: 32 }, (_, i) => counts[i] ?? 0);
const MAX = 200_000;
/** The window each halt leaves behind (before the next halt's cap). */
const windowsAfter = (delays: number[], max = MAX, params: HaltPollParams = KVM, start = 0) =>
  delays.map((_, i) => simulateHaltPolling(delays.slice(0, i + 1), max, params, start).finalWindowNs);

describe('KVM\'s window, halt by halt (grow 2, grow start 10 µs, shrink 2, max 200 µs)', () => {
  it('grows from 0 through misses until it catches, and a caught halt leaves it alone', () => {
    const delays = [50_000, 50_000, 50_000, 50_000, 50_000, 50_000];
    // 1: window 0, no poll, 50 µs < max: grow 0 -> grow start. 2-4: miss (50 µs > window), double.
    // 5-6: 80 µs catches 50 µs; halt_ns <= window: no change.
    expect(windowsAfter(delays)).toEqual([10_000, 20_000, 40_000, 80_000, 80_000, 80_000]);
    expect(simulateHaltPolling(delays, MAX, KVM)).toEqual({
      halts: 6, polled: 5, caught: 2, missed: 3,
      pollCpuNs: 10_000 + 20_000 + 40_000 + 50_000 + 50_000, // misses burn the window, catches the delay
      waitedNs: 50_000 + 40_000 + 30_000 + 10_000, // the unpolled halt, then each miss's remainder
      windowSumNs: 0 + 10_000 + 20_000 + 40_000 + 80_000 + 80_000,
      finalWindowNs: 80_000,
    });
  });

  it('a halt longer than max shrinks the window: halved, or to 0 with shrink 0 or below grow start', () => {
    expect(simulateHaltPolling([5_000_000], MAX, KVM, 80_000)).toMatchObject({ polled: 1, missed: 1, pollCpuNs: 80_000, finalWindowNs: 40_000 });
    expect(simulateHaltPolling([5_000_000], MAX, { ...KVM, shrink: 0 }, 80_000).finalWindowNs).toBe(0);
    expect(simulateHaltPolling([5_000_000], MAX, KVM, 10_000).finalWindowNs).toBe(0); // 5 µs < grow start
    expect(simulateHaltPolling([5_000_000], MAX, KVM, 20_000).finalWindowNs).toBe(10_000); // equal to it: kept
    // From a new vCPU: two growths, then two long halts bring it back to 0.
    const delays = [50_000, 50_000, 5_000_000, 5_000_000];
    expect(windowsAfter(delays)).toEqual([10_000, 20_000, 10_000, 0]);
    expect(simulateHaltPolling(delays, MAX, KVM)).toMatchObject({ polled: 3, caught: 0, missed: 3, pollCpuNs: 40_000 });
  });

  it('max 0 never polls, whatever the window was', () => {
    expect(simulateHaltPolling([1_000, 50_000, 5_000_000], 0, KVM, 80_000)).toEqual({
      halts: 3, polled: 0, caught: 0, missed: 0, pollCpuNs: 0, waitedNs: 5_051_000, windowSumNs: 0, finalWindowNs: 0,
    });
  });

  it('a lowered max caps the window when the next halt starts, not when it grows', () => {
    const delays = [25_000, 25_000, 25_000, 25_000];
    // Max 30 µs: 0 -> 10 -> 20 -> 40 µs (a grow is not capped), then the 4th halt polls 30 µs and catches.
    expect(windowsAfter(delays, 30_000)).toEqual([10_000, 20_000, 40_000, 30_000]);
    expect(simulateHaltPolling(delays, 30_000, KVM)).toMatchObject({
      polled: 3, caught: 1, missed: 2, pollCpuNs: 10_000 + 20_000 + 25_000, windowSumNs: 0 + 10_000 + 20_000 + 30_000,
    });
    expect(simulateHaltPolling([45_000], 50_000, KVM, 80_000)).toMatchObject({ caught: 1, pollCpuNs: 45_000, windowSumNs: 50_000 });
  });

  it('never starts from 0 on halts of max or longer, nor with grow 0', () => {
    // Window 0 cannot shrink, and a halt >= max does not grow it: long halts cost nothing.
    expect(simulateHaltPolling([200_000, 300_000, 5_000_000], MAX, KVM)).toMatchObject({ polled: 0, finalWindowNs: 0 });
    expect(windowsAfter([199_999])).toEqual([10_000]);
    expect(simulateHaltPolling([50_000, 50_000, 50_000], MAX, { ...KVM, grow: 0 })).toMatchObject({ polled: 0, finalWindowNs: 0 });
  });

  it('with max under twice grow start, one halt over max stops polling until a short halt restarts it', () => {
    // Max 16 µs: the window is 10 µs; 20 µs misses and halves it to 5 µs < grow start: 0.
    const delays = [1_000, 1_000, 20_000, 1_000, 1_000];
    expect(windowsAfter(delays, 16_000)).toEqual([10_000, 10_000, 0, 10_000, 10_000]);
    expect(simulateHaltPolling(delays, 16_000, KVM)).toMatchObject({ polled: 3, caught: 2, missed: 1, pollCpuNs: 1_000 + 10_000 + 1_000 });
  });

  it('the static model polls the same window every halt', () => {
    expect(simulateStaticPolling([1_000, 50_000, 5_000_000], MAX)).toEqual({
      halts: 3, polled: 3, caught: 2, missed: 1, pollCpuNs: 1_000 + 50_000 + MAX, waitedNs: 5_000_000 - MAX, windowSumNs: 3 * MAX, finalWindowNs: MAX,
    });
  });

  it('refuses what KVM could not have', () => {
    expect(() => simulateHaltPolling([-1], MAX, KVM)).toThrow(RangeError);
    expect(() => simulateHaltPolling([1], Number.NaN, KVM)).toThrow(RangeError);
    expect(() => simulateHaltPolling([1], MAX, { ...KVM, grow: 1.5 })).toThrow('grow must be an integer >= 0');
  });
});

describe('the wake-up delays the histograms imply', () => {
  it('a wait histogram alone (polling off) is itself: one piece per bucket, unshifted', () => {
    const d = wakeDelayDistribution({ halt_wait_hist: [0, 0, 0, 0, 5, 3] });
    expect(d).toEqual({
      halts: 8, caught: 0, blocked: 8, missed: 0, meanFailedPollNs: 0,
      pieces: [
        { bucket: 4, openEnded: false, shiftNs: 0, weight: 5, tilt: 0 },
        { bucket: 5, openEnded: true, shiftNs: 0, weight: 3, tilt: 0 }, // the last bucket: open-ended, drawn as 32 ns
      ],
    });
    // Bucket 4 is [8, 16) ns, log-uniform: mean 8 / ln 2.
    expect(meanWakeDelayNs(d)).toBeCloseTo((5 * 8 / Math.LN2 + 3 * 32) / 8, 9);
  });

  it('sleeps after failed polls move by the mean failed poll (from halt_poll_fail_ns, else the buckets)', () => {
    const waitOnly = wakeDelayDistribution({ halt_wait_hist: hist({ 10: 4 }) });
    const shifted = wakeDelayDistribution({ halt_wait_hist: hist({ 10: 4 }), halt_poll_fail_hist: hist({ 14: 4 }), halt_poll_fail_ns: 40_000 });
    expect(shifted.meanFailedPollNs).toBe(10_000);
    expect(shifted.pieces).toEqual([{ bucket: 10, openEnded: false, shiftNs: 10_000, weight: 4, tilt: 0 }]);
    expect(meanWakeDelayNs(shifted)).toBeCloseTo(meanWakeDelayNs(waitOnly) + 10_000, 6);
    // Without the counter: the fail bucket's mean, 8192 / ln 2 (bucket 14 is [8192, 16384) ns).
    const fromBuckets = wakeDelayDistribution({ halt_wait_hist: hist({ 10: 4 }), halt_poll_fail_hist: hist({ 14: 4 }) });
    expect(fromBuckets.meanFailedPollNs).toBeCloseTo(8192 / Math.LN2, 6);
  });

  it('only the share of sleeps that polled first is shifted; caught polls count as they are', () => {
    const d = wakeDelayDistribution({
      halt_wait_hist: hist({ 20: 10 }), halt_poll_fail_hist: hist({ 15: 5 }), halt_poll_fail_ns: 100_000,
      halt_poll_success_hist: hist({ 12: 7 }),
    });
    expect(d).toMatchObject({ halts: 17, caught: 7, blocked: 10, missed: 5, meanFailedPollNs: 20_000 });
    expect(d.pieces).toEqual([
      { bucket: 12, openEnded: false, shiftNs: 0, weight: 7, tilt: 0 },
      { bucket: 20, openEnded: false, shiftNs: 20_000, weight: 5, tilt: 0 },
      { bucket: 20, openEnded: false, shiftNs: 0, weight: 5, tilt: 0 },
    ]);
  });

  it('draws stay in their bucket (bucket 0 is 0 ns, the last 2^last) and average to the mean', () => {
    const one = sampleWakeDelays(wakeDelayDistribution({ halt_wait_hist: hist({ 16: 1 }) }), 2000);
    expect(Math.min(...one)).toBeGreaterThanOrEqual(32_768);
    expect(Math.max(...one)).toBeLessThan(65_536);
    expect(sampleWakeDelays(wakeDelayDistribution({ halt_wait_hist: [3, 0, 2] }), 50).every((x) => x === 0 || x === 4)).toBe(true);
    const d = wakeDelayDistribution({ halt_wait_hist: hist({ 11: 1, 16: 1 }) });
    const xs = sampleWakeDelays(d, 20_000);
    expect(xs.reduce((a, b) => a + b, 0) / xs.length / meanWakeDelayNs(d)).toBeCloseTo(1, 2);
  });

  it('with KVM\'s sum of the caught polls, places their draws in their buckets to match its mean', () => {
    // 100 caught polls in [131, 262) µs summing to 14.5 ms: a mean of 145 µs, near the low end
    // (log-uniform would give 189 µs). A window of 160 µs cuts the bucket: the sum decides.
    const counts = { halt_poll_success_hist: hist({ 18: 100 }) };
    const flat = wakeDelayDistribution(counts);
    const placed = wakeDelayDistribution({ ...counts, halt_poll_success_ns: 14_500_000 });
    expect(flat.pieces[0]!.tilt).toBe(0);
    expect(placed.pieces[0]!.tilt).toBeLessThan(0);
    expect(meanWakeDelayNs(placed)).toBeCloseTo(145_000, -1);
    const xs = sampleWakeDelays(placed, 20_000);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(131_072);
    expect(Math.max(...xs)).toBeLessThan(262_144);
    expect(xs.reduce((a, b) => a + b, 0) / xs.length / 145_000).toBeCloseTo(1, 2);
    const under = (ys: number[], ns: number) => ys.filter((y) => y <= ns).length / ys.length;
    expect(under(xs, 160_000)).toBeGreaterThan(under(sampleWakeDelays(flat, 20_000), 160_000) + 0.2);
    // A mean at the top leans the other way; one beyond what the buckets allow takes the end.
    expect(wakeDelayDistribution({ ...counts, halt_poll_success_ns: 25_000_000 }).pieces[0]!.tilt).toBeGreaterThan(0);
    const atEnd = meanWakeDelayNs(wakeDelayDistribution({ ...counts, halt_poll_success_ns: 1_000 }));
    expect(atEnd).toBeGreaterThanOrEqual(131_072);
    expect(atEnd).toBeLessThan(131_072 * 1.02);
    // The sleeps stay log-uniform: the caught polls' sum says nothing of them.
    const both = wakeDelayDistribution({ ...counts, halt_poll_success_ns: 14_500_000, halt_wait_hist: hist({ 21: 10 }) });
    expect(both.pieces.map((p) => Math.sign(p.tilt))).toEqual([-1, 0]);
    expect(() => wakeDelayDistribution({ ...counts, halt_poll_success_ns: -1 })).toThrow(/halt_poll_success_ns/);
  });

  it('sums vCPUs bucket by bucket, and keeps the fail counter only when every member has it', () => {
    expect(sumHaltHistograms([
      { halt_wait_hist: [1, 2], halt_poll_fail_hist: [0, 1], halt_poll_fail_ns: 5 },
      { halt_wait_hist: [0, 1, 4], halt_poll_fail_ns: 7 },
    ])).toEqual({
      halt_wait_hist: [1, 3, 4], halt_poll_success_hist: null, halt_poll_fail_hist: [0, 1],
      halt_poll_fail_ns: 12, halt_poll_success_ns: null,
    });
    expect(sumHaltHistograms([{ halt_poll_fail_ns: 5 }, {}]).halt_poll_fail_ns).toBeNull();
    expect(sumHaltHistograms([{ halt_poll_success_ns: 5 }, { halt_poll_success_ns: 6 }]).halt_poll_success_ns).toBe(11);
  });

  it('leaves out polls that caught at 0 ns (the wake-up was pending; KVM counts such a halt nowhere with polling off), here and in the measured share', () => {
    const h = { halt_wait_hist: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4], halt_poll_success_hist: [10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6] };
    const d = wakeDelayDistribution(h);
    expect(d.caught).toBe(6);
    expect(d.halts).toBe(10);
    expect(d.pieces.some((p) => p.bucket === 0)).toBe(false);
    expect(caughtOf(h)).toBeCloseTo(0.6);
    expect(caughtOf({ halt_poll_success_hist: [3] })).toBeNull();
  });

  it('takes the host\'s module parameters, an absent shrink as the 0 of kernels before it was 2', () => {
    expect(haltPollParamsOf({ halt_poll_ns_grow: 3, halt_poll_ns_grow_start: 5000, halt_poll_ns_shrink: 4 })).toEqual({ grow: 3, growStart: 5000, shrink: 4 });
    expect(haltPollParamsOf({})).toEqual({ grow: 2, growStart: 10_000, shrink: 0 });
  });

  it('refuses a negative count (a counter reset read as a delta)', () => {
    expect(() => wakeDelayDistribution({ halt_wait_hist: [1, -2] })).toThrow('halt_wait_hist must hold counts >= 0');
  });
});

describe('predictions on synthetic histograms', () => {
  const short = wakeDelayDistribution({ halt_wait_hist: hist({ 16: 1000 }) }); // 32-64 µs
  const long = wakeDelayDistribution({ halt_wait_hist: hist({ 24: 1000 }) }); // 8.4-16.8 ms
  const bimodal = wakeDelayDistribution({ halt_wait_hist: hist({ 16: 700, 24: 300 }) });

  it('halts of 32-64 µs under max 200 µs: nearly all caught, and polling burns the time halted', () => {
    const p = predictHaltPolling(short, MAX, KVM, 5000);
    // Only the warm-up misses: 0 -> 10 -> 20 -> 40 -> 80 µs, which then catches every halt.
    expect(p.caughtShare).toBeGreaterThan(0.999);
    expect(p.meanWindowNs).toBeCloseTo(80_000, -2);
    // Every halt is polled through: CPU = the share of time halted, 5000/s x 32768 / ln 2 ns = 0.236.
    expect(p.pollCpuShare / (5000 * meanWakeDelayNs(short) / 1e9)).toBeCloseTo(1, 2);
  });

  it('halts of ~10 ms under max 200 µs: nothing caught, and the window goes to 0 where static polling burns 200 µs a halt', () => {
    const fresh = predictHaltPolling(long, MAX, KVM, 80);
    expect(fresh).toMatchObject({ caughtShare: 0, attemptedShare: 0, pollCpuShare: 0, meanWindowNs: 0 }); // never leaves 0
    // A vCPU polling 200 µs when the halts turn long: 200 -> 100 -> 50 -> 25 -> 12.5 µs -> 0 (6.25 < 10).
    const busy = predictHaltPolling(long, MAX, KVM, 80, { startWindowNs: MAX });
    expect(busy.caughtShare).toBe(0);
    expect(busy.pollCpuShare).toBeCloseTo((387_500 / 20_000) * 80 / 1e9, 15);
    const flat = predictStaticPolling(long, MAX, 80);
    expect(flat).toMatchObject({ caughtShare: 0, attemptedShare: 1, meanWindowNs: MAX });
    expect(flat.pollCpuShare).toBeCloseTo(80 * MAX / 1e9, 12); // 1.6 % of a CPU
  });

  // Independent halts make the window a Markov chain over {0, 10, 20, 40, 80} µs. A short halt
  // (p = 0.7) grows 0 -> 10 -> 20 -> 40 -> 80; at 40 µs it is caught with q = log2(40000 / 32768)
  // and stays, else grows. A long one (r = 0.3) halves the window (10 -> 0), or zeroes it with
  // shrink 0. Solving the balance equations: with shrink 2, pi ∝ [1, x, x², x³, (1 - q) x⁴],
  // x = p / r; with shrink 0, pi = [r, pr, p²r, p³r / (1 - pq), p(1 - q) pi40 / r].
  const p = 0.7;
  const r = 0.3;
  const q = Math.log2(40_000 / 32_768);
  const caughtOf = (pi40: number, pi80: number) => p * (q * pi40 + pi80);
  const x = p / r;
  const weights = [1, x, x ** 2, x ** 3, (1 - q) * x ** 4];
  const sum = weights.reduce((a, b) => a + b, 0);
  const chainShrink2 = caughtOf(weights[3]! / sum, weights[4]! / sum); // 0.407
  const pi40Shrink0 = (p ** 3 * r) / (1 - p * q);
  const chainShrink0 = caughtOf(pi40Shrink0, (p * (1 - q) * pi40Shrink0) / r); // 0.176

  it('70 % short / 30 % long: each long halt halves the window, so adaptive polling catches ~0.41, not the static 0.70', () => {
    expect(chainShrink2).toBeCloseTo(0.407, 3);
    expect(chainShrink0).toBeCloseTo(0.176, 3);
    const adaptive = predictHaltPolling(bimodal, MAX, KVM, 1000);
    const flat = predictStaticPolling(bimodal, MAX, 1000);
    expect(flat.caughtShare).toBeCloseTo(0.7, 1);
    expect(Math.abs(adaptive.caughtShare - chainShrink2)).toBeLessThan(0.015);
    expect(adaptive.caughtShare).toBeLessThan(flat.caughtShare - 0.25);
    // Older kernels (shrink 0) restart from 0 after every long halt: less still.
    const older = predictHaltPolling(bimodal, MAX, { ...KVM, shrink: 0 }, 1000);
    expect(Math.abs(older.caughtShare - chainShrink0)).toBeLessThan(0.015);
    // And adaptive costs less than half the static CPU: long halts burn a halved window, not 200 µs.
    expect(adaptive.pollCpuShare).toBeLessThan(flat.pollCpuShare / 2);
  });

  it('a max above the window the short halts need changes nothing: caught polls never grow it', () => {
    const curve = haltPollCurve(bimodal, [128_000, MAX, 1_000_000, 4_000_000], KVM, 1000);
    for (const point of curve.slice(1)) expect({ ...point, maxPollNs: 0 }).toEqual({ ...curve[0]!, maxPollNs: 0 });
  });

  it('no halts: every share 0, not NaN, and the advice says there is nothing to predict', () => {
    const empty = wakeDelayDistribution({ halt_wait_hist: hist({}), halt_poll_success_hist: null });
    expect(empty.halts).toBe(0);
    expect(predictHaltPolling(empty, MAX, KVM, 100)).toEqual({ maxPollNs: MAX, halts: 0, caughtShare: 0, attemptedShare: 0, pollCpuShare: 0, meanWindowNs: 0 });
    const curve = haltPollCurve(empty, haltPollCandidates(), KVM, 100);
    expect(recommendHaltPoll(curve, 'latency')).toEqual({ valueNs: null, point: null, goal: 'latency', why: 'No halts were recorded, so there is nothing to predict.' });
    expect(recommendHaltPoll([], 'cpu').valueNs).toBeNull();
  });

  it('is deterministic: the same inputs give the same outputs, and a curve point is the prediction itself', () => {
    expect(predictHaltPolling(bimodal, MAX, KVM, 1000)).toEqual(predictHaltPolling(bimodal, MAX, KVM, 1000));
    const curve = haltPollCurve(bimodal, haltPollCandidates(MAX), KVM, 1000);
    expect(curve).toEqual(haltPollCurve(bimodal, haltPollCandidates(MAX), KVM, 1000));
    expect(curve.find((c) => c.maxPollNs === MAX)).toEqual(predictHaltPolling(bimodal, MAX, KVM, 1000));
    const otherSeed = predictHaltPolling(bimodal, MAX, KVM, 1000, { seed: 1 });
    expect(otherSeed.caughtShare).not.toBe(curve.find((c) => c.maxPollNs === MAX)!.caughtShare);
    expect(otherSeed.caughtShare).toBeCloseTo(chainShrink2, 1);
  });
});

describe('candidates and the recommendation', () => {
  it('candidates: 0, then 1 µs doubling to 2.048 ms, with the current value in order', () => {
    expect(haltPollCandidates()).toEqual([0, 1000, 2000, 4000, 8000, 16_000, 32_000, 64_000, 128_000, 256_000, 512_000, 1_024_000, 2_048_000]);
    expect(haltPollCandidates(MAX)).toContain(MAX);
    expect(haltPollCandidates(MAX).indexOf(MAX)).toBe(9);
    expect(haltPollCandidates(64_000)).toHaveLength(13);
  });

  // Half the halts ~1.5 µs, 30 % 32-64 µs, 20 % ~10 ms; 2000 halts/s per vCPU.
  const mixed = wakeDelayDistribution({ halt_wait_hist: hist({ 11: 500, 16: 300, 24: 200 }) });
  const curve = haltPollCurve(mixed, haltPollCandidates(MAX), KVM, 2000);
  const at = (ns: number) => curve.find((c) => c.maxPollNs === ns)!;

  it('a max of 4 µs catches a short halt only after a short one: 0.5 x 0.5', () => {
    // A longer halt misses and halves the window to 2 µs, under grow start: 0; a short one regrows it.
    expect(at(4000).caughtShare).toBeCloseTo(0.25, 2);
  });

  it('latency: the smallest window within 2 points of the best', () => {
    const rec = recommendHaltPoll(curve, 'latency');
    const best = Math.max(...curve.map((c) => c.caughtShare));
    expect(at(64_000).caughtShare).toBeLessThan(best - 0.02); // 64 µs still loses 32-64 µs halts to shrinks
    expect(rec).toEqual({ valueNs: 128_000, point: at(128_000), goal: 'latency', why: 'Polling up to 128 µs would catch 61 % of wake-ups for 3.8 % of a CPU per vCPU, as many as any longer window to within 2 points.' });
  });

  it('cpu: the most caught within the budget, the cheaper of equals; 0 when nothing within it catches', () => {
    expect(recommendHaltPoll(curve, 'cpu').valueNs).toBe(128_000); // 3.8 % <= 5 %
    const tight = recommendHaltPoll(curve, 'cpu', 0.01);
    expect(at(8000).caughtShare).toBe(at(4000).caughtShare); // the same halts caught, polled longer
    expect(tight).toEqual({ valueNs: 4000, point: at(4000), goal: 'cpu', why: 'Polling up to 4 µs would catch 25 % of wake-ups for 0.27 % of a CPU per vCPU, the most within a budget of 1 % of a CPU.' });
    expect(recommendHaltPoll(curve, 'cpu', 0.001)).toEqual({
      valueNs: 0, point: at(0), goal: 'cpu', why: 'No window up to 2.05 ms catches a wake-up for at most 0.1 % of a CPU per vCPU, so polling is best left off.',
    });
  });

  it('wake-ups beyond every window: polling off, for either goal', () => {
    const long = haltPollCurve(wakeDelayDistribution({ halt_wait_hist: hist({ 24: 10 }) }), haltPollCandidates(), KVM, 80);
    expect(recommendHaltPoll(long, 'latency')).toMatchObject({ valueNs: 0, why: 'No window up to 2.05 ms catches a wake-up, so polling is best left off.' });
    expect(recommendHaltPoll(long, 'cpu').valueNs).toBe(0);
  });
});
