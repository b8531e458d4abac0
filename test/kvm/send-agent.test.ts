// VirtualMachine.sendAgent: host bytes reach the agent UART (ttyS1, COM2), paced by its 16-byte
// receive FIFO and bounded like console input. The probe guest's echo shell reads ttyS0 only, so
// exactly one FIFO's worth of ttyS1 input is taken and the rest waits; the Linux agent reads its commands this way
// (`run pipe loops=N`), which needs hardware-backed KVM to boot.
import { describe, expect, it } from 'vitest';
import { MAX_PENDING_INPUT } from '../../electron/vmm/runtime/guest-channels.ts';
import { kvmAvailable, startProbe } from '../support/probe.ts';

const FIFO = 16;

describe.skipIf(!kvmAvailable)('VirtualMachine.sendAgent', () => {
  it('fills the ttyS1 receive FIFO, keeps the rest pending, and bounds what is kept', async () => {
    const g = await startProbe({ append: 'scenario=echo' });
    try {
      await g.waitForConsole('probe> ');
      g.vm.sendAgent(new Uint8Array(MAX_PENDING_INPUT + 100).fill(0x61));
      expect(g.vm.droppedAgentInputBytes, 'past MAX_PENDING_INPUT: dropped and counted').toBe(100);
      // Room for one FIFO's worth opened up when the UART took it: the rest of this is dropped.
      g.vm.sendAgent('x'.repeat(100));
      expect(g.vm.droppedAgentInputBytes).toBe(100 + 100 - FIFO);
      // The console is another UART with its own queue: the echo shell still answers, and
      // none of the agent's bytes showed up there.
      g.vm.sendConsole('cpus\r');
      await g.waitForConsole('cpus up: 1');
      expect(g.vm.droppedConsoleInputBytes).toBe(0);
      expect(g.console()).not.toMatch(/aaaa|xxxx/);
    } finally {
      await g.vm.stop();
    }
    g.vm.sendAgent('after the end\n'); // ignored, never throws
  });
});
