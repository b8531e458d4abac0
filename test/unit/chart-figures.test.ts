// What the live charts read out (renderer/src/charts): halt wait attributed over the intervals a
// halt covered (never above 100 %), header and legend figures over the visible window, latency
// labels that say how many measurements a percentile is of, and numbers without a milli prefix
// that reads as millions.
import { describe, expect, it } from 'vitest';
import { attributeHaltWait } from '../../renderer/src/charts/halt-wait.ts';
import { chartFormat, windowStats } from '../../renderer/src/charts/window-stats.ts';
import { latencyLabel } from '../../renderer/src/charts/labels.ts';
import { si } from '../../renderer/src/lib/format.ts';

const MS = 1e6;

describe('halt wait attribution', () => {
  it('spreads a long halt back over the intervals it covered, each at most 100 %', () => {
    const frac = new Float64Array(10).fill(NaN);
    const len = new Float64Array(10).fill(NaN);
    // Nine 100 ms samples without a halt ending, then one that reports a 750 ms halt.
    for (let i = 0; i < 9; i++) attributeHaltWait(frac, len, i, 0, 100 * MS);
    attributeHaltWait(frac, len, 9, 750 * MS, 100 * MS);
    expect([...frac].map((v) => +v.toFixed(2))).toEqual([0, 0, 0.5, 1, 1, 1, 1, 1, 1, 1]);
    // The sum is the wait: nothing lost, nothing invented.
    expect(frac.reduce((s, v) => s + v * 100 * MS, 0)).toBeCloseTo(750 * MS, 0);
  });

  it('fills around time already attributed, and stops at a gap (a restart)', () => {
    const frac = new Float64Array(6).fill(NaN);
    const len = new Float64Array(6).fill(NaN);
    attributeHaltWait(frac, len, 0, 0, 100 * MS);
    // Row 1 is a line break: no interval.
    attributeHaltWait(frac, len, 2, 60 * MS, 100 * MS);
    attributeHaltWait(frac, len, 3, 0, 100 * MS);
    attributeHaltWait(frac, len, 4, 250 * MS, 100 * MS);
    expect([...frac.subarray(0, 5)].map((v) => +v.toFixed(2))).toEqual([0, NaN, 1, 1, 1].map((v) => (Number.isNaN(v) ? NaN : v)));
    // 250 ms: 100 in row 4, 100 in row 3, 40 of row 2's remaining 40: and 10 ms are cut at the gap.
    expect(frac[2]).toBeCloseTo(1, 9);
  });
});

describe('window figures', () => {
  const a = Float64Array.from([0, 0, 10, 0, 0, 20]);
  const b = Float64Array.from([5, NaN, 5, 5, 5, 5]);

  it('max and mean per series over the window, not the newest value', () => {
    const w = windowStats([a, b], 0, 6, 'sum');
    expect(w.series).toEqual([{ max: 20, mean: 5 }, { max: 5, mean: 5 }]);
    // The header's max is the highest value drawn (per-row sums are not drawn); its mean is the
    // series' means added up (all vCPUs together).
    expect(w.total).toEqual({ max: 20, mean: 10 });
    expect(windowStats([a, b], 2, 4, 'sum').total).toEqual({ max: 10, mean: 10 });
  });

  it('for fractions and latencies: the highest value of any series, the mean of all values', () => {
    expect(windowStats([a, b], 0, 6, 'max').total).toEqual({ max: 20, mean: 55 / 11 });
    expect(windowStats([a, b], 0, 6, 'first').total).toEqual({ max: 20, mean: 5 });
    expect(windowStats([undefined], 0, 6, 'sum').total).toEqual({ max: null, mean: null });
  });

  it('numbers read plainly: no bare milli prefix', () => {
    expect(si(0.012)).toBe('0.012');
    expect(si(0.5)).toBe('0.50');
    expect(si(1234)).toBe('1.23 k');
    expect(si(0.012, 's')).toBe('12.0 ms');
    expect(chartFormat('rate')(0.2)).toBe('0.20/s');
    expect(chartFormat('rate')(0.2)).not.toMatch(/m/);
    expect(chartFormat('fraction')(0.25)).toBe('25.0 %');
    expect(chartFormat('us')(20_700)).toBe('20.7 ms');
    expect(chartFormat('us')(131)).toBe('131 µs');
  });
});

describe('latency labels', () => {
  it('say how many measurements a percentile is of, and when a p99 is the maximum', () => {
    expect(latencyLabel('ipi p99_ns', 50)).toBe('ipi p99 of 50 (= max)');
    expect(latencyLabel('ipi p99_ns', 1000)).toBe('ipi p99 of 1000');
    expect(latencyLabel('ipi p50_ns', 50)).toBe('ipi p50 of 50');
    expect(latencyLabel('ipi max_ns', 50)).toBe('ipi max');
    expect(latencyLabel('ipi p99_ns', undefined)).toBe('ipi p99');
  });
});
