// Experiment types, shared with the service API (electron/service/api.ts re-exports them).
import type { Sizing } from './pacing.ts';
import type { Comparison } from './stats.ts';
import type { GuestKind, VmConfig } from '../vmm/config/vm-config.ts';
import type { UserBenchmark } from './user-bench.ts';
import type { HostConditions } from './conditions-format.ts';
import type { HistCounts } from '../vmm/telemetry/hist-bins.ts';

export type { Comparison, UserBenchmark };
export interface ExperimentSpec {
  /** probe or linux; custom only on a library VM with the user's own benchmark. */
  guest: GuestKind;
  workload: string;
  workloadArgs?: string;
  configs: { name: string; config: string }[];
  runs: number;
  vsQemu?: boolean;
  bare?: boolean;
  /** Seconds every phase of a run may take, instead of the deadlines derived from this host's speed (pacing.ts). */
  deadlineS?: number;
  /**
   * A library VM: each config is its configuration with the named knobs changed, its writable
   * disks attached snapshot=on. Resolved by the surface (the CLI by name; the API by VM id).
   */
  vm?: { name: string; image?: string; config: VmConfig };
  /** The user's own benchmark (a host command and the metric read from it) instead of a workload's figure. */
  bench?: UserBenchmark;
  /**
   * Host contention: this many CPU-bound processes on the host CPUs the vCPUs may run on, during
   * every run of every configuration and VMM (contention.ts).
   */
  contention?: number;
}

export interface ExperimentResultRow {
  config: string;
  runner: string;
  unit: string;
  median: number;
  min: number;
  max: number;
  ratioToFirst: number | null;
  ratioToReference: number | null;
  haltExitsPerS: number | null;
  pollHitRate: number | null;
  runs: number[];
  /** A second figure's median where the workload has one (pipe: µs/op beside total ms). */
  secondary?: { unit: string; median: number };
  /** Medians per run of the KVM counters that show the mechanism (over the measured command for Linux workloads). */
  haltExits?: number | null;
  hypercalls?: number | null;
  /** Runs of this config and runner that gave no value (each named in ExperimentResult.failures). */
  failedRuns?: number;
  /** How this row's runs differ from the config it is labelled with (QEMU lacks a knob), in one line. */
  caveat?: string;
}

export interface RunRecord {
  config: string;
  runner: 'unhalt' | 'qemu' | 'bare';
  run: number;
  value: number | null;
  /** Everything the guest reported for the workload. */
  fields: Record<string, number>;
  haltExits?: number;
  haltExitsPerS?: number;
  /** KVM's `hypercalls` counter: pv-unhalt kicks (KVM_HC_KICK_CPU) and other hypercalls. */
  hypercalls?: number;
  pollHitRate?: number | null;
  hostCpuNs?: number;
  /** Host CPU time the vCPUs spent polling before halting (KVM halt_poll_success_ns + halt_poll_fail_ns). */
  pollNs?: number;
  /** Time the vCPUs spent halted, waiting for a wake-up (KVM halt_wait_ns). */
  haltWaitNs?: number;
  /**
   * KVM's halt histograms over the run, all vCPUs summed (halt_wait_hist, halt_poll_success_hist,
   * halt_poll_fail_hist; hist-bins.ts): absent where the host's KVM has none.
   */
  haltHists?: HistCounts;
  /** The time haltHists covers (ms): from the second the measured part began to the last sample. */
  haltHistsMs?: number;
  /** Time the vCPU threads were runnable but waited for a host CPU (schedstat), all vCPUs summed. */
  runqueueWaitNs?: number;
  /** CPU time the host contention's processes took during the run (spec.contention). */
  contentionCpuNs?: number;
  wallMs: number;
  error?: string;
}

export interface ExperimentProgress {
  done: number;
  total: number;
  current?: string;
}

/** One failed run, in one line. */
export interface RunFailure {
  config: string;
  runner: RunRecord['runner'];
  run: number;
  error: string;
}

export interface ExperimentResult {
  spec: ExperimentSpec;
  /** ok: every run gave a value; partial: some did; failed: none did (rows is then empty). */
  status: 'ok' | 'partial' | 'failed';
  /** The workload's unit, also when no row has a value. */
  unit: string;
  rows: ExperimentResultRow[];
  /** Every row against the first of its VMM: ratio, confidence interval, p, verdict (stats.ts). */
  comparisons?: Comparison[];
  raw: RunRecord[];
  failures: RunFailure[];
  /** Linux workloads: the arguments the measured commands used (the size calibrated or given). */
  workloadArgsUsed?: string;
  /** Linux workloads: how the size was found, and the calibration's time per unit. */
  sizing?: Sizing;
  environment: Record<string, unknown>;
  /** The host's conditions behind the verdict (conditions.ts); absent from results saved before them. */
  conditions?: HostConditions;
  /** How the knobs were applied: 'boot' = every run booted its configuration (none changed in a running guest). */
  knobsApplied?: 'boot' | 'in-boot';
  notes: string[];
}
