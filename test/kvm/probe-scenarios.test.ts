// The probe guest's measuring and hostile scenarios on real KVM (docs/guest-contract.md): ipi, timer,
// spinlock and flood report sane values; live probes keep reporting until stopped; the ACPI power
// button ends an echo shell; a hypercall that hangs the vCPU (PVM) is still stopped promptly.
// Values are checked for shape and internal consistency only: absolute timings depend on the host
// (on PVM a blocked vCPU wakes milliseconds late).
import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../electron/vmm/agent/line-protocol.ts';
import { hardwareKvm, onPvm as pvm } from '../support/kvm-semantics.ts';
import { kvmAvailable, startProbe } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

// Which branch the hypercall check takes is asked positively; in the nested lane it must be hardware.
if (!pvm) hardwareKvm();

/**
 * A workload's length in guest time, longer on a slow host: under emulation a guest does far
 * less in a millisecond, and a window that is plenty on hardware can pass with nothing done.
 */
const workloadMs = (ms: number) => Math.min(scaled(ms), 20 * ms);

/** p50 <= p99 <= max (and min <= p50, min <= mean <= max where the event has them), all positive. */
function expectOrderedLatency(f: AgentEvent['fields']) {
  expect(f.p50_ns).toBeGreaterThan(0);
  expect(f.p50_ns).toBeLessThanOrEqual(f.p99_ns!);
  expect(f.p99_ns).toBeLessThanOrEqual(f.max_ns!);
  if (f.min_ns !== undefined) {
    expect(f.min_ns).toBeGreaterThan(0);
    expect(f.min_ns).toBeLessThanOrEqual(f.p50_ns!);
  }
  if (f.mean_ns !== undefined) {
    expect(f.mean_ns).toBeGreaterThanOrEqual(f.min_ns!);
    expect(f.mean_ns).toBeLessThanOrEqual(f.max_ns!);
  }
}

async function runToEnd(cpus: number, append: string, config?: Record<string, unknown>) {
  const g = await startProbe({ cpus, append, config });
  const exit = await g.vm.ended;
  expect(g.events.find((e) => e.event === 'fault')).toBeUndefined();
  expect(exit.kind).toBe('poweroff');
  expect(g.events.at(-1)?.event).toBe('poweroff');
  return g;
}

function event(events: AgentEvent[], name: string): AgentEvent['fields'] {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`no "@u1 ${name}"; events: ${events.map((x) => x.event).join(', ')}`);
  return e.fields;
}

describe.skipIf(!kvmAvailable)('probe guest scenarios on real KVM', () => {
  it('ipi: a round trip between two halted vCPUs, with percentiles', async () => {
    const g = await runToEnd(2, 'scenario=ipi rounds=300');
    const f = event(g.events, 'ipi');
    expect(f.rounds).toBe(300);
    expectOrderedLatency(f);
    expect(g.console()).toContain('ipi: 300 round trips');
  });

  it('ipi with one vCPU says so instead of measuring', async () => {
    const g = await runToEnd(1, 'scenario=ipi');
    expect(event(g.events, 'ipi')).toEqual({ rounds: 0 });
  });

  it('timer: lateness of one-shot LAPIC timer wake-ups', async () => {
    const g = await runToEnd(1, 'scenario=timer count=200 period_us=500');
    const f = event(g.events, 'timer');
    expect(f).toMatchObject({ count: 200, period_us: 500 });
    expectOrderedLatency(f);
  });

  for (const pv of [false, true]) {
    it(`spinlock with kvm-pv-unhalt=${pv ? 'on' : 'off'}: hand-offs between 2 vCPUs`, async () => {
      // spin=16: short enough that PV waiters do halt (a hold is 2 us) on any host.
      const ms = workloadMs(500);
      const g = await runToEnd(2, `scenario=spinlock ms=${ms} spin=16`, { cpuFeatures: { 'kvm-pv-unhalt': pv } });
      const f = event(g.events, 'spinlock');
      expect(f).toMatchObject({ ms, cpus: 2, pv: pv ? 1 : 0 });
      expect(f.handoffs).toBeGreaterThan(0);
      expect(f.handoffs_per_s).toBeGreaterThan(0);
      expect(f.handoff_p50_ns).toBeGreaterThan(0);
      expect(f.handoff_p50_ns).toBeLessThanOrEqual(f.handoff_p99_ns!);
      if (pv) {
        // A waiter that halted stays halted until the releaser kicks it.
        expect(f.halts).toBeGreaterThan(0);
        expect(f.kicks).toBeGreaterThan(0);
      } else {
        expect(f).toMatchObject({ halts: 0, kicks: 0 });
      }
    });
  }

  it('flood: hostile I/O from every vCPU, then a clean report and power-off', async () => {
    const ms = workloadMs(200);
    const g = await runToEnd(2, `scenario=flood ms=${ms}`);
    const f = event(g.events, 'flood');
    expect(f).toMatchObject({ ms, cpus: 2 });
    expect(f.us).toBeGreaterThanOrEqual(ms * 1000);
    expect(f.tty_bytes! + f.pio! + f.mmio!).toBeGreaterThan(0);
    expect(g.vm.agentReader.malformed).toBeGreaterThan(0); // counted and dropped, never trusted
  });

  it('live=1 ipi keeps reporting bursts until the host stops the VM', async () => {
    const g = await startProbe({ cpus: 2, append: 'scenario=ipi live=1 burst=20 interval_ms=500' });
    const deadline = Date.now() + scaled(10_000);
    while (g.events.filter((e) => e.event === 'ipi').length < 3 && Date.now() < deadline && g.vm.state === 'running') {
      await new Promise((r) => setTimeout(r, 100));
    }
    const bursts = g.events.filter((e) => e.event === 'ipi');
    expect(bursts.length).toBeGreaterThanOrEqual(3);
    for (const b of bursts) {
      expect(b.fields.rounds).toBe(20);
      expectOrderedLatency(b.fields);
    }
    expect(g.vm.state).toBe('running');
    const exit = await g.vm.stop();
    expect(exit.kind).toBe('stopped');
  });

  it('the ACPI power button ends an echo shell with a clean power-off', async () => {
    const g = await startProbe({ cpus: 2, append: 'scenario=echo' });
    await g.waitForConsole('probe> ');
    expect(await g.vm.pressPowerButton()).toBe(true); // the guest enabled PWRBTN_EN
    const exit = await g.vm.ended;
    expect(exit.kind).toBe('poweroff');
    expect(g.console()).toContain('power button');
    expect(g.events.map((e) => e.event).slice(-2)).toEqual(['powerbutton', 'poweroff']);
  });

  it('a hypercall returns on hardware-semantics KVM; on PVM it hangs the vCPU and stop() still ends the VM within 5 s', async () => {
    if (!pvm) {
      const g = await runToEnd(1, 'scenario=hypercall');
      expect(typeof event(g.events, 'hypercall_done').ret).toBe('number');
      return;
    }
    const g = await startProbe({ append: 'scenario=hypercall' });
    expect(event([await g.waitForEvent('hypercall')], 'hypercall').nr).toBe(5);
    await new Promise((r) => setTimeout(r, 300)); // let the vCPU enter the hypercall
    expect(g.vm.state).toBe('running');
    const t0 = performance.now();
    const exit = await g.vm.stop();
    expect(performance.now() - t0).toBeLessThan(scaled(5000));
    expect(exit.kind).toBe('stopped');
    expect(g.events.find((e) => e.event === 'hypercall_done')).toBeUndefined();
  });
});
