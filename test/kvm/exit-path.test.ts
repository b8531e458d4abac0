// The exit path on real KVM (vcpu-worker.ts -> Vcpu.run -> exit-dispatch.ts -> devices): every
// userspace exit is counted once under its reason, MMIO reads of nothing read all ones, and
// KVM_RUN through the ordinary ioctl binding (UNHALT_KVM_RUN_STUB=0) runs the guest just as the
// stub does. Exact counts come from the probe's `mmio` scenario: nothing else in its boot exits
// on MMIO, so N reads are exactly N MMIO exits more than a run of none.
import { describe, expect, it } from 'vitest';
import { COUNTER } from '../../electron/vmm/shared/control.ts';
import { runCli } from '../support/cli.ts';
import { kvmAvailable, startProbe } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

/** Runs the probe to its power-off and returns vCPU 0's exit counters and the guest's events. */
async function runToEnd(append: string) {
  const g = await startProbe({ cpus: 1, append });
  const exit = await g.vm.ended;
  expect(exit.kind).toBe('poweroff');
  const counter = (which: number) => g.vm.control.counter(0, which);
  return {
    events: g.events,
    exits: counter(COUNTER.exits), io: counter(COUNTER.io), mmio: counter(COUNTER.mmio),
    hlt: counter(COUNTER.hlt), intr: counter(COUNTER.intr), other: counter(COUNTER.other),
  };
}

describe.skipIf(!kvmAvailable)('exit path on real KVM', () => {
  it('N reads of unmapped MMIO are exactly N more MMIO exits, each reading all ones; every exit is counted once', async () => {
    const none = await runToEnd('scenario=mmio count=0');
    const some = await runToEnd('scenario=mmio count=3000');
    const ev = some.events.find((e) => e.event === 'mmio');
    expect(ev?.fields).toMatchObject({ count: 3000, addr: 0xd0000000, value: 0xffffffff });
    expect(some.mmio - none.mmio).toBe(3000);
    for (const c of [none, some]) {
      // Exits that ended the VM count under `exits` only (NO_COUNTER): at most the one power-off.
      const named = c.io + c.mmio + c.hlt + c.intr + c.other;
      expect(c.exits - named).toBeGreaterThanOrEqual(0);
      expect(c.exits - named).toBeLessThanOrEqual(1);
    }
    // The `pio` scenario's writes are PIO exits, at least one each (boot and console add theirs).
    const pio0 = await runToEnd('scenario=pio count=0');
    const pio = await runToEnd('scenario=pio count=3000');
    expect(pio.io - pio0.io).toBeGreaterThanOrEqual(3000);
    expect(pio.io - pio0.io).toBeLessThan(3000 + 2000);
    expect(pio.mmio).toBe(pio0.mmio);
  }, scaled(120_000));

  it('KVM_RUN through the ioctl binding (UNHALT_KVM_RUN_STUB=0) runs PIO and MMIO exits as the stub does', async () => {
    for (const scenario of ['pio', 'mmio']) {
      const r = await runCli(['run', '--cpus', '1', '--append', `scenario=${scenario} count=2000`], { env: { ...process.env, UNHALT_KVM_RUN_STUB: '0' } });
      expect(r.stderr).not.toMatch(/error|failed/i);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(scenario === 'pio' ? 'pio: 2000 writes to port 0x80' : 'mmio: 2000 reads of 0xd0000000');
    }
  }, scaled(120_000));
});
