// The A/B experiment runner behind `unhalt bench` and the compare view, a layer above the VMM
// (docs/architecture.md): it starts VMs, QEMU and host binaries. For each configuration,
// boot a VM, run the workload, record the guest's result with the KVM stats deltas and the VMM's
// host CPU time; optionally the same guest and knobs under QEMU. Configurations are run
// alternately (A, B, A, B, ...) because this machine is noisy; results are medians and ratios.
//
// Linux workloads: each run boots the Linux guest, waits for the agent's `@u1 ready` on ttyS1,
// sends it `run NAME key=value ...` (VirtualMachine.sendAgent) and reads the result event and
// `@u1 done`. The first run that gets that far calibrates the workload's size; every deadline
// follows this host's measured speed (pacing.ts, host-speed.ts), never a fixed figure. A run that
// fails is recorded with its reason and the experiment goes on: the result says which failed.
// `--bare` runs the host build of the same C workload with the same arguments (a `bare` row, the
// reference of the ratio column). On PVM hosts the Linux guest cannot boot, so such an
// experiment is refused before anything runs. What a spec may be is spec.ts's; the verdicts are
// stats.ts's.
//
// The parts: prepare.ts (the spec checked against this host), the back ends (backend-probe.ts,
// backend-linux.ts with linux-agent-run.ts, backend-qemu.ts, backend-bare.ts; what they share is
// backend.ts's), summary.ts (the rows). This module runs them in turn and is what the service
// loads on demand and `unhalt bench` imports.
import { appVersion } from '../app-version.ts';
import { release } from 'node:os';
import { resolveMachine } from '../vmm/config/resolve.ts';
import { PROBE_KERNEL } from '../vmm/guests.ts';
import { LINUX_HOST_WORKLOAD, linuxKitInfo } from '../vmm/guests-linux.ts';
import { hostCpuModel } from '../vmm/host.ts';
import { disableExitNames, probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { hostSpeed } from '../vmm/host-speed.ts';
import type { Prepared, RunOutcome } from './backend.ts';
import { BARE_BUDGET_MS, runBare } from './backend-bare.ts';
import { linuxPacing, runLinuxOnUnhalt } from './backend-linux.ts';
import { runOnUnhalt } from './backend-probe.ts';
import { runOnQemu, runHostCmdOnQemu } from './backend-qemu.ts';
import { userCmdDeadline, probeRunDeadline, userDeadline, userReadyDeadline } from './pacing.ts';
import { benchCommandOf } from './user-bench.ts';
import { runUserCmdOnUnhalt } from './backend-user-cmd.ts';
import { LoadSampler, hostConditions } from './conditions.ts';
import { prepareExperiment } from './prepare.ts';
import { Contention, contentionCpus, contentionText } from './contention.ts';
import type { ExperimentProgress, ExperimentResult, ExperimentSpec, RunRecord } from './types.ts';
import { ExperimentError, fewRunsWarning, runnersOf, totalRuns } from './spec.ts';
import { compareRows } from './stats.ts';
import { BARE_CONFIG, failuresOf, summarize } from './summary.ts';
import { withSize } from './workloads.ts';

export { ExperimentError };
export { LINUX_ON_PVM, hostKindOf, prepareExperiment, type HostSource, type PreparedExperiment } from './prepare.ts';

/**
 * Runs an experiment: every config under every VMM, alternately (A, B, A, B, ...), `runs` times,
 * then the rows (medians, ratios) and a verdict per pair (stats.ts). `signal` cancels it
 * promptly: the run in progress is ended (its VM stopped, its QEMU or host process killed) and
 * the promise rejects with ExperimentCancelled.
 *
 * A search loop (a tuning advisor) wants "X n times alternately with Y, and the verdict":
 * compareConfigs (compare.ts) is that call over this one.
 */
export async function runExperiment(
  rawSpec: ExperimentSpec,
  onProgress: (p: ExperimentProgress) => void = () => {},
  signal?: AbortSignal,
): Promise<ExperimentResult> {
  const host = probeHost();
  const { spec, work, prepared, notes, linuxArgs } = prepareExperiment(rawSpec, host);
  const { vmms: runners, bare } = runnersOf(spec);
  const total = totalRuns(spec);
  const speed = hostSpeed();
  const deadlineMs = spec.deadlineS !== undefined ? spec.deadlineS * 1000 : undefined;
  // Guest-side phases scale by the guest slowdown (the clock's, floored where the CPU is emulated).
  // (Not for the user's own benchmark: its command is as long as the user made it.)
  const pacing = linuxArgs && !spec.bench ? linuxPacing(work, spec.workloadArgs ?? '', linuxArgs, speed.guestSlowdown, deadlineMs) : undefined;
  const probeDeadline = deadlineMs !== undefined ? userDeadline(deadlineMs) : probeRunDeadline(speed.guestSlowdown);
  const raw: RunRecord[] = [];
  const load = new LoadSampler();
  // The user's benchmark: the boot to ready is timed by the slowest one so far once there is one.
  let slowestReadyMs: number | undefined;
  const hostCmdRun = (p: (typeof prepared)[number]) => runUserCmdOnUnhalt(p, spec.bench!, host, {
    ready: deadlineMs !== undefined ? userDeadline(deadlineMs) : userReadyDeadline(speed.guestSlowdown, slowestReadyMs),
    command: deadlineMs !== undefined ? userDeadline(deadlineMs)
      : benchCommandOf(spec.bench!).where === 'guest' ? userCmdDeadline('guest', speed.guestSlowdown) : userCmdDeadline('host', speed.slowdown),
  }, signal);
  const hostCmdOnQemu = (p: (typeof prepared)[number]) => runHostCmdOnQemu(p, spec.bench!, {
    ready: deadlineMs !== undefined ? userDeadline(deadlineMs) : userReadyDeadline(speed.guestSlowdown, slowestReadyMs),
    command: deadlineMs !== undefined ? userDeadline(deadlineMs) : userCmdDeadline('host', speed.slowdown),
  }, signal);
  let done = 0;
  const cancelled = () => { if (signal?.aborted) throw new ExperimentCancelled(); };
  for (let run = 1; run <= spec.runs; run++) {
    for (const p of prepared) {
      for (const runner of runners) {
        cancelled();
        onProgress({ done, total, current: `${p.name} (${runner}) run ${run}/${spec.runs}` });
        load.sample();
        const rec = await recorded(() => contended(spec.contention, p.config.pin, () => runner === 'qemu' ? (spec.bench ? hostCmdOnQemu(p) : runOnQemu(p, work, probeDeadline, signal))
          : spec.bench ? hostCmdRun(p)
            : pacing ? runLinuxOnUnhalt(p, work, linuxArgs!, host, pacing, signal) : runOnUnhalt(p, work, host, probeDeadline, signal)));
        if (rec.fields.ready_ms !== undefined) slowestReadyMs = Math.max(slowestReadyMs ?? 0, rec.fields.ready_ms);
        cancelled(); // a run cut short by the cancel is not a result
        raw.push({ ...rec, config: p.name, runner, run });
        done++;
      }
    }
    if (bare) {
      // In the same alternation as the configs: the host's noise hits every row alike.
      cancelled();
      onProgress({ done, total, current: `bare run ${run}/${spec.runs}` });
      // The host build runs at the calibrated size too (the first run calibrated it, in the guest).
      const args = pacing?.sizing ? withSize(linuxArgs!, pacing.sizing.param, pacing.sizing.size) : linuxArgs!;
      // Host processes slow down with the host clock too (a nested L1 runs them under TCG).
      const bareTimeoutMs = deadlineMs ?? Math.ceil(BARE_BUDGET_MS * speed.slowdown);
      const rec = await recorded(() => contended(spec.contention, undefined, () => runBare(work, args, LINUX_HOST_WORKLOAD, bareTimeoutMs, signal)));
      cancelled();
      raw.push({ ...rec, config: BARE_CONFIG, runner: 'bare', run });
      done++;
    }
  }
  onProgress({ done, total });
  const rowRunners = bare ? [...runners, 'bare'] : runners;
  const rows = summarize(prepared.map((p) => p.name), rowRunners, raw, work);
  for (const row of rows) {
    const caveat = row.runner === 'qemu' ? prepared.find((p) => p.name === row.config)?.qemuCaveat : undefined;
    if (caveat) row.caveat = caveat;
  }
  const failures = failuresOf(raw);
  const sizing = pacing?.sizing;
  const few = fewRunsWarning(spec.runs);
  return {
    spec,
    status: failures.length === 0 ? 'ok' : rows.length ? 'partial' : 'failed',
    unit: work.unit,
    rows,
    comparisons: compareRows(rows, work.lowerIsBetter ? 'lower' : 'higher'),
    raw,
    failures,
    ...(sizing ? { sizing, workloadArgsUsed: withSize(linuxArgs!, sizing.param, sizing.size).join(' ') } : {}),
    environment: { ...environment(host, prepared, spec), hostSpeed: speed },
    conditions: { ...hostConditions(), load: load.summary() },
    // Every knob is applied at boot today, also those KVM could change in a running guest
    // (halt-poll-ns, pin): each run is a boot of its own, so no run inherits another's state.
    knobsApplied: 'boot',
    notes: [...(few ? [few] : []), ...(spec.contention ? [contentionNote(spec.contention, prepared)] : []), ...notes],
  };
}

/** The contention note of the tables: per configuration where their pinning differs. */
function contentionNote(threads: number, prepared: Prepared[]): string {
  const byCpus = new Map<string, string[]>();
  for (const p of prepared) {
    const key = contentionCpus(p.config.pin).join(',');
    byCpus.set(key, [...(byCpus.get(key) ?? []), p.name]);
  }
  return [...byCpus.entries()].map(([cpus, names]) => contentionText(threads, cpus.split(',').map(Number)) + (byCpus.size > 1 ? ` (${names.join(', ')})` : '')).join('; ');
}

/** The experiment was cancelled (ExperimentRunner.cancel, an AbortSignal). */
export class ExperimentCancelled extends ExperimentError {
  override name = 'ExperimentCancelled';
  constructor() {
    super('the experiment was cancelled');
  }
}

/** A run under the experiment's host contention, with the CPU its busy processes took; without contention, the run. */
async function contended(threads: number | undefined, pin: readonly number[] | undefined, run: () => Promise<RunOutcome>): Promise<RunOutcome> {
  if (!threads) return run();
  const busy = Contention.start(threads, contentionCpus(pin));
  try {
    const rec = await run();
    return { ...rec, contentionCpuNs: await busy.stop() };
  } finally {
    await busy.stop(); // also when the run threw
  }
}

/** A run that threw (the VM did not start, a device failed) is a failed run, not the end of the experiment. */
async function recorded(run: () => Promise<RunOutcome>): Promise<RunOutcome> {
  const t0 = performance.now();
  try {
    return await run();
  } catch (e) {
    return { value: null, fields: {}, wallMs: performance.now() - t0, error: `the run failed: ${(e as Error)?.message ?? String(e)}` };
  }
}

function environment(host: HostCapabilities, prepared: Prepared[], spec: ExperimentSpec): Record<string, unknown> {
  return {
    appVersion: appVersion(),
    node: process.versions.node,
    hostCpuModel: hostCpuModel(),
    hostCpus: host.hostCpus.length,
    hostKind: host.kind,
    kernel: release(),
    kvm: {
      features: host.kvmFeatures, disableExits: disableExitNames(host.disableExits), haltPoll: host.haltPoll,
      binaryStats: host.binaryStats, maxVcpus: host.maxVcpus, haltPollParams: host.haltPollParams,
    },
    guest: spec.vm ? spec.vm.config.kernel ?? spec.guest : spec.guest === 'probe' ? PROBE_KERNEL : spec.guest,
    ...(spec.vm ? { vm: { name: spec.vm.name, image: spec.vm.image ?? null } } : {}),
    ...(spec.guest === 'linux' ? { linuxKit: linuxKitInfo() ?? null, linuxWorkloadArgs: spec.workloadArgs ?? '' } : {}),
    ...(spec.guest === 'linux' && spec.bare ? { bare: { binary: LINUX_HOST_WORKLOAD } } : {}),
    ...(spec.contention ? { contention: prepared.map((p) => ({ config: p.name, processes: spec.contention, hostCpus: contentionCpus(p.config.pin) })) } : {}),
    configs: prepared.map((p) => ({ name: p.name, config: p.config, resolved: resolveMachine(p.config, host).resolution, qemu: p.qemuArgs })),
  };
}
