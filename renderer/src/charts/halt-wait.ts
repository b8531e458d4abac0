// Halt wait per sample interval, as a share of time that can be believed (a pure function of
// the store's columns, unit-tested without a browser).

/** A column of values; NaN = no value. */
type Column = Float64Array;

/**
 * Halt wait as the share of each sample interval the vCPU spent halted. KVM adds a halt's whole
 * duration to halt_wait_ns when the halt ends, so a 3 s sleep lands in one 100 ms sample as
 * 3000 %. The halt covered the time before its end: spread `waitNs` back from `row` over the
 * preceding intervals of this vCPU, filling each up to 100 % (less what is already attributed
 * to it), and stop at a gap (a restart, a row without this vCPU). Past rows change; no value
 * ever exceeds 1. A wait longer than the history kept is cut at the history's start.
 */
export function attributeHaltWait(fraction: Column, intervalNs: Column, row: number, waitNs: number, interval: number): void {
  intervalNs[row] = interval;
  if (Number.isNaN(fraction[row]!)) fraction[row] = 0;
  let left = waitNs;
  for (let i = row; i >= 0 && left > 0; i--) {
    const len = intervalNs[i]!;
    if (!(len > 0)) break;
    const used = Number.isNaN(fraction[i]!) ? 0 : fraction[i]!;
    const take = Math.min(left, len * (1 - used));
    if (take > 0) {
      fraction[i] = used + take / len;
      left -= take;
    }
  }
}

