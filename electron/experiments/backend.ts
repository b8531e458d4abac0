// What the experiment's back ends share (backend-probe.ts, backend-linux.ts: the VM on Unhalt;
// backend-qemu.ts: the same guest under QEMU; backend-bare.ts: the host build of a Linux
// workload): the configuration as prepared (prepare.ts), one run's outcome, cancellation by an
// AbortSignal, the words of a deadline that ended a run, and the KVM stats deltas of a run on
// Unhalt.
import type { VmConfig } from '../vmm/config/vm-config.ts';
import type { Sampler } from '../vmm/telemetry/sampler.ts';
import type { Deadline } from './pacing.ts';
import type { RunRecord } from './types.ts';

/** One configuration of a spec, parsed and checked against this host (prepare.ts). */
export interface Prepared {
  name: string;
  config: VmConfig;
  qemuArgs?: string[];
  /** Where the QEMU run differs from the config it is labelled with (QEMU lacks the knob), in one line. */
  qemuCaveat?: string;
}

/** One run's result, before the runner says which config, VMM and run it was. */
export type RunOutcome = Omit<RunRecord, 'config' | 'runner' | 'run'>;

/** Calls `stop` once when the signal aborts (now, if it has); returns the way to stop listening. */
export function onAbort(signal: AbortSignal | undefined, stop: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    stop();
    return () => {};
  }
  signal.addEventListener('abort', stop, { once: true });
  return () => signal.removeEventListener('abort', stop);
}

/** How a run ended that ran into its deadline (one line). */
export function stoppedAt(d: Deadline): string {
  return `stopped at its ${d.ms >= 10_000 ? (d.ms / 1000).toFixed(0) : (d.ms / 1000).toFixed(1)} s deadline (${d.why})`;
}

/**
 * KVM stats deltas over the run; from `fromT` (ms since the VM started) on when given: the
 * last sample at or before it is the baseline, and host CPU time is a delta too. Halt exits and
 * hypercalls are the mechanism the knobs change: cpu-pm=on takes halt exits to 0 on
 * hardware-backed KVM, pv-unhalt kicks are KVM_HC_KICK_CPU hypercalls.
 */
export function statsDelta(sampler: Sampler, fromT?: number): Pick<RunRecord, 'haltExits' | 'haltExitsPerS' | 'hypercalls' | 'pollHitRate' | 'hostCpuNs' | 'pollNs' | 'haltWaitNs' | 'haltHists' | 'haltHistsMs' | 'runqueueWaitNs'> {
  let recs = sampler.records();
  if (fromT !== undefined) {
    const base = recs.filter((r) => r.t <= fromT).at(-1)?.t;
    recs = recs.filter((r) => base === undefined || r.t >= base);
  }
  if (recs.length === 0) return {};
  let halts = 0;
  let hypercalls = 0;
  let polls = 0;
  let hits = 0;
  let cpu = 0;
  let pollNs = 0;
  let waitNs = 0;
  let rqNs = 0;
  let seconds = 0;
  for (let v = 0; v < sampler.cpus; v++) {
    const mine = recs.filter((r) => r.vcpu === v);
    const first = mine[0];
    const last = mine.at(-1);
    if (!first || !last) continue;
    const d = (k: string) => Number(last[k] ?? 0) - Number(first[k] ?? 0);
    halts += d('halt_exits');
    hypercalls += d('hypercalls');
    polls += d('halt_attempted_poll');
    hits += d('halt_successful_poll');
    pollNs += d('halt_poll_success_ns') + d('halt_poll_fail_ns');
    waitNs += d('halt_wait_ns');
    // From the first and last samples that could read it (a thread not yet or no longer there reads null).
    const rq = mine.filter((r) => typeof r.host_runqueue_wait_ns === 'number');
    if (rq.length) rqNs += Number(rq.at(-1)!.host_runqueue_wait_ns) - Number(rq[0]!.host_runqueue_wait_ns);
    // The thread's CPU time from the last sample that could read it: the final sample, taken as
    // the vCPU thread ends, often finds it gone (null), which read as 0 ns.
    const lastCpu = mine.findLast((r) => typeof r.host_cpu_ns === 'number')?.host_cpu_ns;
    cpu += Number(lastCpu ?? 0) - (fromT !== undefined ? Number(first.host_cpu_ns ?? 0) : 0);
    seconds = Math.max(seconds, (last.t - first.t) / 1000);
  }
  return {
    haltExits: halts,
    haltExitsPerS: seconds > 0 ? halts / seconds : undefined,
    // A host kernel without the counter has none to show (absent, not 0).
    ...(sampler.fields.includes('hypercalls') ? { hypercalls } : {}),
    pollHitRate: polls > 0 ? hits / polls : null,
    hostCpuNs: cpu,
    // Host kernels without the binary stats have neither counter (absent, not 0).
    ...(sampler.fields.includes('halt_poll_success_ns') ? { pollNs } : {}),
    ...(sampler.fields.includes('halt_wait_ns') ? { haltWaitNs: waitNs } : {}),
    // The histograms are kept per second: from fromT, the second it falls in is counted whole.
    ...(sampler.hasHistograms ? histogramsFrom(sampler, fromT, recs.at(-1)!.t) : {}),
    // Without schedstat (CONFIG_SCHED_INFO) the thread's run-queue wait cannot be read: absent.
    ...(recs.some((r) => typeof r.host_runqueue_wait_ns === 'number') ? { runqueueWaitNs: rqNs } : {}),
  };
}

/** The halt histograms from `fromT` on (ms since the VM started), and the time they cover to `lastT`. */
function histogramsFrom(sampler: Sampler, fromT: number | undefined, lastT: number): Pick<RunRecord, 'haltHists' | 'haltHistsMs'> {
  const bins = sampler.histBins;
  const firstKept = bins.all()[0]?.t ?? 0;
  const from = Math.max(firstKept, fromT === undefined ? 0 : Math.floor(fromT / bins.binWidth) * bins.binWidth);
  return { haltHists: bins.sum(fromT ?? -Infinity), haltHistsMs: Math.max(0, lastT - from) };
}
