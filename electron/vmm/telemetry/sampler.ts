// Samples one VM on a timer: each vCPU's KVM binary stats (one pread per fd), the VMM's own exit
// counters and the vCPU threads' host CPU time and context switches, and each virtio device's
// counters (devices.ts), into bounded series, and delivers records to subscribers. Rates are computed by the pure RateCalculator; this file only
// gathers numbers. Without KVM binary stats it keeps going with the VMM's own counters.
import { BINARY_STATS_UNAVAILABLE, StatsReader, type StatField, type StatsSample } from '../../../native/kvm/stats.ts';
import { threadCpuTimeNs } from '../../../native/kvm/libc.ts';
import type { VirtualMachine, VmState } from '../vm.ts';
import {
  KVM_VCPU_COUNTERS, KVM_VCPU_HISTOGRAMS, THREAD_COUNTERS, VMM_COUNTERS,
  KVM_HISTOGRAM_SUMS, type SampleRecord, type TelemetryEvent, type TelemetryMarker, type VcpuHistograms,
} from './fields.ts';
import { DeviceSeries, type DeviceRecord } from './devices.ts';
import { HistogramBins } from './hist-bins.ts';
import type { VirtioCounters } from '../devices/virtio/virtio-pci.ts';
import { RateCalculator } from './rates.ts';
import { SampleSeries } from './series.ts';
import { THREAD_FIELDS, ThreadStatsReader } from './thread-stats.ts';

export const DEFAULT_INTERVAL_MS = 100;
/** Ten minutes at the default 10 Hz. */
export const MIN_CAPACITY = 6000;
const MAX_CAPACITY = 60_000;
const MAX_MARKERS = 1000;

/** What the sampler needs from a VM (VirtualMachine has all of it). */
export interface SamplerTarget {
  /** performance.now() when the VM started running. */
  readonly startedAt: number;
  readonly control: { readonly cpus: number; counter(vcpu: number, which: number): number };
  /** KVM stats fds, taken before any vCPU ran; -1 where the host has no binary stats. */
  statsFds(): { vm: number; vcpus: readonly number[] };
  /** Host thread id of each vCPU worker (0 when not running). */
  vcpuThreadIds(): number[];
  /** Each virtio device's counters by board name (rng, net, blk0...); absent: a VM without devices. */
  virtioCounters?(): Readonly<Partial<Record<string, VirtioCounters>>>;
}

export interface SamplerOptions {
  /** ms between samples (default 100). */
  intervalMs?: number;
  /** Records kept per vCPU (default: ten minutes at the interval, at least 6000). */
  capacity?: number;
  /** Clock in ms on performance.now()'s origin (tests inject one). */
  now?: () => number;
}

export type KvmStatsStatus = { available: true } | { available: false; reason: string };

export type TelemetryListener = (event: TelemetryEvent) => void;

interface VcpuStats {
  reader: StatsReader;
  /** Reused every tick: its values are copied into the series at once. */
  sample?: StatsSample;
  fields: (StatField | undefined)[];
  /** KVM's histograms this host has, with their cumulative counts at the last sample. */
  hists: { name: string; field: StatField; prev: Float64Array | null; interval: number[] | null }[];
  /** KVM's time sums of the polls (KVM_HISTOGRAM_SUMS), with the histograms; empty without them. */
  sums: { name: string; field: StatField; prev: number | null; interval: number | null }[];
}

/**
 * Use Sampler.forVm for a VirtualMachine: it stops sampling before the VM closes its stats fds.
 * A bare Sampler must be stopped by its owner before then.
 */
export class Sampler {
  readonly intervalMs: number;
  readonly cpus: number;
  /** Column names of the series, in order (only KVM stats this host has). */
  readonly fields: readonly string[];
  readonly series: SampleSeries;
  /** The virtio devices' counters at the same instants (one block per device the VM has). */
  readonly deviceSeries: DeviceSeries;
  /** KVM's halt histograms per vCPU per second for as long as the series (ms since the VM started). */
  readonly histBins: HistogramBins;
  readonly kvmStats: KvmStatsStatus;
  private readonly target: SamplerTarget;
  private readonly now: () => number;
  private readonly calc: RateCalculator;
  private readonly vcpuStats: (VcpuStats | null)[] = [];
  private readonly vmReader: StatsReader | null = null;
  private readonly kvmFieldNames: readonly string[];
  private readonly threads: (ThreadStatsReader | null)[] = [];
  private readonly listeners = new Set<TelemetryListener>();
  private readonly markerLog: TelemetryMarker[] = [];
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private costNs = 0;
  private ticks = 0;

