// Real KVM, the probe guest: vCPUs come up, the echo shell answers, power-off ends the VM.
import { describe, expect, it } from 'vitest';
import { kvmAvailable, startProbe } from '../support/probe.ts';

describe.skipIf(!kvmAvailable)('probe guest on real KVM', () => {
  for (const cpus of [1, 2, 4]) {
    it(`brings up and reports ${cpus} vCPU(s), then powers off`, async () => {
      const g = await startProbe({ cpus, append: 'scenario=hello' });
      const boot = await g.waitForEvent('boot');
      expect(boot.fields.cpus_found).toBe(cpus);
      expect(boot.fields.cpus_up).toBe(cpus);
      const hello = await g.waitForEvent('hello');
      expect(hello.fields.cpus_up).toBe(cpus);
      const exit = await g.vm.ended;
      expect(exit.kind).toBe('poweroff');
      expect(g.console()).toContain(`${cpus} of ${cpus} CPUs up`);
    });
  }

  it('reports the KVM signature leaf through CPUID', async () => {
    const g = await startProbe({ append: 'scenario=hello' });
    await g.waitForEvent('hello');
    const sig = g.events.find((e) => e.event === 'cpuid' && e.fields.leaf === 0x40000000);
    expect(sig?.fields).toMatchObject({ eax: 0x40000001, ebx: 0x4b4d564b, ecx: 0x564b4d56, edx: 0x4d });
    await g.vm.ended;
  });

  it('the echo shell echoes typed input and answers commands', async () => {
    const g = await startProbe({ cpus: 2, append: 'scenario=echo' });
    await g.waitForConsole('probe> ');
    const word = `line-${Math.random().toString(36).slice(2, 10)}`;
    g.vm.sendConsole(`${word}\r`);
    await g.waitForConsole(`unknown command: ${word}`);
    g.vm.sendConsole('cpus\r');
    await g.waitForConsole('cpus up: 2');
    g.vm.sendConsole('poweroff\r');
    const exit = await g.vm.ended;
    expect(exit.kind).toBe('poweroff');
  });

  it('ends the VM with a reason when the guest triple-faults', async () => {
    const g = await startProbe({ append: 'scenario=fault' });
    const exit = await g.vm.ended;
    // On PVM the emulator may give up first: an internal error instead of KVM_EXIT_SHUTDOWN.
    expect(['triple-fault', 'internal-error']).toContain(exit.kind);
    expect(exit.message).toMatch(/vCPU 0/);
  });

  it('pauses and resumes a running guest', async () => {
    const g = await startProbe({ append: 'scenario=echo' });
    await g.waitForConsole('probe> ');
    await g.vm.pause();
    expect(g.vm.state).toBe('paused');
    g.vm.resume();
    g.vm.sendConsole('cpus\r');
    await g.waitForConsole('cpus up: 1');
    await g.vm.stop();
  });
});
