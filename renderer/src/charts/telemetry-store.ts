// Per-VM telemetry history, kept outside React: column arrays sized for ten minutes at 10 Hz,
// appended in place and trimmed in chunks, with one requestAnimationFrame per frame telling the
// charts that are on screen to redraw. React never re-renders per sample.
import type { GuestMetric, TelemetryMarker, TelemetrySample } from '../../../electron/service/api.ts';

/** Ten minutes at 10 Hz. */
export const HISTORY_POINTS = 6000;
/** Trim only when this many rows past capacity have accumulated (one splice a minute at 10 Hz). */
const TRIM_SLACK = 600;

/** A column of values; NaN = no value (a gap on the charts). */
export type Column = Float64Array;

/** Per-vCPU series kept for the charts: column key `${name}#${vcpu}`. */
export const PER_VCPU = [
  'halt_exits_per_s', 'poll_hit_rate', 'poll_cpu_fraction', 'halt_wait_fraction', 'host_cpu_fraction', 'runqueue_wait_fraction',
] as const;
/** Summed over vCPUs: column key `${name}#sum`. */
export const SUMMED = [
  'halt_exits_per_s', 'exits_per_s', 'io_exits_per_s', 'mmio_exits_per_s', 'irq_exits_per_s', 'signal_exits_per_s',
  'hypercalls_per_s', 'halt_wakeup_per_s',
] as const;

/**
 * A latency field a guest reports: percentiles and means (`p50_ns`, `handoff_p99_ns`, `mean_ns`,
 * `max_us`) and per-operation times (`per_op_ns`, `per_switch_ns`); not totals or elapsed times.
 */
const LATENCY_FIELD = /(^|_)(p\d{1,3}|avg|mean|median|min|max|lat|latency|per_[a-z]+)(_[a-z0-9]+)?_(ns|us)$/;
const NOT_LATENCY = /^(total|elapsed)_/;

export interface Marker {
  x: number;
  label: string;
}

/**
 * Rows of one time base: an x column (seconds since the epoch) and value columns, all
 * Float64Arrays of a fixed capacity (no per-value objects for the garbage collector to trace).
 * When full, the oldest TRIM_SLACK rows go in one copyWithin; `length` rows are valid.
 */
export class Rows {
  private cap: number;
  x: Float64Array;
  readonly cols = new Map<string, Column>();
  length = 0;