  constructor(target: SamplerTarget, options: SamplerOptions = {}) {
    this.target = target;
    this.cpus = target.control.cpus;
    this.intervalMs = options.intervalMs ?? DEFAULT_INTERVAL_MS;
    if (!(this.intervalMs >= 1)) throw new RangeError(`sampling interval must be at least 1 ms, got ${options.intervalMs}`);
    this.now = options.now ?? (() => performance.now());

    const fds = target.statsFds();
    const fallback = "; showing the VMM's own exit counters only";
    let status: KvmStatsStatus = { available: true };
    const readers: (StatsReader | null)[] = [];
    for (let v = 0; v < this.cpus && status.available; v++) {
      const fd = fds.vcpus[v] ?? -1;
      if (fds.vcpus.length === 0) {
        status = { available: false, reason: `the VM is not running (its KVM stats fds are closed)${fallback}` };
      } else if (fd < 0) {
        status = { available: false, reason: `${BINARY_STATS_UNAVAILABLE} (no KVM_CAP_BINARY_STATS_FD)${fallback}` };
      } else {
        try {
          readers.push(StatsReader.open(fd));
        } catch (e) {
          status = { available: false, reason: `cannot read the KVM binary stats of vCPU ${v}: ${(e as Error).message}${fallback}` };
        }
      }
    }
    // All vCPUs or none: a half-populated chart would read as a guest effect.
    if (!status.available) readers.length = 0;
    this.kvmStats = status;
    if (status.available && fds.vm >= 0) {
      try { this.vmReader = StatsReader.open(fds.vm); } catch { this.vmReader = null; }
    }

    const first = readers[0];
    this.kvmFieldNames = first ? KVM_VCPU_COUNTERS.filter((n) => first.has(n)) : [];
    this.fields = [...this.kvmFieldNames, ...VMM_COUNTERS.map((c) => c.name), ...THREAD_COUNTERS];
    for (let v = 0; v < this.cpus; v++) {
      const reader = readers[v];
      const hists = reader ? KVM_VCPU_HISTOGRAMS.filter((n) => reader.has(n) && reader.field(n).descriptor.type === 'log-hist')
        .map((name) => ({ name, field: reader.field(name), prev: null, interval: null })) : [];
      const sums = reader && hists.length && KVM_HISTOGRAM_SUMS.every((n) => reader.has(n))
        ? KVM_HISTOGRAM_SUMS.map((name) => ({ name, field: reader.field(name), prev: null, interval: null })) : [];
      this.vcpuStats.push(reader ? { reader, fields: this.kvmFieldNames.map((n) => reader.has(n) ? reader.field(n) : undefined), hists, sums } : null);
    }
    this.calc = new RateCalculator(this.fields);
    const capacity = options.capacity ?? Math.min(MAX_CAPACITY, Math.max(MIN_CAPACITY, Math.ceil(600_000 / this.intervalMs)));
    this.series = new SampleSeries(this.cpus, this.fields.length, capacity);
    this.deviceSeries = new DeviceSeries(capacity);
    this.histBins = new HistogramBins(1000, capacity * this.intervalMs);
  }

  /**
   * A sampler that follows a VirtualMachine: samples from now on, marks pause/resume, and takes
   * its last sample when the VM starts stopping — before the VM closes the stats fds, whose
   * numbers the process may then reuse for other files.
   */
  static forVm(vm: VirtualMachine, options: SamplerOptions = {}): Sampler {
    const sampler = new Sampler(vm, options);
    const onState = (s: VmState) => {
      if (s === 'paused') sampler.markEvent('paused');
      else if (s === 'running') sampler.markEvent('resumed');
      else if (s === 'stopping' || s === 'stopped') {
        vm.off('state', onState);
        if (s === 'stopping') sampler.sampleNow();
        sampler.stop();
      }
    };
    vm.on('state', onState);
    sampler.start();
    return sampler;
  }

  /** Takes a baseline sample now, then one every interval. */
  start(): void {
    if (this.timer || this.stopped) return;
    this.sampleNow();
    this.timer = setInterval(() => this.sampleNow(false), this.intervalMs);
    this.timer.unref(); // the VM keeps the process alive, not its telemetry
  }

