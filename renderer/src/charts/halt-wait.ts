// Shares of time per sample interval that can be believed (pure functions of the store's
// columns, unit-tested without a browser).

/** A column of values; NaN = no value. */
type Column = Float64Array;

/**
 * A time counter's delta as the share of each sample interval it covers. KVM adds a halt's
 * whole duration to halt_wait_ns when the halt ends (a 3 s sleep lands in one 100 ms sample as
 * 3000 %); the scheduler adds a run-queue wait when the thread gets a CPU, and a vCPU thread's
 * run time is folded in at ticks and switches, not at the instant the sampler reads it. The time
 * was spent before the delta was seen: spread `deltaNs` back from `row` over the preceding
 * intervals of this vCPU, filling each up to 100 % (less what is already attributed to it), and
 * stop at a gap (a restart, a row without this vCPU). Past rows change; no value ever exceeds 1.
 * A delta longer than the history kept is cut at the history's start.
 */
export function attributeShare(fraction: Column, intervalNs: Column, row: number, deltaNs: number, interval: number): number {
  intervalNs[row] = interval;
  if (Number.isNaN(fraction[row]!)) fraction[row] = 0;
  let left = deltaNs;
  let lowest = row;
  for (let i = row; i >= 0 && left > 0; i--) {
    const len = intervalNs[i]!;
    if (!(len > 0)) break;
    const used = Number.isNaN(fraction[i]!) ? 0 : fraction[i]!;
    const take = Math.min(left, len * (1 - used));
    if (take > 0) {
      fraction[i] = used + take / len;
      left -= take;
      lowest = i;
    }
  }
  return lowest;
}

/** Halt wait: the first share attributed this way (the name the tests and docs know). */
export const attributeHaltWait = attributeShare;

/** One vCPU's halt-wait columns: attributed share, interval lengths, halted-now flags, and what is drawn. */
export interface HaltWaitCols { attributed: Column; intervalNs: Column; halted: Column; shown: Column }

/**
 * Halt wait for sample `row`: its wait attributed (attributeShare), and the share drawn. A vCPU
 * inside a long halt has no halt_wait_ns yet (KVM adds it when the halt ends), so it read 0 %
 * while halted; KVM's `blocking` (1 while halted, null where the kernel lacks it) marks such an
 * interval halted, drawn at 100 % until the halt's end brings its real wait, which then replaces
 * the marks of the intervals it covered.
 */
export function haltWaitRow(c: HaltWaitCols, row: number, waitNs: number, interval: number, blocking: number | null): void {
  const lowest = attributeShare(c.attributed, c.intervalNs, row, waitNs, interval);
  // The halts that ended are attributed now: their intervals keep their own share, not the mark.
  if (waitNs > 0) for (let i = lowest; i < row; i++) c.halted[i] = 0;
  c.halted[row] = blocking !== null && blocking > 0 ? 1 : 0;
  for (let i = lowest; i <= row; i++) c.shown[i] = c.halted[i] === 1 ? 1 : c.attributed[i]!;
}
