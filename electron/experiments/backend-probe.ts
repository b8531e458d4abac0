// The probe guest's back end: one run boots the probe guest on Unhalt with the configuration, reads
// the workload's result from the agent channel (ttyS1), stops the VM, and records the KVM stats
// deltas of the whole run.
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';
import { resolveMachine } from '../vmm/config/resolve.ts';
import type { HostCapabilities } from '../vmm/machine/host-caps.ts';
import { Sampler } from '../vmm/telemetry/sampler.ts';
import { VirtualMachine } from '../vmm/vm.ts';
import { onAbort, statsDelta, stoppedAt, type Prepared, type RunOutcome } from './backend.ts';
import type { Deadline } from './pacing.ts';
import type { Workload } from './workloads.ts';

export async function runOnUnhalt(p: Prepared, work: Workload, host: HostCapabilities, deadline: Deadline, signal?: AbortSignal): Promise<RunOutcome> {
  const { spec } = resolveMachine(p.config, host);
  const t0 = performance.now();
  const vm = await VirtualMachine.start(spec);
  const unlisten = onAbort(signal, () => void vm.stop());
  const sampler = Sampler.forVm(vm, { intervalMs: 100 });
  let boot: AgentEvent | undefined;
  let result: AgentEvent | undefined;
  vm.on('agent', (e) => {
    if (e.event === 'boot') boot = e;
    if (e.event === work.event && !result) {
      result = e;
      // A result is all we need; a live probe keeps going, so end the run here.
      setTimeout(() => void vm.stop(), 50);
    }
  });
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; void vm.stop(); }, deadline.ms);
  const end = await vm.ended;
  clearTimeout(timer);
  unlisten();
  const wallMs = performance.now() - t0;
  const stats = statsDelta(sampler);
  if (!result) return { value: null, fields: {}, wallMs, error: `no ${work.event} result: ${timedOut ? stoppedAt(deadline) : end.message}`, ...stats };
  return { value: work.value(result, boot), fields: result.fields, wallMs, ...stats };
}
