// Samples a watched QEMU's vCPUs through QMP on a timer and delivers the same telemetry events as
// our own VM's Sampler (records from the one RateCalculator, each interval's histogram counts), so
// the NDJSON writer and, later, the charts take a watched VM as they take ours. One query at a
// time: the next is scheduled only once the last one answered, so a slow QEMU is never queued up.
import { KVM_HISTOGRAM_SUMS, type SampleRecord, type TelemetryEvent, type VcpuHistograms } from '../vmm/telemetry/fields.ts';
import type { TelemetrySource } from '../vmm/telemetry/ndjson.ts';
import { RateCalculator } from '../vmm/telemetry/rates.ts';
import type { QmpClient } from './qmp-client.ts';
import { planFromSchema, readVcpuStats, vcpuIndexByPath, type QemuStatsPlan, type VcpuStatsRead } from './qemu-stats.ts';

/** Watching must not load the watched VM's QEMU: no faster than 10 queries a second. */
export const MIN_WATCH_INTERVAL_MS = 100;
export const MAX_WATCH_INTERVAL_MS = 60_000;
export const DEFAULT_WATCH_INTERVAL_MS = 1000;

type Listener = (event: TelemetryEvent) => void;

export class QmpSampler implements TelemetrySource {
  readonly plan: QemuStatsPlan;
  readonly intervalMs: number;
  /** Resolves when sampling stopped: undefined after stop(), else the error that ended it (QEMU gone). */
  readonly ended: Promise<Error | undefined>;
  private readonly qmp: QmpClient;
  private readonly calc: RateCalculator;
  private readonly paths: Map<string, number>;
  private readonly listeners = new Set<Listener>();
  private readonly t0 = performance.now();
  private prev = new Map<number, { t: number; read: VcpuStatsRead }>();
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private finish!: (e: Error | undefined) => void;

  private constructor(qmp: QmpClient, plan: QemuStatsPlan, paths: Map<string, number>, intervalMs: number) {
    if (!(intervalMs >= MIN_WATCH_INTERVAL_MS)) throw new RangeError(`the watch interval must be at least ${MIN_WATCH_INTERVAL_MS} ms, got ${intervalMs}`);
    this.qmp = qmp;
    this.plan = plan;
    this.paths = paths;
    this.intervalMs = intervalMs;
    this.calc = new RateCalculator(plan.fields);
    this.ended = new Promise((resolve) => { this.finish = resolve; });
  }

  /** Reads the schema and a first sample (the baseline of the first interval), then samples on. */
  static async start(qmp: QmpClient, intervalMs: number): Promise<QmpSampler> {
    const plan = await planFromSchema(qmp);
    const sampler = new QmpSampler(qmp, plan, await vcpuIndexByPath(qmp), intervalMs);
    await sampler.take();
    sampler.schedule();
    return sampler;
  }

  /** The vCPUs seen at the last read. */
  get vcpus(): number[] {
    return [...this.prev.keys()].sort((a, b) => a - b);
  }

  /** Each interval's samples, as our Sampler delivers them (nothing stored: no backfill to give). */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    this.finish(undefined);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.take().then(() => this.schedule(), (e: Error) => {
        if (this.stopped) return;
        this.stopped = true;
        this.finish(e);
      });
    }, this.intervalMs);
  }

  private async take(): Promise<void> {
    const reads = await readVcpuStats(this.qmp, this.plan, this.paths);
    const t = performance.now() - this.t0;
    const records: SampleRecord[] = [];
    const histograms: VcpuHistograms[] = [];
    for (const read of reads) {
      const before = this.prev.get(read.vcpu);
      this.prev.set(read.vcpu, { t, read });
      if (!before) continue; // a vCPU's first read is only the baseline of its first interval
      const record = this.calc.derive(read.vcpu, { t: before.t, values: before.read.values }, { t, values: read.values });
      records.push(record);
      const h: VcpuHistograms = { vcpu: read.vcpu };
      for (const name of this.plan.histograms) {
        const cur = read.hists.get(name);
        if (cur) h[name] = intervalCounts(before.read.hists.get(name), cur);
      }
      // KVM's time sums beside the counts they time (halt-poll-model places the durations by
      // them): the record's interval deltas, which the RateCalculator has taken already.
      if (this.plan.histograms.length) for (const name of KVM_HISTOGRAM_SUMS) h[name] = record[`${name}_delta`] ?? null;
      histograms.push(h);
    }
    if (records.length === 0 || this.stopped) return;
    const event: TelemetryEvent = { type: 'sample', t: records[0]!.t, records, devices: [], histograms };
    for (const l of this.listeners) l(event);
  }
}

/** Each bucket's count in the interval; null without a previous read or after a reset. Pure. */
export function intervalCounts(prev: readonly number[] | undefined, cur: readonly number[]): number[] | null {
  if (!prev || prev.length !== cur.length) return null;
  const out = new Array<number>(cur.length);
  for (let i = 0; i < cur.length; i++) {
    const d = cur[i]! - prev[i]!;
    if (d < 0) return null;
    out[i] = d;
  }
  return out;
}
