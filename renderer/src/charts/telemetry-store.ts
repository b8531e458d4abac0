// Per-VM telemetry history, kept outside React: column arrays sized for ten minutes at 10 Hz,
// appended in place and trimmed in chunks, with one requestAnimationFrame per frame telling the
// charts that are on screen to redraw. React never re-renders per sample.
import type { GuestMetric, TelemetryDeviceSample, TelemetryHistograms, TelemetryMarker, TelemetrySample } from '../../../electron/service/api.ts';
import { HistogramBins } from '../../../electron/vmm/telemetry/hist-bins.ts';
import { attributeShare, haltWaitRow } from './halt-wait.ts';
import { LATENCY_EVENTS, isChartedLatency } from './labels.ts';
import { DEVICE_TOTALS, HISTORY_POINTS, Rows, appendDeviceSamples, type Column } from './device-rows.ts';
import { GuestIdleRows } from './guest-idle.ts';

export { HISTORY_POINTS, Rows, type Column };



/** Per-vCPU series kept for the charts: column key `${name}#${vcpu}`. */
export const PER_VCPU = [
  'halt_exits_per_s', 'poll_hit_rate', 'poll_cpu_fraction', 'halt_wait_fraction', 'host_cpu_fraction', 'runqueue_wait_fraction',
] as const;
/** Summed over vCPUs: column key `${name}#sum`. */
export const SUMMED = [
  'halt_exits_per_s', 'exits_per_s', 'io_exits_per_s', 'mmio_exits_per_s', 'irq_exits_per_s', 'signal_exits_per_s',
  'hypercalls_per_s', 'halt_wakeup_per_s',
] as const;

/** The exit kinds Exits by kind names; the rest of `exits` is its "other". */
export const NAMED_EXITS = [
  'halt_exits_per_s#sum', 'io_exits_per_s#sum', 'mmio_exits_per_s#sum', 'irq_exits_per_s#sum', 'signal_exits_per_s#sum', 'hypercalls_per_s#sum',
] as const;

export interface Marker {
  x: number;
  label: string;
}

type Listener = () => void;

export class VmTelemetry {
  readonly samples = new Rows();
  readonly latency = new Rows();
  /** Device samples: their own rows (the same instants as the vCPUs', arriving in their own list). */
  readonly devices = new Rows();
  /** The guest's own idle and steal per vCPU, from its agent's gidle lines, and its cpuidle facts (guest-idle.ts). */
  readonly guestIdle = new GuestIdleRows();
  /** KVM's halt histograms per vCPU per second (times in epoch seconds, like the rows' x). */
  readonly histograms = new HistogramBins(1, HISTORY_POINTS / 10);
  /** Devices seen so far (rng, net, blk0...), in order of appearance. */
  deviceNames: string[] = [];
  /** Each device's newest totals (requests, bytes, drops, errors). */
  deviceTotals: Record<string, Partial<Record<(typeof DEVICE_TOTALS)[number], number>>> = {};
  markers: Marker[] = [];
  /** vCPUs seen in the samples so far (0 before the first). */
  vcpus = 0;
  /** vCPUs in the VM's configuration: the charts have a series (and a legend entry) for each before any sample arrives. */
  configuredVcpus = 0;
  /** Latency series seen so far ("ipi p50_ns"), in order of appearance. */
  latencyKeys: string[] = [];
  /** The agent's `@u1 probe on=…` answers, in order: true on, false off. */
  probeSwitches: boolean[] = [];
  /** Measurements behind each latency point, per event ("ipi" -> 50), from its rounds / count field. */
  latencyCounts: Record<string, number> = {};
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

  /** The VM's configured vCPU count (kept across reset(): it is the configuration's, not the history's). */
  setConfiguredVcpus(n: number): void {
    if (n === this.configuredVcpus) return;
    this.configuredVcpus = n;
    this.shape++;
    this.changed();
  }

  /** How many per-vCPU series the charts draw: the configuration's count, or more when the samples have more. */
  vcpuSeries(): number {
    return Math.max(1, this.vcpus, this.configuredVcpus);
  }

