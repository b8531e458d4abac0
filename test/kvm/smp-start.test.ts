// Real KVM: the vCPU start barrier. No vCPU enters KVM_RUN before every vCPU thread is ready to,
// so the boot CPU's SIPIs never reach an AP whose thread does not exist yet — the cause of
// "0 of 3 APs up" on slow (nested) hosts. The load here is real: more vCPU threads than this
// machine's 2 host CPUs, all pinned to one of them, so worker start-up is slow and uneven.
import { describe, expect, it } from 'vitest';
import { allowedHostCpus } from '../../native/kvm/affinity.ts';
import type { VcpuStartTimes } from '../../electron/vmm/shared/control.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { kvmAvailable, startProbe } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

function expectBarrierHeld(times: VcpuStartTimes[], cpus: number): void {
  expect(times).toHaveLength(cpus);
  for (const t of times) {
    expect(t.readyAt).toBeGreaterThan(0);
    expect(t.enteredAt).toBeGreaterThan(0);
  }
  const lastReady = Math.max(...times.map((t) => t.readyAt));
  const firstRun = Math.min(...times.map((t) => t.enteredAt));
  expect(lastReady, `first KVM_RUN ${(lastReady - firstRun).toFixed(1)} ms before the last thread was ready`).toBeLessThanOrEqual(firstRun);
}

describe.skipIf(!kvmAvailable)('vCPU start barrier on real KVM', () => {
  it('a 1-vCPU VM starts without waiting for anyone', async () => {
    const g = await startProbe({ cpus: 1, append: 'scenario=hello' });
    expect((await g.vm.ended).kind).toBe('poweroff');
    expectBarrierHeld(g.vm.startTimeline(), 1);
  });

  it('every vCPU thread is ready before any enters KVM_RUN (4 vCPUs)', async () => {
    const g = await startProbe({ cpus: 4, append: 'scenario=hello' });
    // Read once the guest booted: start() returns when every thread has reached the barrier,
    // which is a moment before the threads have stamped their way out of it.
    expect((await g.waitForEvent('boot')).fields.cpus_up).toBe(4);
    expectBarrierHeld(g.vm.startTimeline(), 4);
    expect((await g.vm.ended).kind).toBe('poweroff');
  });

  it('a vCPU thread that fails before the barrier opens ends the VM, and no vCPU ever runs', async () => {
    const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus: 4, memoryMiB: 64, append: 'scenario=hello', name: 'barrier' }), probeHost());
    spec.pin = [0, 0, 0, 1_000_000]; // vCPU 3 cannot pin itself: it ends the VM before it reaches the barrier
    const vm = await VirtualMachine.start(spec);
    const exit = await vm.ended;
    expect(exit).toMatchObject({ kind: 'crash', vcpu: 3 });
    expect(vm.state).toBe('stopped');
    const times = vm.startTimeline();
    expect(times.filter((t) => t.readyAt > 0).map((t) => t.vcpu)).toEqual([0, 1, 2]);
    expect(times.every((t) => t.enteredAt === 0)).toBe(true);
  });

  it('8 vCPUs on one host CPU come up, every time (3 cold starts)', async () => {
    const oneCpu = [allowedHostCpus()[0]!];
    for (let run = 0; run < 3; run++) {
      const g = await startProbe({ cpus: 8, append: 'scenario=hello', config: { pin: oneCpu } });
      const boot = await g.waitForEvent('boot', scaled(60_000));
      expect(boot.fields, `run ${run + 1}: ${g.console().slice(-300)}`).toMatchObject({ cpus_found: 8, cpus_up: 8 });
      expectBarrierHeld(g.vm.startTimeline(), 8);
      expect((await g.vm.ended).kind).toBe('poweroff');
    }
  }, scaled(180_000));
});
