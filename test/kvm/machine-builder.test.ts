// The builder and the runtime apart (issue 12, item 2): a machine built on real KVM and inspected
// without a vCPU ever entering the guest; the runtime running one that was built; live knobs as
// the runtime's state, the spec untouched; a failed build and close() leaving no fd behind.
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { LAYOUT } from '../../electron/vmm/boot/layout.ts';
import { buildMachineFromFiles } from '../../electron/vmm/builder/build-machine.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import type { MachineSpec } from '../../electron/vmm/machine-spec.ts';
import { readBootFiles } from '../../electron/vmm/boot/boot-files.ts';
import { kvmAvailable, openFdCount, watch } from '../support/probe.ts';

const CR0_PE = 1n;

function probeSpec(over: Record<string, unknown> = {}): MachineSpec {
  return resolveMachine(validateConfig({ guest: 'probe', cpus: 2, memoryMiB: 64, append: 'scenario=echo', name: 'built', ...over }), probeHost()).spec;
}

const lockedKiB = () => Number(/VmLck:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? -1);

describe.skipIf(!kvmAvailable)('machine builder and runtime', () => {
  const figures: string[] = [];
  afterAll(() => { if (figures.length) process.stdout.write(`${figures.join('\n')}\n`); });

  it('builds a machine without starting it: vCPUs at the boot entry, tables and kernel in RAM; close() releases every fd', async () => {
    const spec = probeSpec();
    await readBootFiles(spec); // the thread pool's fds and threads exist before the baseline
    const fds = openFdCount();
    const t = performance.now();
    const m = await buildMachineFromFiles(spec);
    figures.push(`build (2 vCPUs, 64 MiB): ${(performance.now() - t).toFixed(1)} ms`);
    expect(m.spec).toBe(spec);
    expect(m.image.format).toBe('pvh');
    expect(m.vcpus.map((v) => v.id)).toEqual([0, 1]);
    // vCPU 0 stands at the PVH entry in 32-bit protected mode with rbx -> hvm_start_info: set
    // up, never run (a vCPU that had run would have moved its rip on).
    const regs = m.vcpus[0]!.getRegs();
    expect(regs.rip).toBe(BigInt(m.image.boot.entry));
    expect(regs.rbx).toBe(BigInt(LAYOUT.startInfo));
    expect(m.vcpus[0]!.getSregs().cr0 & CR0_PE).toBe(CR0_PE);
    // vCPU 1 waits for its INIT/SIPI in real mode.
    expect(BigInt(m.vcpus[1]!.getSregs().cr0) & CR0_PE).toBe(0n);
    expect(new TextDecoder().decode(m.memory.read(m.image.rsdpAddress, 8))).toBe('RSD PTR ');
    expect(m.memory.read(m.image.boot.entry, 4).some((b) => b !== 0)).toBe(true);
    expect(m.statsFds.vcpus).toHaveLength(2);
    expect(m.memory.isLocked).toBe(false);
    expect(openFdCount()).toBeGreaterThanOrEqual(fds + 4); // /dev/kvm, the VM, two vCPUs
    await m.close();
    await m.close(); // twice is harmless
    expect(m.isClosed).toBe(true);
    expect(openFdCount()).toBe(fds);
    await expect(VirtualMachine.run(m)).rejects.toThrow(/closed/);
  });

  it('mem-lock=on: guest RAM is locked (off the main thread) while built and unlocked at close', async () => {
    const spec = probeSpec({ cpus: 1, memoryMiB: 128, memLock: true });
    expect(spec.memLock).toBe(true);
    const before = lockedKiB();
    const t = performance.now();
    const m = await buildMachineFromFiles(spec);
    figures.push(`build with mem-lock (128 MiB): ${(performance.now() - t).toFixed(1)} ms`);
    expect(m.memory.isLocked).toBe(true);
    expect(lockedKiB() - before).toBeGreaterThanOrEqual(128 * 1024);
    await m.close();
    expect(lockedKiB()).toBe(before);
  });

  it('a build that fails after KVM is open (a DISABLE_EXITS mask KVM refuses) closes what it opened', async () => {
    const spec = { ...probeSpec({ cpus: 1 }), disableExits: 0x4000_0000 };
    await readBootFiles(spec);
    const fds = openFdCount();
    await expect(buildMachineFromFiles(spec)).rejects.toThrow(/KVM_ENABLE_CAP|EINVAL/);
    expect(openFdCount()).toBe(fds);
  });

  it('the runtime runs a built machine; live knobs are its state and the spec stays as built', async () => {
    const spec = probeSpec({ haltPollNs: 5000 });
    const frozen = JSON.stringify(spec);
    const m = await buildMachineFromFiles(spec);
    const vm = await VirtualMachine.run(m);
    const g = watch(vm);
    await g.waitForConsole('probe> ');
    expect(vm.knobs).toEqual({ haltPollNs: 5000, pin: undefined });
    vm.setHaltPollNs(12_345);
    vm.setPin([0]);
    expect(vm.knobs).toEqual({ haltPollNs: 12_345, pin: [0, 0] });
    vm.setPin([]);
    expect(vm.knobs.pin).toBeUndefined();
    expect(JSON.stringify(vm.spec)).toBe(frozen);
    vm.sendConsole('hi\r');
    await g.waitForConsole('unknown command: hi');
    expect((await vm.stop()).kind).toBe('stopped');
    expect(m.isClosed).toBe(true);
    expect(vm.statsFds()).toEqual({ vm: -1, vcpus: [] });
  });
});
