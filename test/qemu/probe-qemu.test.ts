// The probe guest under QEMU microvm (the side-by-side reference VMM): the same ELF, PVH boot,
// 1/2/4 vCPUs, ttyS0 on stdio and ttyS1 in a file. A clean power-off makes QEMU exit with status 1
// (isa-debug-exit, value 0); a reported exception with status 3 (value 1).
//
// QEMU details that matter here:
// - `-cpu host` aborts on PVM hosts with QEMU 7.2 ("failed to set MSR 0x10a"): ARCH_CAPABILITIES is
//   offered in CPUID but the MSR cannot be set, so it is turned off (harmless elsewhere).
// - microvm creates one ISA UART only; a second `-serial` is silently unused, so ttyS1 is an explicit
//   isa-serial device at 0x2f8/IRQ 3.
import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { qemuSkipReason, root, type Run, runQemu, startQemu } from '../support/qemu-probe.ts';
import { scaled } from '../support/time-scale.ts';

const skip = qemuSkipReason();
/** Each run's own limit: longer than the QEMU run's (qemu-probe.ts), both scaled by the host clock. */
const TEST_MS = scaled(30_000);
if (skip) console.warn(`skipping the QEMU probe-guest tests: ${skip}`);

function find(run: Run, event: string): AgentEvent {
  const e = run.events.find((x) => x.event === event);
  if (!e) throw new Error(`no "@u1 ${event}" on ttyS1; events: ${run.events.map((x) => x.event).join(', ')}; ttyS0: ${JSON.stringify(run.ttyS0.slice(-400))}; stderr: ${run.stderr.slice(-400)}`);
  return e;
}

/** The checks every clean run shares: SMP bring-up as asked, the banner, and a power-off last. */
function expectCleanRun(run: Run, smp: number): AgentEvent {
  const boot = find(run, 'boot');
  expect(boot.fields.cpus_found).toBe(smp);
  expect(boot.fields.cpus_up).toBe(smp);
  expect(boot.fields.tsc_khz).toBeGreaterThan(0);
  expect(run.ttyS0).toContain(`Unhalt probe guest: ${smp} of ${smp} CPUs up`);
  expect(run.events.find((e) => e.event === 'fault')).toBeUndefined();
  expect(run.events.at(-1)?.event).toBe('poweroff');
  expect(run.status).toBe(1); // isa-debug-exit with value 0
  return boot;
}

