// Real KVM: many start/stop cycles leave nothing behind; VMs run side by side without mixing.
import { describe, expect, it } from 'vitest';
import { kvmAvailable, openFdCount, startProbe, threadCount } from '../support/probe.ts';

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
  }, 180_000);

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
    const exits = await Promise.all(vms.map((g) => g.vm.exited));
    expect(exits.map((e) => e.kind)).toEqual(['poweroff', 'poweroff', 'poweroff']);
  });

  it('stop completes promptly while the guest is busy', async () => {
    const g = await startProbe({ cpus: 2, append: 'scenario=pio count=100000000' });
    await g.waitForEvent('boot');
    const t = performance.now();
    const exit = await g.vm.stop();
    expect(exit.kind).toBe('stopped');
    expect(performance.now() - t).toBeLessThan(5000);
  });
});
