// The pure core of the sampler: turns two cumulative snapshots of one vCPU into a record of
// values, deltas and rates. No I/O here, so known deltas can be checked in unit tests.
import { INSTANT_COUNTERS, type SampleRecord } from './fields.ts';

/** Cumulative values at one instant; values[i] belongs to fields[i]; NaN means unknown. */
export interface Snapshot {
  /** ms (any origin; records carry it as `t`). */
  t: number;
  values: ArrayLike<number>;
}

interface FieldPlan {
  index: number;
  name: string;
  /** `${name}_delta` for time counters (ns), `${name}_per_s` for counts; null for a state (blocking). */
  derived: string | null;
  perSecond: boolean;
}

export class RateCalculator {
  readonly fields: readonly string[];
  private readonly plan: FieldPlan[];
  private readonly attempted: number;
  private readonly successful: number;
  private readonly pollSuccessNs: number;
  private readonly pollFailNs: number;
  private readonly hostCpuNs: number;
  private readonly hostRunNs: number;

  constructor(fields: readonly string[]) {
    this.fields = fields;
    // Key strings are built once here, not per record.
    this.plan = fields.map((name, index) => {
      const isTime = name.endsWith('_ns');
      const derived = INSTANT_COUNTERS.has(name) ? null : isTime ? `${name}_delta` : `${name}_per_s`;
      return { index, name, derived, perSecond: !isTime };
    });
    this.attempted = fields.indexOf('halt_attempted_poll');
    this.successful = fields.indexOf('halt_successful_poll');
    this.pollSuccessNs = fields.indexOf('halt_poll_success_ns');
    this.pollFailNs = fields.indexOf('halt_poll_fail_ns');
    this.hostCpuNs = fields.indexOf('host_cpu_ns');
    this.hostRunNs = fields.indexOf('host_run_ns');
  }

  derive(vcpu: number, prev: Snapshot, cur: Snapshot): SampleRecord {
    const dtMs = cur.t - prev.t;
    const record: SampleRecord = { t: round3(cur.t), vcpu, interval_ms: round3(dtMs) };
    for (const f of this.plan) {
      const v = cur.values[f.index]!;
      record[f.name] = Number.isNaN(v) ? null : v;
      if (f.derived === null) continue;
      const d = delta(prev, cur, f.index);
      record[f.derived] = d === null || dtMs <= 0 ? null : f.perSecond ? (d * 1000) / dtMs : d;
    }
    if (this.attempted >= 0 && this.successful >= 0) {
      const attempts = delta(prev, cur, this.attempted);
      const hits = delta(prev, cur, this.successful);
      record.poll_hit_rate = attempts === null || hits === null || attempts === 0 ? null : hits / attempts;
    }
    if (this.pollSuccessNs >= 0 && this.pollFailNs >= 0) {
      const s = delta(prev, cur, this.pollSuccessNs);
      const f = delta(prev, cur, this.pollFailNs);
      record.poll_cpu_fraction = s === null || f === null || dtMs <= 0 ? null : (s + f) / (dtMs * 1e6);
    }
    if (this.hostCpuNs >= 0 || this.hostRunNs >= 0) {
      // schedstat's run time is exact; utime+stime moves in 10 ms ticks (coarse at 100 ms).
      const c = (this.hostRunNs >= 0 ? delta(prev, cur, this.hostRunNs) : null)
        ?? (this.hostCpuNs >= 0 ? delta(prev, cur, this.hostCpuNs) : null);
      record.host_cpu_fraction = c === null || dtMs <= 0 ? null : c / (dtMs * 1e6);
    }
    return record;
  }
}

/** cur - prev, or null when either is unknown or the counter went backwards (a reset). */
function delta(prev: Snapshot, cur: Snapshot, i: number): number | null {
  const a = prev.values[i]!;
  const b = cur.values[i]!;
  if (Number.isNaN(a) || Number.isNaN(b) || b < a) return null;
  return b - a;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