describe('probe guest under QEMU microvm', () => {
  beforeAll(() => {
    if (skip) return;
    spawnSync(process.execPath, [`${root}native/guest/build.mjs`, '--quiet'], { stdio: 'inherit' });
  }, 60_000);

  for (const smp of [1, 2, 4]) {
    it.skipIf(!!skip)(`scenario=hello with -smp ${smp}`, async () => {
      const run = await runQemu(smp, 'scenario=hello unhalt.pvm=1');
      expectCleanRun(run, smp);
      const leaf0 = run.events.find((e) => e.event === 'cpuid' && e.fields.leaf === 0x40000000);
      expect(leaf0?.fields).toMatchObject({ ebx: 0x4b4d564b, ecx: 0x564b4d56, edx: 0x4d }); // "KVMKVMKVM"
      expect(run.events.find((e) => e.event === 'cpuid' && e.fields.leaf === 0x40000001)).toBeDefined();
      expect(find(run, 'hello').fields.cpus_up).toBe(smp);
      console.log(`qemu -smp ${smp} hello: first ttyS0 output after ${run.firstOutputMs.toFixed(0)} ms, exit after ${run.totalMs.toFixed(0)} ms`);
    }, TEST_MS);

    it.skipIf(!!skip)(`scenario=pio count=1000 with -smp ${smp}`, async () => {
      const run = await runQemu(smp, 'scenario=pio count=1000 unhalt.pvm=1');
      expectCleanRun(run, smp);
      const pio = find(run, 'pio');
      expect(pio.fields.count).toBe(1000);
      expect(pio.fields.tsc_cycles).toBeGreaterThan(0);
    }, TEST_MS);

    it.skipIf(!!skip)(`scenario=idle ms=200 with -smp ${smp}`, async () => {
      const run = await runQemu(smp, 'scenario=idle ms=200 unhalt.pvm=1');
      const boot = expectCleanRun(run, smp);
      const idle = find(run, 'idle');
      expect(idle.fields.ms).toBe(200);
      // 1 ms period: at most one tick per period; a loaded host may coalesce some.
      expect(idle.fields.ticks).toBeGreaterThan(0);
      expect(idle.fields.ticks).toBeLessThanOrEqual(202);
      expect(idle.fields.tsc_cycles).toBeGreaterThanOrEqual(200 * boot.fields.tsc_khz!);
    }, TEST_MS);
  }

  it.skipIf(!!skip)('the echo shell answers over ttyS0 input (UART interrupt)', async () => {
    const q = startQemu(2, 'unhalt.pvm=1'); // echo is the default scenario
    await q.waitForOutput('probe> ');
    q.send('help\r');
    await q.waitForOutput('commands: help, cpus, poweroff');
    q.send('cpus\r\n');
    await q.waitForOutput('cpus up: 2');
    q.send('nope\x7fx\r');
    await q.waitForOutput('unknown command: nopx');
    q.send('poweroff\r');
    const run = await q.done;
    expect(find(run, 'echo').fields.ready).toBe(1);
    expectCleanRun(run, 2);
  }, TEST_MS);

  // The measuring scenarios: the same events as under Unhalt (shape only; timings are the host's).
  it.skipIf(!!skip)('scenario=ipi with -smp 2', async () => {
    const run = await runQemu(2, 'scenario=ipi rounds=300 unhalt.pvm=1');
    expectCleanRun(run, 2);
    const f = find(run, 'ipi').fields;
    expect(f.rounds).toBe(300);
    expect(f.min_ns).toBeGreaterThan(0);
    expect(f.min_ns).toBeLessThanOrEqual(f.p50_ns!);
    expect(f.p50_ns).toBeLessThanOrEqual(f.p99_ns!);
    expect(f.p99_ns).toBeLessThanOrEqual(f.max_ns!);
  }, TEST_MS);

  it.skipIf(!!skip)('scenario=timer', async () => {
    const run = await runQemu(1, 'scenario=timer count=200 unhalt.pvm=1');
    expectCleanRun(run, 1);
    const f = find(run, 'timer').fields;
    expect(f).toMatchObject({ count: 200, period_us: 1000 });
    expect(f.p50_ns).toBeLessThanOrEqual(f.p99_ns!);
    expect(f.p99_ns).toBeLessThanOrEqual(f.max_ns!);
  }, TEST_MS);

  it.skipIf(!!skip)('scenario=spinlock with -smp 2', async () => {
    const run = await runQemu(2, 'scenario=spinlock ms=500 spin=64 unhalt.pvm=1');
    expectCleanRun(run, 2);
    const f = find(run, 'spinlock').fields;
    expect(f).toMatchObject({ ms: 500, cpus: 2 });
    expect(f.handoffs).toBeGreaterThan(0);
    expect(f.handoff_p50_ns).toBeLessThanOrEqual(f.handoff_p99_ns!);
  }, TEST_MS);

  it.skipIf(!!skip)('scenario=flood ms=200 with -smp 2 still ends cleanly', async () => {
    const run = await runQemu(2, 'scenario=flood ms=200 unhalt.pvm=1');
    expectCleanRun(run, 2);
    expect(find(run, 'flood').fields).toMatchObject({ ms: 200, cpus: 2 });
  }, TEST_MS);

  it.skipIf(!!skip)('an unexpected exception is reported on ttyS1 and ends the run with status 3', async () => {
    const run = await runQemu(1, 'scenario=fault kind=ud2 unhalt.pvm=1');
    expect(find(run, 'fault').fields.vector).toBe(6);
    expect(run.events.at(-1)?.event).toBe('poweroff');
    expect(run.status).toBe(3); // isa-debug-exit with value 1
  }, TEST_MS);
});
