// The main thread's vCPU 0 slices (runtime/main-thread-vcpu.ts): 2 ms where the event loop turns
// fast, longer where a turn is slow, so the turns never take more than ~5% of vCPU 0's thread.
import { describe, expect, it } from 'vitest';
import { sliceAfterTurns } from '../../electron/vmm/runtime/main-thread-vcpu.ts';

describe('sliceAfterTurns', () => {
  it('is 2 ms before any turn is measured and where turns are fast', () => {
    expect(sliceAfterTurns(0)).toBe(2);
    expect(sliceAfterTurns(Number.NaN)).toBe(2);
    expect(sliceAfterTurns(0.03)).toBe(2); // a turn on a fast host: tens of µs
    expect(sliceAfterTurns(0.1)).toBe(2);
  });

  it('keeps the turns at 5% of the thread where they are slow', () => {
    expect(sliceAfterTurns(0.5)).toBeCloseTo(10);
    expect(sliceAfterTurns(1)).toBeCloseTo(20);
    const turn = 1.7;
    expect(turn / (turn + sliceAfterTurns(turn))).toBeLessThanOrEqual(0.05);
  });

  it('never exceeds 50 ms, so input and signals wait at most that long', () => {
    expect(sliceAfterTurns(3)).toBe(50);
    expect(sliceAfterTurns(1000)).toBe(50);
    expect(sliceAfterTurns(Number.POSITIVE_INFINITY)).toBe(50);
  });
});
