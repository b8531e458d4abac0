// Real KVM: a hostile guest (probe `scenario=flood`: ttyS0 THR writes as fast as it can, random
// port I/O of every width, unmapped MMIO, garbage and malformed lines on ttyS1, on every vCPU)
// leaves the VMM's memory bounded (console bytes go through a fixed 64 KiB ring, dropped with a
// counter if nobody keeps up; over-long ttyS1 lines are cut and counted), does not stop another
// VM in the same process from answering its shell, and can be stopped within 1 s.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { kvmAvailable, startProbe, type Watched } from '../support/probe.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A flooding VM whose console is only counted, never kept (the VMM must not keep it either). */
async function startFlood(ms: number, cpus = 2) {
  const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus, memoryMiB: 64, append: `scenario=flood ms=${ms}`, name: 'flood' }), probeHost());
  const vm = await VirtualMachine.start(spec);
  const seen = { consoleBytes: 0, agentBytes: 0, events: [] as AgentEvent[], tail: '' };
  vm.on('console', (b) => {
    seen.consoleBytes += b.length;
    seen.tail = (seen.tail + Buffer.from(b.subarray(-400)).toString('latin1')).slice(-400);
  });
  vm.on('agent-bytes', (b) => { seen.agentBytes += b.length; });
  vm.on('agent', (e) => { if (seen.events.length < 100) seen.events.push(e); });
  return { vm, seen };
}

const figures: string[] = [];

describe.skipIf(!kvmAvailable)('a flooding guest', () => {
  let bystander: Watched;

  beforeAll(async () => {
    bystander = await startProbe({ cpus: 1, append: 'scenario=echo', name: 'bystander' });
    await bystander.waitForConsole('probe> ');
  });

  afterAll(async () => {
    if (bystander?.vm.state === 'running') {
      bystander.vm.sendConsole('poweroff\r');
      await bystander.vm.ended;
    }
    process.stdout.write(`flood:\n${figures.map((f) => `  ${f}`).join('\n')}\n`);
  });

  async function bystanderAnswers(timeoutMs: number): Promise<number> {
    const token = `still-here-${Math.random().toString(36).slice(2, 8)}`;
    const t = performance.now();
    bystander.vm.sendConsole(`${token}\r`);
    await bystander.waitForConsole(`unknown command: ${token}`, timeoutMs);
    return performance.now() - t;
  }

  it('a finite flood runs to its end and the guest reports through the garbage', async () => {
    const { vm, seen } = await startFlood(1500);
    const exit = await vm.ended;
    expect(exit.kind, `${exit.message}; console ${JSON.stringify(seen.tail)}`).toBe('poweroff');
    const report = seen.events.find((e) => e.event === 'flood');
    expect(report, 'the @u1 flood line survives the ttyS1 garbage').toBeDefined();
    expect(report!.fields.pio!).toBeGreaterThan(0);
    expect(report!.fields.mmio!).toBeGreaterThan(0);
    expect(vm.agentReader.malformed, 'malformed and over-long ttyS1 lines are counted').toBeGreaterThan(0);
    expect(seen.tail).toMatch(/flood: 2 CPUs, \d+ us: \d+ ttyS0 bytes/);
    figures.push(`ms=1500, 2 vCPUs: power-off; guest counted ${report!.fields.tty_bytes} ttyS0 bytes, ${report!.fields.agent_bytes} ttyS1 bytes, ` +
      `${report!.fields.pio} port and ${report!.fields.mmio} MMIO accesses; host got ${seen.consoleBytes} console bytes ` +
      `(${vm.droppedConsoleBytes} dropped), ${vm.agentReader.malformed} malformed ttyS1 lines`);
    expect(await bystanderAnswers(10_000)).toBeLessThan(10_000);
  }, 60_000);

  it('an endless flood: memory stays bounded, the other VM answers, and stop() takes under 1 s', async () => {
    gc();
    const rss0 = process.memoryUsage().rss;
    const { vm, seen } = await startFlood(0);
    const rss: number[] = [];
    const answers: number[] = [];
    const t0 = performance.now();
    while (performance.now() - t0 < 6000) {
      answers.push(await bystanderAnswers(5000));
      rss.push(process.memoryUsage().rss);
      await sleep(200);
    }
    expect(vm.state, 'the flood is still running').toBe('running');
    // Console input for a guest that does not read it is bounded too (MAX_PENDING_INPUT).
    for (let i = 0; i < 3; i++) vm.sendConsole(new Uint8Array(MiB).fill(0x61));
    expect(vm.droppedConsoleInputBytes, 'input beyond 1 MiB pending is dropped and counted').toBeGreaterThanOrEqual(2 * MiB - 64);
    expect(seen.consoleBytes, 'console output arrives').toBeGreaterThan(0);
    const peak = Math.max(...rss);
    const firstHalf = Math.max(...rss.slice(0, rss.length >> 1));
    // Guest RAM (64 MiB) is allocated up front; beyond it, nothing may grow with the flood.
    expect((peak - rss0) / MiB, 'RSS growth during the flood').toBeLessThan(64 + 48);
    expect((peak - firstHalf) / MiB, 'no growth in the second half of the flood').toBeLessThan(24);
    const t = performance.now();
    const exit = await vm.stop();
    const stopMs = performance.now() - t;
    expect(exit.kind).toBe('stopped');
    expect(stopMs, 'stop() of a flooding VM').toBeLessThan(1000);
    const rate = seen.consoleBytes / ((performance.now() - t0) / 1000);
    figures.push(`ms=0 (endless), 2 vCPUs, 6 s: console ${seen.consoleBytes} bytes (${Math.round(rate / 1024)} KiB/s), ${vm.droppedConsoleBytes} dropped, ` +
      `${seen.agentBytes} ttyS1 bytes, ${vm.agentReader.malformed} malformed lines, ${vm.droppedConsoleInputBytes} of 3 MiB typed input dropped; RSS +${((peak - rss0) / MiB).toFixed(1)} MiB peak ` +
      `(+${((peak - firstHalf) / MiB).toFixed(1)} MiB in the second half); bystander answered ${answers.length} times, slowest ${Math.max(...answers).toFixed(0)} ms; ` +
      `stop() took ${stopMs.toFixed(0)} ms`);
    expect(await bystanderAnswers(5000)).toBeLessThan(5000);
  }, 60_000);
});