  constructor(private readonly keep: number = HISTORY_POINTS) {
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

type Listener = () => void;

export class VmTelemetry {
  readonly samples = new Rows();
  readonly latency = new Rows();
  markers: Marker[] = [];
  vcpus = 0;
  /** Latency series seen so far ("ipi p50_ns"), in order of appearance. */
  latencyKeys: string[] = [];
  /** Bumps when the set of series changes (charts then rebuild instead of only redrawing). */
  shape = 0;
  /** Last values, for the status line and the test hook. */
  latest: Record<string, number | null> = {};
  nonZeroHaltPoints = 0;
  maxHaltExitsPerS = 0;

  private base: number | undefined;
  private startedAt: number | undefined;
  private lastT = -Infinity;
  private lastX = -Infinity;
  private readonly listeners = new Set<Listener>();

  constructor(readonly vmId: string) {}

  /** The VM's start time (ms since the epoch): sample times are ms since then. */
  setStartedAt(startedAt: number | undefined): void {
    if (!startedAt || startedAt === this.startedAt) return;
    const restarted = this.startedAt !== undefined && this.samples.length > 0;
    this.startedAt = startedAt;
    this.base = startedAt;
    if (restarted) {
      this.lastT = -Infinity;
      this.breakLines();
    }
  }

  private toX(t: number): number {
    let x: number;
    if (t > 1e11) {
      x = t / 1000; // already an epoch time
    } else {
      if (this.base === undefined || t < this.lastT - 1) {
        // No start time known yet, or the clock went back (a restart before its status event).
        if (this.base !== undefined && this.samples.length) this.breakLines();
        this.base = Date.now() - t;
      }
      this.lastT = t;
      x = (this.base + t) / 1000;
    }
    if (x <= this.lastX) x = this.lastX + 1e-3;
    this.lastX = x;
    return x;
  }

  private breakLines(): void {
    if (this.samples.length) this.samples.push(this.lastX + 5e-4);
  }

  /** Replaces everything with a subscription's backfill. */
  reset(): void {
    this.samples.clear();
    this.latency.clear();
    this.markers = [];
    this.latencyKeys = [];
    this.vcpus = 0;
    this.latest = {};
    this.nonZeroHaltPoints = 0;
    this.maxHaltExitsPerS = 0;
    this.lastT = -Infinity;
    this.lastX = -Infinity;
    this.shape++;
    this.changed();
  }

  addSamples(samples: readonly TelemetrySample[], markers?: readonly TelemetryMarker[]): void {
    const rows = this.samples;
    let row = -1;
    let rowT = NaN;
    const columnsBefore = rows.cols.size;
    const droppedBefore = rows.dropped;
    let shapeChanged = false;
    for (const s of samples) {
      if (typeof s.t !== 'number' || typeof s.vcpu !== 'number') continue;
      if (s.t !== rowT) {
        if (row >= 0) this.finishRow(row);
        rowT = s.t;
        row = rows.push(this.toX(s.t));
      }
      const v = s.vcpu;
      if (v + 1 > this.vcpus) {
        this.vcpus = v + 1;
        shapeChanged = true;
      }
      const halt = num(s.halt_exits_per_s) ?? num(s.vmm_hlt_exits_per_s);
      set(rows, `halt_exits_per_s#${v}`, row, halt);
      set(rows, `poll_hit_rate#${v}`, row, num(s.poll_hit_rate));
      set(rows, `poll_cpu_fraction#${v}`, row, num(s.poll_cpu_fraction));
      const waitNs = num(s.halt_wait_ns_delta);
      const interval = num(s.interval_ms);
      set(rows, `halt_wait_fraction#${v}`, row, waitNs !== null && interval ? waitNs / (interval * 1e6) : null);
      // The vCPU thread as the host scheduler sees it (thread-stats.ts): CPU it got, and time it
      // was runnable but waited for a host CPU (schedstat; absent without CONFIG_SCHED_INFO).
      set(rows, `host_cpu_fraction#${v}`, row, num(s.host_cpu_fraction));
      const queuedNs = num(s.host_runqueue_wait_ns_delta);
      set(rows, `runqueue_wait_fraction#${v}`, row, queuedNs !== null && interval ? queuedNs / (interval * 1e6) : null);
      add(rows, 'halt_exits_per_s#sum', row, halt);
      add(rows, 'exits_per_s#sum', row, num(s.exits_per_s) ?? num(s.vmm_exits_per_s));
      add(rows, 'io_exits_per_s#sum', row, num(s.io_exits_per_s) ?? num(s.vmm_io_exits_per_s));
      add(rows, 'mmio_exits_per_s#sum', row, num(s.mmio_exits_per_s) ?? num(s.vmm_mmio_exits_per_s));
      add(rows, 'irq_exits_per_s#sum', row, num(s.irq_exits_per_s));
      add(rows, 'signal_exits_per_s#sum', row, num(s.signal_exits_per_s));
      add(rows, 'hypercalls_per_s#sum', row, num(s.hypercalls_per_s));
      add(rows, 'halt_wakeup_per_s#sum', row, num(s.halt_wakeup_per_s));
    }
    if (row >= 0) this.finishRow(row);
    if (markers) for (const m of markers) this.addMarker(m);
    if (rows.dropped !== droppedBefore) this.dropOldMarkers();
    if (shapeChanged || rows.cols.size !== columnsBefore) this.shape++;
    this.changed();
  }

  private finishRow(row: number): void {
    const halt = val(this.samples.cols.get('halt_exits_per_s#sum')?.[row]);
    this.latest = {
      halt_exits_per_s: halt,
      exits_per_s: val(this.samples.cols.get('exits_per_s#sum')?.[row]),
    };
    if (halt !== null && halt > 0) {
      this.nonZeroHaltPoints++;
      if (halt > this.maxHaltExitsPerS) this.maxHaltExitsPerS = halt;
    }
  }

  addMarker(m: TelemetryMarker): void {
    if (typeof m.t !== 'number') return;
    const x = m.t > 1e11 ? m.t / 1000 : this.base !== undefined ? (this.base + m.t) / 1000 : Date.now() / 1000;
    this.markers.push({ x, label: String(m.label) });
    this.changed();
  }

  addMetric(metric: GuestMetric): void {
    const fields = metric.fields ?? {};
    let row = -1;
    for (const [k, v] of Object.entries(fields)) {
      if (typeof v !== 'number' || !LATENCY_FIELD.test(k) || NOT_LATENCY.test(k)) continue;
      if (row < 0) {
        const t = typeof metric.t === 'number' ? metric.t : 0;
        const x = t > 1e11 ? t / 1000 : this.base !== undefined ? (this.base + t) / 1000 : Date.now() / 1000;
        const last = this.latency.length ? this.latency.x[this.latency.length - 1]! : undefined;
        row = this.latency.push(last !== undefined && x <= last ? last + 1e-3 : x);
      }
      const key = `${metric.event} ${k}`;
      if (!this.latencyKeys.includes(key)) {
        this.latencyKeys.push(key);
        this.shape++;
      }
      // Plot in microseconds.
      this.latency.col(key)[row] = k.endsWith('_ns') ? v / 1000 : v;
    }
    if (row >= 0) this.changed();
  }

  private dropOldMarkers(): void {
    const first = this.samples.length ? this.samples.x[0]! : 0;
    this.markers = this.markers.filter((m) => m.x >= first);
  }

  /** Charts and sparklines: called at most once per animation frame after new data. */
  listen(l: Listener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  private changed(): void {
    scheduleFlush(this);
  }

  /** @internal */
  flush(): void {
    for (const l of this.listeners) l();
  }
}

/** A stored value as number | null (NaN and missing are null). */
export function val(v: number | undefined): number | null {
  return v === undefined || Number.isNaN(v) ? null : v;
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function set(rows: Rows, key: string, row: number, v: number | null): void {
  if (v === null) return; // rows start as NaN; a field that never arrives gets no column
  rows.col(key)[row] = v;
}

function add(rows: Rows, key: string, row: number, v: number | null): void {
  if (v === null) return;
  const c = rows.col(key);
  const cur = c[row]!;
  c[row] = Number.isNaN(cur) ? v : cur + v;
}

// ---- one flush per animation frame for all VMs with new data ----
const dirty = new Set<VmTelemetry>();
let frame = 0;

function scheduleFlush(t: VmTelemetry): void {
  dirty.add(t);
  if (frame) return;
  const run = () => {
    frame = 0;
    const list = [...dirty];
    dirty.clear();
    for (const d of list) d.flush();
  };
  // Background tabs get no animation frames; a timer keeps memory bounded there.
  frame = typeof document !== 'undefined' && document.visibilityState === 'hidden'
    ? (setTimeout(run, 250) as unknown as number)
    : requestAnimationFrame(run);
}

const registry = new Map<string, VmTelemetry>();

export function telemetryFor(vmId: string): VmTelemetry {
  let t = registry.get(vmId);
  if (!t) {
    t = new VmTelemetry(vmId);
    registry.set(vmId, t);
  }
  return t;
}

export function dropTelemetry(vmId: string): void {
  registry.delete(vmId);
}

export function hasTelemetry(vmId: string): boolean {
  return registry.has(vmId);
}
