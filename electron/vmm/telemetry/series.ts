// The bounded time series of one VM: a ring of rows in one pre-sized Float64Array. A row is one
// sampling instant: its time, then each vCPU's cumulative values in field order. Only cumulative
// values are stored; records with rates are derived from two consecutive rows when read, so the
// memory is fixed at (capacity + 1) × (1 + cpus × fields) × 8 bytes.
import type { SampleRecord } from './fields.ts';
import type { RateCalculator, Snapshot } from './rates.ts';

export class SampleSeries {
  readonly cpus: number;
  readonly fieldCount: number;
  /** How many records per vCPU the series keeps (one more row is kept as their baseline). */
  readonly capacity: number;
  readonly data: Float64Array;
  private readonly rows: number;
  private readonly rowWidth: number;
  /** Next row to write. */
  private head = 0;
  /** Rows stored (<= rows). */
  private stored = 0;

  constructor(cpus: number, fieldCount: number, capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`series capacity must be a positive integer, got ${capacity}`);
    this.cpus = cpus;
    this.fieldCount = fieldCount;
    this.capacity = capacity;
    this.rows = capacity + 1;
    this.rowWidth = 1 + cpus * fieldCount;
    this.data = new Float64Array(this.rows * this.rowWidth);
  }

  /** Records per vCPU currently available (rows minus the baseline). */
  get length(): number {
    return Math.max(0, this.stored - 1);
  }

  /**
   * Starts a new row at time t (overwriting the oldest when full) and returns the index in
   * `data` of vCPU 0's first value; vCPU v's values start at that + v × fieldCount.
   */
  push(t: number): number {
    const start = this.head * this.rowWidth;
    this.data[start] = t;
    this.data.fill(NaN, start + 1, start + this.rowWidth);
    this.head = (this.head + 1) % this.rows;
    if (this.stored < this.rows) this.stored++;
    return start + 1;
  }

  /** Physical row of the k-th stored row, oldest first. */
  private row(k: number): number {
    return (this.head - this.stored + k + this.rows) % this.rows;
  }

  private snapshot(k: number, vcpu: number): Snapshot {
    const start = this.row(k) * this.rowWidth;
    const from = start + 1 + vcpu * this.fieldCount;
    return { t: this.data[start]!, values: this.data.subarray(from, from + this.fieldCount) };
  }

  /** The newest row's records (one per vCPU), or none before the second row. */
  latest(calc: RateCalculator): SampleRecord[] {
    return this.stored < 2 ? [] : this.recordsOfRow(calc, this.stored - 1);
  }

  /** Every stored record, oldest first; within a row, vCPU 0 first. */
  records(calc: RateCalculator): SampleRecord[] {
    const out: SampleRecord[] = [];
    for (let k = 1; k < this.stored; k++) out.push(...this.recordsOfRow(calc, k));
    return out;
  }

  /** Time of the oldest record, or NaN when empty. */
  get oldestT(): number {
    return this.stored < 2 ? NaN : this.data[this.row(1) * this.rowWidth]!;
  }

  private recordsOfRow(calc: RateCalculator, k: number): SampleRecord[] {
    const out: SampleRecord[] = [];
    for (let v = 0; v < this.cpus; v++) out.push(calc.derive(v, this.snapshot(k - 1, v), this.snapshot(k, v)));
    return out;
  }
}
