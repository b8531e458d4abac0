// A vCPU worker thread reused across VMs (worker-pool.ts, vcpu-worker.ts) starts each VM from a
// clean thread state: the same thread (same tid) drives a pinned VM's vCPU, waits idle, then drives
// an unpinned VM's vCPU on every host CPU again, named for its vCPU each time; the first VM's guest
// RAM is returned to the OS once it stopped (its mapping is gone from /proc/self/maps: the main
// thread's release dropped it), although the thread that ran its vCPU lives on.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { IDLE_VCPU_THREAD_NAME, spareVcpuWorkerCount } from '../../electron/vmm/vcpu/worker-pool.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { kvmAvailable, watch } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

// The test processes run with --expose-gc (bin/v8-flags.mjs, vitest.config.ts).
const gc = (globalThis as { gc?: () => void }).gc!;

const status = (tid: number) => readFileSync(`/proc/self/task/${tid}/status`, 'utf8');
const allowedCpus = (tid: number) => /Cpus_allowed_list:\s*(\S+)/.exec(status(tid))![1];
const nameOf = (tid: number) => readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();

/** Whether one mapping of this process still covers [start, start + size). */
function mapped(start: number, size: number): boolean {
  return readFileSync('/proc/self/maps', 'utf8').split('\n').some((line) => {
    const m = /^([0-9a-f]+)-([0-9a-f]+) /.exec(line);
    return m !== null && parseInt(m[1]!, 16) <= start && parseInt(m[2]!, 16) >= start + size;
  });
}

/** A started 1-vCPU probe VM at its prompt; its guest RAM's host range, as the builder placed it. */
async function startEcho(pin?: number[]) {
  const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo', name: 'reuse', ...(pin ? { pin } : {}) }), probeHost());
  let ram = { start: 0, size: 0 };
  spec.testHooks = { beforeFirstRun: ({ memory }) => { ram = { start: memory.regions[0]!.hostAddress, size: memory.regions[0]!.size }; } };
  const g = watch(await VirtualMachine.start(spec));
  await g.waitForConsole('probe> ');
  return { g, ram };
}

const hostCpus = kvmAvailable ? probeHost().hostCpus : []; // probed only where there is a KVM

describe.skipIf(!kvmAvailable || hostCpus.length < 2)('a vCPU worker reused across VMs', () => {
  it('drives a pinned VM, then an unpinned one, from a clean thread state; the first VM\'s RAM is released', async () => {
    const everyCpu = allowedCpus(process.pid);
    const pinnedTo = hostCpus.at(-1)!;

    const first = await startEcho([pinnedTo]);
    const [tid] = first.g.vm.vcpuThreadIds();
    expect(tid).toBeGreaterThan(0);
    expect(nameOf(tid!)).toBe('vcpu-0');
    expect(allowedCpus(tid!)).toBe(String(pinnedTo));
    expect(mapped(first.ram.start, first.ram.size)).toBe(true);
    expect((await first.g.vm.stop()).kind).toBe('stopped');

    // Out of the VM, alive, idle in the pool, and no longer pinned.
    expect(spareVcpuWorkerCount()).toBe(1);
    expect(nameOf(tid!)).toBe(IDLE_VCPU_THREAD_NAME);
    expect(allowedCpus(tid!)).toBe(everyCpu);
    // Guest RAM goes back to the OS with the last reference to its SharedArrayBuffer, which is the
    // main thread's (a vCPU worker is never handed guest RAM: vm.ts threadData): this checks that
    // the release dropped it while the thread that ran the VM's vCPU lives on.
    let released = false;
    for (const end = performance.now() + scaled(5_000); performance.now() < end && !released;) {
      await new Promise((r) => setTimeout(r, 20));
      gc();
      released = !mapped(first.ram.start, first.ram.size);
    }
    expect(released, 'the first VM\'s guest RAM mapping is gone').toBe(true);

    // The same thread drives the next VM's vCPU, unpinned: on every host CPU again.
    const second = await startEcho();
    expect(second.g.vm.vcpuThreadIds()).toEqual([tid]);
    expect(nameOf(tid!)).toBe('vcpu-0');
    expect(allowedCpus(tid!)).toBe(everyCpu);
    const token = `again-${Math.random().toString(36).slice(2, 8)}`;
    second.g.vm.sendConsole(`${token}\r`);
    await second.g.waitForConsole(`unknown command: ${token}`);
    expect((await second.g.vm.stop()).kind).toBe('stopped');
    expect(nameOf(tid!)).toBe(IDLE_VCPU_THREAD_NAME);
  });
});