  /** Stops sampling and releases the /proc files (the stats fds belong to the VM). */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const t of this.threads) t?.close();
    this.threads.length = 0;
    this.listeners.clear();
  }

  get running(): boolean {
    return !this.stopped;
  }

  /**
   * Takes one sample of every vCPU and delivers it; returns the new records (none for the
   * baseline). The timer passes `build` false: then records are only built for listeners.
   */
  sampleNow(build = true): SampleRecord[] {
    if (this.stopped) return [];
    const cpuStart = threadCpuTimeNs();
    const t = this.now() - this.target.startedAt;
    const series = this.series;
    const data = series.data;
    const width = this.fields.length;
    let at = series.push(t);
    const tids = this.target.vcpuThreadIds();
    const control = this.target.control;
    for (let v = 0; v < this.cpus; v++, at += width) {
      let c = at;
      const stats = this.vcpuStats[v];
      if (stats) {
        const s = stats.sample = stats.reader.sample(stats.sample);
        for (const f of stats.fields) data[c++] = f ? s.u64(f.offset) : NaN;
        if (stats.hists.length) {
          for (const h of stats.hists) takeHistogram(h, s);
          for (const x of stats.sums) takeSum(x, s);
          this.histBins.add(t, v, Object.fromEntries([...stats.hists, ...stats.sums].map((h) => [h.name, h.interval])));
        }
      }
      for (const counter of VMM_COUNTERS) data[c++] = control.counter(v, counter.index);
      this.readThread(v, tids[v] ?? 0, data, c);
    }
    this.deviceSeries.push(t, this.target.virtioCounters?.() ?? {});
    // Records (objects) are only built when someone listens; the series keeps the numbers anyway.
    const listening = build || this.listeners.size > 0;
    const records = listening ? series.latest(this.calc) : [];
    // The histograms' counts of this interval, beside the live records (the series keeps counters only).
    const histograms: VcpuHistograms[] = [];
    if (listening) {
      for (let v = 0; v < this.cpus; v++) {
        const stats = this.vcpuStats[v];
        if (!stats?.hists.length) continue;
        const h: VcpuHistograms = { vcpu: v };
        for (const x of stats.hists) h[x.name] = x.interval;
        for (const x of stats.sums) h[x.name] = x.interval;
        histograms.push(h);
      }
    }
    const devices = listening ? this.deviceSeries.latest() : [];
    this.costNs += threadCpuTimeNs() - cpuStart;
    this.ticks++;
    if (records.length || devices.length) this.emit({ type: 'sample', t, records, devices, ...(histograms.length && records.length ? { histograms } : {}) });
    return records;
  }

  private readThread(v: number, tid: number, out: Float64Array, at: number): void {
    let reader = this.threads[v] ?? null;
    if (reader && reader.tid !== tid) { reader.close(); reader = null; }
    if (!reader && tid > 0) reader = ThreadStatsReader.open(tid);
    this.threads[v] = reader;
    if (!reader || !reader.read(out, at)) out.fill(NaN, at, at + THREAD_FIELDS);
  }

  /** Records a marker for the charts (a knob change, a restart …) at the current time. */
  markEvent(label: string): TelemetryMarker {
    const marker = { t: round3(this.now() - this.target.startedAt), label };
    this.markerLog.push(marker);
    if (this.markerLog.length > MAX_MARKERS) this.markerLog.shift();
    this.emit({ type: 'marker', marker });
    return marker;
  }

  get markers(): readonly TelemetryMarker[] {
    return this.markerLog;
  }

  /** Every stored record, oldest first (vCPU 0 first within one sample). */
  records(): SampleRecord[] {
    return this.series.records(this.calc);
  }

  /** Every stored device record, oldest first (devices in order of appearance within one sample). */
  deviceRecords(): DeviceRecord[] {
    return this.deviceSeries.records();
  }

  /**
   * Delivers what is stored (one 'backfill' event, synchronously), then each new sample and
   * marker as it happens. Returns the unsubscribe function.
   */
  subscribe(listener: TelemetryListener): () => void {
    const markers = this.markerLog.filter((m) => !(m.t < this.series.oldestT));
    listener({ type: 'backfill', records: this.records(), devices: this.deviceRecords(), markers });
    if (!this.stopped) this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  private emit(event: TelemetryEvent): void {
    for (const l of this.listeners) {
      try {
        l(event);
      } catch (e) {
        // One broken chart must not stop the sampling of the others.
        this.listeners.delete(l);
        process.emitWarning(`telemetry listener removed after it threw: ${(e as Error).message}`);
      }
    }
  }

  /** The VM-wide KVM stats (MMU and TLB counters) right now, or null without binary stats. */
  vmStats(): Record<string, number> | null {
    return this.vmReader && !this.stopped ? this.vmReader.sample().scalars() : null;
  }

  /** Whether this host's KVM gives the halt histograms (histBins then follows them). */
  get hasHistograms(): boolean {
    return this.vcpuStats.some((s) => (s?.hists.length ?? 0) > 0);
  }

  /** The newest raw KVM stats sample of a vCPU (histograms live here), or null. */
  vcpuStatsSample(vcpu: number): StatsSample | null {
    return this.vcpuStats[vcpu]?.sample ?? null;
  }

  /** The sampler's own cost so far: main-thread CPU spent taking samples. */
  cost(): { ticks: number; cpuNs: number; cpuNsPerTick: number } {
    return { ticks: this.ticks, cpuNs: this.costNs, cpuNsPerTick: this.ticks ? this.costNs / this.ticks : 0 };
  }
}

/** A time sum's interval since the last sample (null: none yet, or a reset). */
function takeSum(x: VcpuStats['sums'][number], s: StatsSample): void {
  const cur = s.u64(x.field.offset);
  x.interval = x.prev === null || cur < x.prev ? null : cur - x.prev;
  x.prev = cur;
}

/** A histogram's cumulative counts now, and the interval's since the last sample (null: none yet, or a reset). */
function takeHistogram(h: VcpuStats['hists'][number], s: StatsSample): void {
  const n = h.field.descriptor.size;
  const cur = new Float64Array(n);
  for (let i = 0; i < n; i++) cur[i] = s.u64(h.field.offset + i * 8);
  let interval: number[] | null = null;
  if (h.prev) {
    interval = new Array<number>(n);
    for (let i = 0; i < n; i++) {
      const d = cur[i]! - h.prev[i]!;
      if (d < 0) { interval = null; break; }
      interval[i] = d;
    }
  }
  h.prev = cur;
  h.interval = interval;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
