// The KVM community's own suite (kvm-unit-tests) under our VMM: built at test time from its
// source tarball (native/guest/kvm-unit-tests/build.mjs), its multiboot kernels booted by
// `unhalt run --kernel`. On any KVM, its SMP test passes under us; where KVM has hardware
// semantics (the nested lane's L1) a subset runs under QEMU `-cpu host` too, on the same KVM,
// and each test QEMU passes must pass under Unhalt.
import { beforeAll, describe, expect, it } from 'vitest';
import { buildKvmUnitTests } from '../../native/guest/kvm-unit-tests/build.mjs';
import { outOfScope, runUnderQemu, runUnderUnhalt, unitTests, type RunResult, type UnitTest } from '../support/kvm-unit-tests.ts';
import { hardwareKvm, NEEDS_HARDWARE } from '../support/kvm-semantics.ts';
import { kvmAvailable } from '../support/probe.ts';
import { guestScaled, scaled } from '../support/time-scale.ts';

/**
 * The subset CI runs under both VMMs: the tests QEMU passed in L1 in the whole table
 * (docs/kvm-unit-tests.md), a few seconds each there, and ioapic, which pc-testdev's IRQ lines drive.
 */
const SIDE_BY_SIDE = ['smptest', 'ioapic', 'smap', 'pku', 'eventinj', 'hypercall', 'idt_test', 'memory', 'setjmp', 'tsc', 'tsc_adjust',
  'pcid-enabled', 'pcid-disabled', 'pcid-asymmetric', 'rdpru', 'umip'];

let suite = '';
let tests: UnitTest[] = [];
const test = (name: string): UnitTest => tests.find((t) => t.name === name)!;
/** The suite's own time-out, grown with this host's guest slowdown, never past 10 min. */
const deadline = (t: UnitTest): number => Math.min(guestScaled(t.timeoutS * 1000), 600_000);
const said = (r: RunResult): string => `${r.verdict}, status ${r.status}, in ${(r.ms / 1000).toFixed(1)} s:\n${r.output.slice(-1200)}\n${r.stderr.slice(-600)}`;

describe('kvm-unit-tests (x86) under Unhalt', () => {
  beforeAll(() => {
    suite = buildKvmUnitTests();
    tests = unitTests(suite);
  }, scaled(300_000));

  it('reads x86/unittests.cfg: every test is in scope or listed with the reason it is not', () => {
    expect(tests.length).toBeGreaterThan(50);
    for (const name of [...SIDE_BY_SIDE, 'smptest3']) expect(test(name) && outOfScope(test(name)), name).toBeUndefined();
    expect(outOfScope(test('xapic'))).toBe('hides x2APIC: Unhalt always offers it');
    expect(outOfScope(test('vmx'))).toMatch(/nested virtualization/);
    expect(outOfScope(test('hyperv_synic'))).toMatch(/Hyper-V/);
    const listed = tests.filter((t) => outOfScope(t));
    console.log(`kvm-unit-tests: ${tests.length} x86 tests, ${tests.length - listed.length} in scope; out: ${listed.map((t) => `${t.name} (${outOfScope(t)})`).join('; ')}`);
  });

  it.skipIf(!kvmAvailable)('smptest and smptest3: a multiboot kernel brings up 2 and 3 vCPUs and its IPIs reach each', async () => {
    for (const name of ['smptest', 'smptest3']) {
      const t = test(name);
      const r = await runUnderUnhalt(suite, t, deadline(t));
      expect(r.verdict, said(r)).toBe('PASS');
      expect(r.output).toContain(`found ${t.smp} cpus`);
    }
  }, 2 * Math.min(guestScaled(90_000), 600_000) + 10_000);

  it.skipIf(!hardwareKvm())(`side by side with QEMU -cpu host on the same KVM (${SIDE_BY_SIDE.length} tests): each test QEMU passes passes under Unhalt`, async () => {
    const rows: string[] = [];
    let judged = 0;
    for (const name of SIDE_BY_SIDE) {
      const t = test(name);
      const ours = await runUnderUnhalt(suite, t, deadline(t));
      const qemu = await runUnderQemu(suite, t, deadline(t));
      rows.push(`| ${name} | ${ours.verdict} (${(ours.ms / 1000).toFixed(1)} s) | ${qemu.verdict} (${(qemu.ms / 1000).toFixed(1)} s) |`);
      if (qemu.verdict === 'PASS') {
        judged++;
        expect(ours.verdict, `${name} passes under QEMU; under Unhalt: ${said(ours)}`).toBe('PASS');
      } else console.log(`kvm-unit-tests: ${name} does not pass under QEMU here, so it judges nothing: ${said(qemu)}`);
    }
    console.log(`kvm-unit-tests side by side:\n| test | Unhalt | QEMU |\n|---|---|---|\n${rows.join('\n')}`);
    expect(judged, 'QEMU passes most of them here, or the check judges nothing').toBeGreaterThanOrEqual(SIDE_BY_SIDE.length / 2);
  }, SIDE_BY_SIDE.length * 2 * 600_000);
});

