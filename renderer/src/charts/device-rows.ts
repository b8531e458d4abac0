// The telemetry store's rows (a time column and value columns in fixed Float64Arrays) and how
// device samples land in them: pure, so node tests read them without a browser.
import type { TelemetryDeviceSample } from '../../../electron/service/api.ts';

/** Ten minutes at 10 Hz. */
export const HISTORY_POINTS = 6000;
/** Trim only when this many rows past capacity have accumulated (one splice a minute at 10 Hz). */
const TRIM_SLACK = 600;

/** A column of values; NaN = no value (a gap on the charts). */
export type Column = Float64Array;

/**
 * Per-device series kept for the charts: column key `${name}@${device}` (rng, net, blk0...).
 * Requests and bytes are per direction where a device has two (net rx/tx, blk read/write).
 */
export const PER_DEVICE = [
  'requests_per_s', 'bytes_per_s', 'notifications_per_s', 'mmio_notifications_per_s', 'interrupts_per_s',
  'rx_bytes_per_s', 'tx_bytes_per_s', 'read_bytes_per_s', 'write_bytes_per_s',
] as const;
/** Totals a device reports (the Devices panel's line under the charts). */
export const DEVICE_TOTALS = ['requests', 'bytes', 'drops', 'errors'] as const;

/**
 * Rows of one time base: an x column (seconds since the epoch) and value columns, all
 * Float64Arrays of a fixed capacity (no per-value objects for the garbage collector to trace).
 * When full, the oldest TRIM_SLACK rows go in one copyWithin; `length` rows are valid.
 */
export class Rows {
  private readonly keep: number;
  private cap: number;
  x: Float64Array;
  readonly cols = new Map<string, Column>();
  length = 0;

  constructor(keep: number = HISTORY_POINTS) {
    this.keep = keep;
    this.cap = keep + TRIM_SLACK;
    this.x = new Float64Array(this.cap);
  }

  /** The column for a key, created (all NaN) on first use. */
  col(key: string): Column {
    let c = this.cols.get(key);
    if (!c) {
      c = new Float64Array(this.cap).fill(NaN);
      this.cols.set(key, c);
    }
    return c;
  }

  /** Appends a row at x with every column NaN; returns its index (a full buffer drops its oldest rows first). */
  push(x: number): number {
    if (this.length === this.cap) this.trim();
    const i = this.length++;
    this.x[i] = x;
    for (const c of this.cols.values()) c[i] = NaN;
    return i;
  }

  /** Rows dropped by trims so far (lets readers that count rows keep their place). */
  dropped = 0;

  private trim(): void {
    const drop = this.cap - this.keep;
    this.x.copyWithin(0, drop);
    for (const c of this.cols.values()) c.copyWithin(0, drop);
    this.length -= drop;
    this.dropped += drop;
  }

  clear(): void {
    this.length = 0;
    this.dropped = 0;
    this.cols.clear();
  }

  /** Index of the first row with x >= v (binary search; rows are in time order). */
  lowerBound(v: number): number {
    let lo = 0;
    let hi = this.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.x[mid]! < v) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** What a store keeps of its devices besides their rows. */
export interface DeviceState {
  /** Devices seen so far (rng, net, blk0...), in order of appearance. */
  deviceNames: string[];
  /** Each device's newest totals. */
  deviceTotals: Record<string, Partial<Record<(typeof DEVICE_TOTALS)[number], number>>>;
}

/**
 * Appends device samples (epoch times: the service's) to `rows`, one row per instant; a device
 * missing at an instant is a gap, and so are seconds without samples (the VM was stopped).
 * Returns whether any row was added.
 */
export function appendDeviceSamples(rows: Rows, state: DeviceState, samples: readonly TelemetryDeviceSample[]): boolean {
  let row = -1;
  let rowT = NaN;
  for (const s of samples) {
    if (typeof s.t !== 'number' || typeof s.device !== 'string') continue;
    if (s.t !== rowT) {
      rowT = s.t;
      const x = s.t / 1000;
      const last = rows.length ? rows.x[rows.length - 1]! : -Infinity;
      if (rows.length && x - last > 2) rows.push(last + 5e-4);
      row = rows.push(x > last ? x : last + 1e-3);
    }
    const d = s.device;
    if (!state.deviceNames.includes(d)) state.deviceNames.push(d);
    for (const f of PER_DEVICE) {
      const v = s[f];
      if (typeof v === 'number' && Number.isFinite(v)) rows.col(`${f}@${d}`)[row] = v;
    }
    const totals = (state.deviceTotals[d] ??= {});
    for (const f of DEVICE_TOTALS) {
      const v = s[f];
      if (typeof v === 'number' && Number.isFinite(v)) totals[f] = v;
    }
  }
  return row >= 0;
}
