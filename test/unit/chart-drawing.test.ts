// What the live charts draw (renderer/src/charts, issue 32): a bursty series' line reads its
// mean, with its peaks as a band; shares of time never pass 100 %; a ratio's mean is total over
// total; marker labels stay inside the plot, by their lines, apart; one unit per latency axis;
// console pastes go in chunks the connection carries.
import { describe, expect, it } from 'vitest';
import { binRows, binSeconds } from '../../renderer/src/charts/bins.ts';
import { attributeShare, haltWaitRow } from '../../renderer/src/charts/halt-wait.ts';
import { windowStats } from '../../renderer/src/charts/window-stats.ts';
import { placeMarkerLabels } from '../../renderer/src/charts/marker-labels.ts';
import { TIME_INCRS, usAxisLabels } from '../../renderer/src/charts/axis.ts';
import { CHUNK_CHARS, MAX_PASTE_CHARS, chunkInput, consoleInputSender } from '../../renderer/src/console/console-input.ts';

/** 60 s of 100 ms samples from t0: `value(i)` at row i. */
function rows(value: (i: number) => number, n = 600, t0 = 1000) {
  const x = Float64Array.from({ length: n }, (_, i) => t0 + i * 0.1);
  const c = Float64Array.from({ length: n }, (_, i) => value(i));
  return { x, c };
}

describe('binning what is drawn', () => {
  it('draws a burst a second at its mean, with the burst as the band', () => {
    // 500/s for one 100 ms sample a second, 0 otherwise: a mean of 50/s.
    const { x, c } = rows((i) => (i % 10 === 3 ? 500 : 0));
    const b = binRows(x, [c], 0, 600, binSeconds(60, 400));
    expect(b.binSec).toBe(1);
    const line = b.mean[0]!.filter((v): v is number => v !== null);
    expect(Math.max(...line)).toBeCloseTo(50, 6);
    expect(Math.min(...line)).toBeCloseTo(50, 6);
    expect(Math.max(...b.max[0]!.map((v) => v ?? 0))).toBe(500);
    expect(Math.min(...b.min[0]!.map((v) => v ?? 0))).toBe(0);
  });

  it('bins at least a second and a few pixels: 5 s at 10 minutes in 500 px', () => {
    expect(binSeconds(60, 600)).toBe(1);
    expect(binSeconds(300, 320)).toBe(5);
    expect(binSeconds(600, 500)).toBe(5);
  });

  it('a ratio series reads total over total in each bin', () => {
    const x = Float64Array.from([0, 0.1, 0.2, 0.3]);
    const ratio = Float64Array.from([1, 0, 0, 0]);
    const num = Float64Array.from([1, 0, 0, 0]);
    const den = Float64Array.from([1, 100, 100, 100]);
    const b = binRows(x, [ratio], 0, 4, 1, [{ num, den }]);
    expect(b.mean[0]).toEqual([1 / 301]);
    expect(windowStats([ratio], 0, 4, 'max', [{ num, den }]).total.mean).toBeCloseTo(1 / 301, 9);
    expect(windowStats([ratio], 0, 4, 'max', [{ num, den }]).series[0]!.mean).toBeCloseTo(1 / 301, 9);
  });

  it('keeps a restart a gap, and its points in time order', () => {
    const x = Float64Array.from([10.0, 10.1, 10.15, 10.2, 10.3]);
    const c = Float64Array.from([1, 1, NaN, 3, 3]);
    const b = binRows(x, [c], 0, 5, 1);
    expect(b.mean[0]).toEqual([1, null, 3]);
    expect([...b.x].sort((p, q) => p - q)).toEqual(b.x);
  });
});

describe('shares of time', () => {
  it('host CPU read late (154 % of one interval) is spread back: never above 100 %', () => {
    const MS = 1e6;
    const frac = new Float64Array(4).fill(NaN);
    const len = new Float64Array(4).fill(NaN);
    attributeShare(frac, len, 0, 60 * MS, 100 * MS);
    attributeShare(frac, len, 1, 20 * MS, 100 * MS);
    attributeShare(frac, len, 2, 154 * MS, 100 * MS);
    expect(Math.max(...frac.subarray(0, 3))).toBeLessThanOrEqual(1);
    expect([...frac.subarray(0, 3)].map((v) => +v.toFixed(2))).toEqual([0.6, 0.74, 1]);
  });
});

