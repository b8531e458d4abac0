// The Linux guest's back end: one run boots the Linux guest on Unhalt, waits for its agent, sends
// the pacer's calibration or warm-up commands and then the measured one (LinuxAgentRun), each
// under its own deadline (pacing.ts), and records the KVM stats deltas of the measured command.
import { resolveMachine } from '../vmm/config/resolve.ts';
import type { HostCapabilities } from '../vmm/machine/host-caps.ts';
import { Sampler } from '../vmm/telemetry/sampler.ts';
import { VirtualMachine } from '../vmm/vm.ts';
import { onAbort, statsDelta, stoppedAt, type Prepared, type RunOutcome } from './backend.ts';
import { LinuxAgentRun } from './linux-agent-run.ts';
import { ExperimentPacing, type Deadline } from './pacing.ts';
import { givenKeys, type Workload } from './workloads.ts';

/** The pacing of a Linux workload's runs: its size calibrated once, or as the user gave it. */
export function linuxPacing(work: Workload, userArgs: string, args: readonly string[], slowdown: number, deadlineMs?: number): ExperimentPacing {
  const size = work.size!;
  const param = work.params![size.param]!;
  const given = givenKeys(userArgs).includes(size.param);
  const value = Number(args.find((a) => a.startsWith(`${size.param}=`))!.slice(size.param.length + 1));
  return new ExperimentPacing({
    slowdown,
    param: { name: size.param, calibrateFrom: size.calibrateFrom, min: param.min, max: param.default },
    ...(given ? { givenSize: value } : {}),
    ...(deadlineMs !== undefined ? { deadlineMs } : {}),
  });
}

/**
 * One run of a Linux workload: boot, wait for the agent's `@u1 ready`, the pacer's calibration
 * or warm-up commands, then the measured `run NAME args` (VirtualMachine.sendAgent), read the
 * result and `@u1 done`, stop the VM. Each phase has its own deadline (pacing.ts). KVM stats cover
 * the measured command only (from the moment it is sent).
 */
export async function runLinuxOnUnhalt(p: Prepared, work: Workload, args: string[], host: HostCapabilities, pacing: ExperimentPacing, signal?: AbortSignal): Promise<RunOutcome> {
  const { spec } = resolveMachine(p.config, host);
  const t0 = performance.now();
  const vm = await VirtualMachine.start(spec);
  const unlisten = onAbort(signal, () => void vm.stop());
  const sampler = Sampler.forVm(vm, { intervalMs: 100 });
  let fromT: number | undefined;
  let expired: Deadline | undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = (d: Deadline) => {
    clearTimeout(timer);
    timer = setTimeout(() => { expired = d; void vm.stop(); }, d.ms);
  };
  const run = new LinuxAgentRun(work, args, (line, step) => {
    const t = sampler.markEvent(`run ${work.name}${step && step.kind !== 'measure' ? ` (${step.kind})` : ''}`).t;
    if (!step || step.kind === 'measure') fromT = t;
    if (step) arm(step.deadline);
    vm.sendAgent(line);
  }, () => { clearTimeout(timer); setTimeout(() => void vm.stop(), 50); }, { pacer: pacing.newRun() });
  vm.on('agent', (e) => {
    if (e.event === 'ready' && !run.ready) pacing.noteReady(performance.now() - t0);
    run.onEvent(e);
  });
  arm(pacing.readyDeadline());
  const end = await vm.ended;
  clearTimeout(timer);
  unlisten();
  const wallMs = performance.now() - t0;
  return { ...run.outcome(expired ? stoppedAt(expired) : end.message), wallMs, ...statsDelta(sampler, fromT) };
}
