// What a long-lived service keeps ready for the next start (the app, `unhalt serve`): a KVM VM set
// up with guest RAM (builder/vm-shells.ts) next to the spare vCPU workers. A start takes it and
// runs; a start right after a stop of the same VM works; a VM of another RAM size makes its own
// and the spare follows its size; the stopped status comes only once the VM's KVM fds are closed
// (counted in /proc/self/fd at that moment); the shutdown closes the spare.
import { readdirSync, readlinkSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiEvent } from '../../electron/service/api.ts';
import { createService } from '../../electron/service/service.ts';
import { spareVmShell } from '../../electron/vmm/builder/vm-shells.ts';
import { kvmAvailable } from '../support/probe.ts';
import { removeTempHomes, tempHome } from '../support/temp-home.ts';
import { scaled } from '../support/time-scale.ts';

afterAll(removeTempHomes);

/** This process's fds that are KVM objects, by kind ('kvm-vm', 'kvm-vcpu:0', ...). */
function kvmFds(): string[] {
  const out: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^anon_inode:\[?(kvm-[^\]]+)\]?$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m) out.push(m[1]!);
    } catch { /* closed meanwhile */ }
  }
  return out.sort();
}
const vmFds = () => kvmFds().filter((k) => k === 'kvm-vm').length;
const vcpuFds = () => kvmFds().filter((k) => k.startsWith('kvm-vcpu')).length;

async function eventually(what: string, ok: () => boolean, timeoutMs = scaled(20_000)): Promise<void> {
  const t0 = performance.now();
  while (!ok()) {
    if (performance.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.skipIf(!kvmAvailable)('a warm service keeps a KVM VM ready for the next start', () => {
  it('starts from it, again right after a stop, at another RAM size, and releases everything', async () => {
    expect(vmFds()).toBe(0);
    const svc = await createService({ home: tempHome('warm-start'), spareVcpuWorkers: 2 });
    const events: ApiEvent[] = [];
    svc.on((e) => events.push(e));
    // At the moment the service says "stopped", the VM's vCPU fds and its VM fd are closed.
    const atStopped: { vcpus: number; vms: number }[] = [];
    svc.on((e) => { if (e.type === 'status' && e.status.state === 'stopped' && e.status.lastEnd) atStopped.push({ vcpus: vcpuFds(), vms: vmFds() }); });
    try {
      const vm = await svc.createVm({ name: 'warm-start', guest: 'probe', cpus: 2, memoryMiB: 64, append: 'scenario=echo' });
      await svc.subscribe(vm.id);
      const text = () => events.flatMap((e) => (e.type === 'console' && e.vmId === vm.id ? [e.data] : [])).join('');
      const prompts = () => (text().match(/probe> /g) ?? []).length;

      // The first start makes its own VM; a spare of its size follows.
      await svc.startVm(vm.id);
      await eventually('the first prompt', () => prompts() === 1);
      await eventually('a spare KVM VM of 64 MiB', () => spareVmShell()?.memoryMiB === 64);
      expect(vmFds()).toBe(2); // the running VM's and the spare's
      await svc.forceStopVm(vm.id);
      expect(atStopped.at(-1)).toEqual({ vcpus: 0, vms: 1 }); // only the spare is left

      // From the spare, and again at once after its stop.
      const spare = spareVmShell()!.serial;
      await svc.startVm(vm.id);
      // Taken: a spare now (if already made again) is another one.
      expect(spareVmShell()?.serial).not.toBe(spare);
      await eventually('the prompt of the start from the spare', () => prompts() === 2);
      await svc.sendConsole(vm.id, 'cpus\r');
      await eventually('its echo shell answering', () => /cpus\r?\n[^\n]*2/.test(text().slice(text().lastIndexOf('probe> cpus'))));
      await svc.forceStopVm(vm.id);
      await svc.startVm(vm.id);
      await eventually('the prompt of the start right after a stop', () => prompts() === 3);
      await svc.forceStopVm(vm.id);
      expect(atStopped.every((s) => s.vcpus === 0)).toBe(true);

      // Another RAM size: the 64 MiB spare does not fit; the start makes its own and the spare follows.
      await svc.updateVm(vm.id, { ...vm.config, memoryMiB: 96 });
      await eventually('a spare again', () => spareVmShell() !== undefined);
      await svc.startVm(vm.id);
      await eventually('the prompt at 96 MiB', () => prompts() === 4);
      await eventually('a spare KVM VM of 96 MiB', () => spareVmShell()?.memoryMiB === 96);
      expect(vmFds()).toBe(2);
      await svc.forceStopVm(vm.id);
      expect(atStopped.at(-1)).toEqual({ vcpus: 0, vms: 1 });
      expect(events.filter((e) => e.type === 'status' && e.status.lastEnd?.kind === 'stopped').length).toBeGreaterThanOrEqual(4);
    } finally {
      await svc.shutdown();
    }
    expect(spareVmShell()).toBeUndefined();
    expect(kvmFds()).toEqual([]);
  }, 120_000);
});
