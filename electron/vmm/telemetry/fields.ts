// What one telemetry sample holds per vCPU: the cumulative counters (under their KVM names where
// KVM has them), in the fixed column order the ring stores them in, and the record shape that
// subscribers and the NDJSON file see.
import { COUNTER, COUNTER_NAMES } from '../shared/control.ts';
import type { DeviceRecord } from './devices.ts';

/** Per-vCPU KVM binary stats the sampler follows; a host kernel may lack some of them. */
export const KVM_VCPU_COUNTERS = [
  'halt_exits', 'halt_successful_poll', 'halt_attempted_poll', 'halt_poll_invalid', 'halt_wakeup',
  'halt_poll_success_ns', 'halt_poll_fail_ns', 'halt_wait_ns',
  'exits', 'io_exits', 'mmio_exits', 'irq_exits', 'signal_exits', 'hypercalls',
  'directed_yield_attempted', 'directed_yield_successful', 'preemption_reported',
  'blocking',
] as const;

/**
 * KVM's per-vCPU log2 histograms (bucket i: durations in [2^(i-1), 2^i) ns, KVM's fls64; the last
 * open-ended): how long a halted vCPU slept (halt_wait_hist: halts that blocked, from the end of
 * polling to the wake-up, the delay before the vCPU runs again included), and how long polls that
 * caught or missed a wake-up ran. A sample carries each as an array of the interval's counts.
 */
export const KVM_VCPU_HISTOGRAMS = ['halt_wait_hist', 'halt_poll_success_hist', 'halt_poll_fail_hist'] as const;

/**
 * KVM's time sums of the polls the histograms count (caught and missed): an interval's sum beside
 * its counts tells where in their buckets the polls lie (halt-poll-model.ts). halt_wait_ns is not
 * among them: one idle vCPU's long sleep outweighs every short one there.
 */
export const KVM_HISTOGRAM_SUMS = ['halt_poll_success_ns', 'halt_poll_fail_ns'] as const;

/**
 * One vCPU's histograms over one interval, beside its record: each bucket's count in the interval
 * (null: the first sample, or a reset); a histogram the host kernel lacks is absent. Live samples
 * only: the series keeps the counters alone, so a backfill has none.
 */
export interface VcpuHistograms {
  vcpu: number;
  /** Each histogram's counts, and each of KVM_HISTOGRAM_SUMS over the same interval (ns; null as above). */
  [histogram: string]: number | number[] | null;
}

/**
 * KVM stats that are a state, not a count (KVM_STATS_TYPE_INSTANT): a record carries their value
 * at the sample, with no rate. `blocking` is 1 while the vCPU is halted: halt_wait_ns only grows
 * when a halt ends, so this is how a vCPU inside a long halt shows as halted.
 */
export const INSTANT_COUNTERS: ReadonlySet<string> = new Set(['blocking']);

/** The VMM's own userspace exit counters (VmControl), renamed so they never collide with KVM's. */
const VMM_NAMES: Record<keyof typeof COUNTER, string> = {
  exits: 'vmm_exits',
  io: 'vmm_io_exits',
  mmio: 'vmm_mmio_exits',
  hlt: 'vmm_hlt_exits',
  intr: 'vmm_intr_exits',
  other: 'vmm_other_exits',
};

export const VMM_COUNTERS: readonly { name: string; index: number }[] =
  COUNTER_NAMES.map((key) => ({ name: VMM_NAMES[key], index: COUNTER[key] }));

/**
 * The vCPU thread as the host sees it (/proc/self/task/TID): utime+stime, context switches, and
 * schedstat's exact run time and run-queue wait (absent: NaN/null without CONFIG_SCHED_INFO).
 */
export const THREAD_COUNTERS = [
  'host_cpu_ns', 'voluntary_ctxt_switches', 'nonvoluntary_ctxt_switches', 'host_run_ns', 'host_runqueue_wait_ns',
] as const;

/**
 * One vCPU at one sample. Cumulative counters appear under their own names (halt_exits,
 * vmm_io_exits, host_cpu_ns…), counts per second with a `_per_s` suffix, and time counters
 * (`*_ns`) as the nanoseconds spent in the interval with a `_delta` suffix. Derived:
 * poll_hit_rate (Δhalt_successful_poll / Δhalt_attempted_poll), poll_cpu_fraction (host CPU spent
 * polling per wall second), host_cpu_fraction (the vCPU thread's CPU per wall second: from
 * host_run_ns when the kernel has schedstat, else from the tick-granular host_cpu_ns).
 * null: not measurable for this interval (no poll attempted, thread gone, counter reset).
 * A KVM counter the host kernel lacks is absent, not null.
 */
export interface SampleRecord {
  /** ms since the VM started. */
  t: number;
  vcpu: number;
  /** ms since the previous sample. */
  interval_ms: number;
  [field: string]: number | null;
}

export interface TelemetryMarker {
  /** ms since the VM started. */
  t: number;
  label: string;
}

export type { DeviceRecord };

/** `devices`: one record per virtio device at the same instants as the vCPUs' (devices.ts). */
export type TelemetryEvent =
  | { type: 'backfill'; records: SampleRecord[]; devices: DeviceRecord[]; markers: TelemetryMarker[] }
  | { type: 'sample'; t: number; records: SampleRecord[]; devices: DeviceRecord[]; histograms?: VcpuHistograms[] }
  | { type: 'marker'; marker: TelemetryMarker };