describe('marker labels', () => {
  const measure = (s: string) => s.length * 6;

  it('stay inside the plot, touch their line and never overlap', () => {
    const ms = [
      { x: 62, label: 'started' },
      { x: 64, label: 'halt-poll-ns=1000000' },
      { x: 70, label: 'pin=0+0' },
      { x: 395, label: 'halt-poll-ns=0' },
    ];
    const placed = placeMarkerLabels(ms, measure, 60, 400);
    expect(placed).toHaveLength(4);
    for (const l of placed) {
      expect(l.tx).toBeGreaterThanOrEqual(60);
      expect(l.tx + l.width).toBeLessThanOrEqual(400);
      // Its near edge is by its line: right of it, or ending left of it.
      expect(Math.min(Math.abs(l.tx - l.x), Math.abs(l.tx + l.width - l.x))).toBeLessThanOrEqual(3);
    }
    for (const a of placed) for (const b of placed) {
      if (a === b || a.line !== b.line) continue;
      expect(a.tx + a.width <= b.tx || b.tx + b.width <= a.tx).toBe(true);
    }
  });

  it('shortens a label with an ellipsis, or leaves it out, rather than drawing it far away', () => {
    const ms = Array.from({ length: 6 }, (_, i) => ({ x: 100 + i, label: `knob-${i}=a-long-value` }));
    const placed = placeMarkerLabels(ms, measure, 60, 200);
    for (const l of placed) expect(Math.min(Math.abs(l.tx - l.x), Math.abs(l.tx + l.width - l.x))).toBeLessThanOrEqual(3);
    expect(placed.some((l) => l.text.endsWith('…'))).toBe(true);
  });
});

describe('axes', () => {
  it('a latency axis has one unit', () => {
    expect(usAxisLabels([0, 5000, 10000])).toEqual(['0 ms', '5 ms', '10 ms']);
    expect(usAxisLabels([0, 250, 500])).toEqual(['0 µs', '250 µs', '500 µs']);
  });

  it('time steps between 1 and 5 minutes (a narrow 5-minute chart gets several labels)', () => {
    expect(TIME_INCRS).toContain(120);
    expect(TIME_INCRS).toContain(180);
  });
});

describe('console input', () => {
  it('a 1 MiB paste goes in chunks, in order, one call at a time', async () => {
    const paste = 'x'.repeat(MAX_PASTE_CHARS);
    expect(chunkInput(paste).every((c) => c.length <= CHUNK_CHARS)).toBe(true);
    const got: string[] = [];
    let inFlight = 0;
    let most = 0;
    const problems: unknown[] = [];
    const send = consoleInputSender(async (_id, data) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 0));
      got.push(data);
      inFlight--;
    }, (_id, p) => problems.push(p));
    send('vm', paste);
    send('vm', 'after');
    await new Promise((r) => setTimeout(r, 200));
    expect(got.join('')).toBe(`${paste}after`);
    expect(most).toBe(1);
    expect(problems).toEqual([]);
  });

  it('refuses more than the console takes at once, with a message', () => {
    const problems: unknown[] = [];
    let calls = 0;
    consoleInputSender(async () => { calls++; }, (_id, p) => problems.push(p))('vm', 'y'.repeat(MAX_PASTE_CHARS + 1));
    expect(calls).toBe(0);
    expect(String(problems[0])).toMatch(/more than the console takes at once \(1 MiB\)/);
  });
});

describe('the first bin after a start', () => {
  it('joins the next one when it holds less than half a bin', () => {
    // Rows from 10.75 s: a 0.25 s partial bin with a burst, then a whole second.
    const x = Float64Array.from([10.8, 10.9, 11.0, 11.1, 11.2, 11.3, 11.4, 11.5, 11.6, 11.7, 11.8, 11.9]);
    const c = Float64Array.from(x, (_, i) => (i === 1 || i === 11 ? 500 : 0));
    const b = binRows(x, [c], 0, x.length, 1);
    expect(b.mean[0]).toEqual([1000 / 12]);
  });
});

describe('a vCPU inside a long halt', () => {
  it('is drawn halted while KVM says it blocks, and by its real wait once the halt ends', () => {
    const MS = 1e6;
    const col = () => new Float64Array(8).fill(NaN);
    const c = { attributed: col(), intervalNs: col(), halted: col(), shown: col() };
    // Five samples inside one halt: no halt_wait_ns yet, `blocking` 1.
    for (let i = 0; i < 5; i++) haltWaitRow(c, i, 0, 100 * MS, 1);
    expect([...c.shown.subarray(0, 5)]).toEqual([1, 1, 1, 1, 1]);
    // The halt began 80 ms into row 0's interval and ends in row 5's: 520 ms of wait.
    haltWaitRow(c, 5, 520 * MS, 100 * MS, 0);
    expect([...c.shown.subarray(0, 6)].map((v) => +v.toFixed(2))).toEqual([0.2, 1, 1, 1, 1, 1]);
    // Without the stat (an older kernel): as before, 0 % until the halt ends.
    const d = { attributed: col(), intervalNs: col(), halted: col(), shown: col() };
    haltWaitRow(d, 0, 0, 100 * MS, null);
    expect(d.shown[0]).toBe(0);
  });
});
