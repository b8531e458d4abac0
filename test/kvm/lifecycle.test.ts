// Real KVM: many start/stop cycles leave nothing behind; VMs run side by side without mixing;
// pause() is acknowledged by every vCPU thread (the guest visibly stops until resume()).
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { COUNTER } from '../../electron/vmm/shared/control.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { kvmAvailable, openFdCount, startProbe, threadCount } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean, timeoutMs = scaled(20_000)): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 10));
}

describe.skipIf(!kvmAvailable)('VM lifecycle', () => {
  it('20 start/stop cycles leave no fd or thread behind', async () => {
    // One warm-up cycle so lazily created process-wide resources (libuv pool, koffi) exist.
    const warm = await startProbe({ cpus: 2, append: 'scenario=echo' });
    await warm.vm.stop();
    await settle();
    const fds = openFdCount();
    const threads = threadCount();
    for (let i = 0; i < 20; i++) {
      const g = await startProbe({ cpus: 2, append: 'scenario=echo' });
      if (i % 5 === 0) await g.waitForConsole('probe> ');
      const exit = await g.vm.stop();
      expect(exit.kind).toBe('stopped');
    }
    await settle();
    expect(openFdCount()).toBe(fds);
    expect(threadCount()).toBe(threads);
  }, scaled(180_000));

  it('three VMs run at once, each with its own console', async () => {
    const vms = await Promise.all([1, 2, 3].map((n) => startProbe({ cpus: n === 3 ? 2 : 1, append: 'scenario=echo', name: `vm${n}` })));
    await Promise.all(vms.map((g) => g.waitForConsole('probe> ')));
    const words = vms.map((_, i) => `only-for-vm${i}-${Math.random().toString(36).slice(2, 8)}`);
    vms.forEach((g, i) => g.vm.sendConsole(`${words[i]}\r`));
    await Promise.all(vms.map((g, i) => g.waitForConsole(`unknown command: ${words[i]}`)));
    vms.forEach((g, i) => {
      for (let j = 0; j < words.length; j++) if (j !== i) expect(g.console()).not.toContain(words[j]);
    });
    vms.forEach((g) => g.vm.sendConsole('poweroff\r'));
    const exits = await Promise.all(vms.map((g) => g.vm.ended));
    expect(exits.map((e) => e.kind)).toEqual(['poweroff', 'poweroff', 'poweroff']);
  });

  it('stop completes promptly while the guest is busy', async () => {
    const g = await startProbe({ cpus: 2, append: 'scenario=pio count=100000000' });
    await g.waitForEvent('boot');
    const t = performance.now();
    const exit = await g.vm.stop();
    expect(exit.kind).toBe('stopped');
    expect(performance.now() - t).toBeLessThan(scaled(5000));
  });

  it('pause() resolves when every vCPU is out of KVM_RUN: no exits, no console bytes until resume()', async () => {
    // Every vCPU of the flood scenario writes ttyS0 and does port and MMIO I/O without pause, so
    // any vCPU still running after pause() resolved would show in its exit count or the console.
    const cpus = 2;
    const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus, memoryMiB: 64, append: 'scenario=flood ms=0', name: 'pause-ack' }), probeHost());
    const vm = await VirtualMachine.start(spec);
    let consoleBytes = 0;
    vm.on('console', (b) => { consoleBytes += b.length; });
    const exits = () => Array.from({ length: cpus }, (_, v) => vm.control.counter(v, COUNTER.exits));
    try {
      await until('every vCPU flooding', () => consoleBytes > 0 && exits().every((n) => n > 1000));
      for (let round = 0; round < 3; round++) {
        await vm.pause();
        expect(vm.state).toBe('paused');
        expect(vm.control.pausedWorkers).toBe(cpus);
        // Bytes already in the console ring when the vCPUs stopped still reach the main thread.
        await sleep(100);
        const exitsAtPause = exits();
        const bytesAtPause = consoleBytes;
        await sleep(300);
        expect(exits(), 'no vCPU exits while paused').toEqual(exitsAtPause);
        expect(consoleBytes, 'no console bytes while paused').toBe(bytesAtPause);
        vm.resume();
        await until('progress after resume()', () => consoleBytes > bytesAtPause && exits().every((n, v) => n > exitsAtPause[v]! + 100));
      }
    } finally {
      await vm.stop();
    }
  });

  it('pause() is acknowledged by vCPUs halted inside KVM_RUN too, and resume() wakes them', async () => {
    const g = await startProbe({ cpus: 2, append: 'scenario=echo' });
    await g.waitForConsole('probe> ');
    // The boot CPU waits for input and the AP idles: both are halted in the kernel, never exiting.
    const t = performance.now();
    await g.vm.pause();
    expect(performance.now() - t).toBeLessThan(scaled(2000));
    expect(g.vm.control.pausedWorkers).toBe(2);
    g.vm.sendConsole('cpus\r');
    await sleep(200);
    expect(g.console()).not.toContain('cpus up:');
    g.vm.resume();
    await g.waitForConsole('cpus up: 2');
    await g.vm.stop();
  });
});