  /** Replaces everything with a subscription's backfill. */
  reset(): void {
    this.samples.clear();
    this.latency.clear();
    this.guestIdle.clear();
    this.histograms.clear();
    this.devices.clear();
    this.deviceNames = [];
    this.deviceTotals = {};
    this.markers = [];
    this.latencyKeys = [];
    this.probeSwitches = [];
    this.latencyCounts = {};
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
      const interval = num(s.interval_ms);
      // The polls behind each hit rate: a mean over rows is total hits over total attempts, not a
      // mean of ratios (a row of 1 attempt would weigh as much as a row of 1000).
      const attempts = num(s.halt_attempted_poll_per_s);
      const hits = num(s.halt_successful_poll_per_s);
      if (attempts !== null && hits !== null && interval) {
        set(rows, `poll_attempts#${v}`, row, (attempts * interval) / 1000);
        set(rows, `poll_hits#${v}`, row, (hits * interval) / 1000);
      }
      if (interval) {
        // Each time counter is a share of the interval it covers (halt-wait.ts): never above 100 %.
        const ns = interval * 1e6;
        const share = (key: string, deltaNs: number | null) => {
          if (deltaNs !== null) attributeShare(rows.col(`${key}#${v}`), rows.col(`interval_ns#${v}`), row, deltaNs, ns);
        };
        const pollCpu = num(s.poll_cpu_fraction);
        share('poll_cpu_fraction', pollCpu === null ? null : pollCpu * ns);
        const waitNs = num(s.halt_wait_ns_delta);
        if (waitNs !== null) {
          haltWaitRow({
            attributed: rows.col(`halt_wait_attributed#${v}`), intervalNs: rows.col(`interval_ns#${v}`),
            halted: rows.col(`halt_blocking#${v}`), shown: rows.col(`halt_wait_fraction#${v}`),
          }, row, waitNs, ns, num(s.blocking));
        }
        // The vCPU thread as the host scheduler sees it (thread-stats.ts): CPU it got, and time it
        // was runnable but waited for a host CPU (schedstat; absent without CONFIG_SCHED_INFO).
        const cpu = num(s.host_cpu_fraction);
        share('host_cpu_fraction', cpu === null ? null : cpu * ns);
        share('runqueue_wait_fraction', num(s.host_runqueue_wait_ns_delta));
      }
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

  /** Appends device samples (the Devices panel's rows; device-rows.ts). */
  addDevices(samples: readonly TelemetryDeviceSample[]): void {
    const columnsBefore = this.devices.cols.size;
    if (!appendDeviceSamples(this.devices, this, samples)) return;
    if (this.devices.cols.size !== columnsBefore) this.shape++;
    this.changed();
  }

  private finishRow(row: number): void {
    // Exits of no named kind (MSR writes, the TSC deadline timer, EPT faults...): the parts sum to the whole.
    const c = this.samples.cols;
    const all = val(c.get('exits_per_s#sum')?.[row]);
    if (all !== null) {
      let named = 0;
      for (const k of NAMED_EXITS) named += val(c.get(k)?.[row]) ?? 0;
      this.samples.col('other_exits_per_s#sum')[row] = Math.max(0, all - named);
    }
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
    this.markers.push({ x: this.eventX(m.t), label: String(m.label) });
    this.changed();
  }

  addMetric(metric: GuestMetric): void {
    const fields = metric.fields ?? {};
    // The agent's live probe switched on or off (the service does it while the VM is watched).
    if (metric.event === 'probe' && typeof fields.on === 'number') this.probeSwitches.push(fields.on === 1);
    const guestColumns = this.guestIdle.rows.cols.size;
    if (this.guestIdle.addMetric(metric.event, fields, this.eventX(metric.t))) {
      if (this.guestIdle.rows.cols.size !== guestColumns) this.shape++;
      this.changed();
    }
    if (!LATENCY_EVENTS.has(metric.event)) return; // a device's figures are not a wake-up latency
    let row = -1;
    // How many measurements a point summarizes: a p99 of 50 is the maximum, and says so.
    const count = [fields.rounds, fields.count, fields.samples, fields.n].find((v) => typeof v === 'number' && v > 0);
    if (typeof count === 'number' && this.latencyCounts[metric.event] !== count) {
      this.latencyCounts[metric.event] = count;
      this.shape++;
    }
    for (const [k, v] of Object.entries(fields)) {
      if (typeof v !== 'number' || !isChartedLatency(metric.event, k)) continue;
      if (row < 0) {
        const x = this.eventX(metric.t);
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

  /** A marker's or guest metric's time as x: epoch ms (the service's), else ms since the start. */
  private eventX(t: unknown): number {
    const ms = typeof t === 'number' ? t : 0;
    return ms > 1e11 ? ms / 1000 : this.base !== undefined ? (this.base + ms) / 1000 : Date.now() / 1000;
  }

  /** Appends KVM's halt histograms (the histogram panel sums them over its window). */
  addHistograms(hists: readonly TelemetryHistograms[]): void {
    for (const h of hists) if (typeof h.t === 'number' && typeof h.vcpu === 'number' && h.counts) this.histograms.add(h.t / 1000, h.vcpu, h.counts);
    this.changed();
  }

  /**
   * The newest time of any of this VM's rows: every chart's window ends there, so a chart whose
   * own data stopped earlier (the latency of a run 10 minutes ago) shows that it has none now.
   */
  newestX(): number {
    let hi = -Infinity;
    for (const r of [this.samples, this.latency, this.devices, this.guestIdle.rows]) if (r.length) hi = Math.max(hi, r.x[r.length - 1]!);
    return hi;
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
