// The kvm-unit-tests runner's own rules: unittests.cfg read as the suite writes it, the scope
// rules, and a verdict from a test's lines and its isa-debug-exit status.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runUnderUnhalt } from '../../electron/kvm-unit-tests/runner.ts';
import { judge, outOfScope, parseUnittestsCfg } from '../support/kvm-unit-tests.ts';

const CFG = `
# comment
[smptest3]
file = smptest.flat
smp = 3

[vmexit_cpuid]
file = vmexit.flat
test_args = 'cpuid'
groups = vmexit

[x2apic]
file = apic.flat
smp = 2
qemu_params = -cpu qemu64,+x2apic,+tsc-deadline
timeout = 30
groups = apic

[xapic]
file = apic.flat
qemu_params = -cpu qemu64,-x2apic,+tsc-deadline

[pit]
file = pit.flat
extra_params = -device pc-testdev -append 'a b'
timeout = 2m

[hv]
file = hyperv_synic.flat
qemu_params = -device hyperv-testdev

[ipi]
file = vmexit.flat
qemu_params = -machine pit=off

[t32]
file = taskswitch.flat
arch = i386
`;

describe('kvm-unit-tests runner', () => {
  const tests = parseUnittestsCfg(CFG);
  const t = (name: string) => tests.find((x) => x.name === name)!;

  it('reads each section: file, vCPUs, arguments, QEMU options, time-out', () => {
    expect(tests.map((x) => x.name)).toEqual(['smptest3', 'vmexit_cpuid', 'x2apic', 'xapic', 'pit', 'hv', 'ipi', 't32']);
    expect(t('smptest3')).toMatchObject({ file: 'smptest.flat', smp: 3, args: '', timeoutS: 90 });
    expect(t('vmexit_cpuid')).toMatchObject({ args: 'cpuid', groups: ['vmexit'], smp: 1 });
    expect(t('x2apic')).toMatchObject({ timeoutS: 30, qemuParams: '-cpu qemu64,+x2apic,+tsc-deadline' });
    expect(t('pit')).toMatchObject({ args: 'a b', qemuParams: '-device pc-testdev', timeoutS: 120 });
  });

  it('keeps in scope what we can run, and names why the rest is not', () => {
    expect(outOfScope(t('smptest3'))).toBeUndefined();
    expect(outOfScope(t('x2apic'))).toBeUndefined();
    expect(outOfScope(t('xapic'))).toBe('hides x2APIC: Unhalt always offers it');
    // pc-testdev is ours too (every test gets it, as the suite's runner gives it); hyperv-testdev is not.
    expect(outOfScope(t('pit'))).toBeUndefined();
    expect(outOfScope(t('hv'))).toBe("needs QEMU's hyperv-testdev device");
    expect(outOfScope(t('ipi'))).toBe('needs QEMU machine option pit=off');
    expect(outOfScope(t('t32'))).toMatch(/32-bit build/);
  });

  it('judges by the lines and the exit status: a FAIL line or status 3 fails, 77 skips, 1 passes', () => {
    expect(judge('PASS: a\nSUMMARY: 1 tests\n', 1, false)).toBe('PASS');
    expect(judge('PASS: a\nFAIL: b\nSUMMARY: 2 tests, 1 unexpected failures\n', 3, false)).toBe('FAIL');
    expect(judge('PASS: a\nSUMMARY: 1 tests\n', 3, false)).toBe('FAIL');
    expect(judge('FAIL: a\n', 1, false)).toBe('FAIL');
    expect(judge('SKIP: no rdtscp\nSUMMARY: 1 tests, 1 skipped\n', 77, false)).toBe('SKIP');
    expect(judge('SUMMARY: 2 tests, 2 skipped\n', 1, false)).toBe('SKIP');
    expect(judge('PASS: a\nSUMMARY: 1 tests\n', 1, true)).toBe('TIMEOUT');
    expect(judge('cpuid 1234\ninl_from_qemu 5678\n', 1, false)).toBe('PASS'); // vmexit: figures, no SUMMARY
    expect(judge('PASS: a\n', 2, false)).toBe('ERROR'); // the VMM failed before a report
    expect(judge('', 0, false)).toBe('ERROR');
  });

  it('ends a run once its output holds enough (a guest that prints on for minutes, like tscdeadline_latency)', async () => {
    // A real process in the VMM's place that prints a numbered line every 2 ms and never ends.
    const dir = mkdtempSync(join(tmpdir(), 'unhalt-enough-'));
    try {
      const script = join(dir, 'printer.mjs');
      writeFileSync(script, 'let i = 0; setInterval(() => process.stdout.write(`latency: ${i++}\\n`), 2);\n');
      const t0 = performance.now();
      const r = await runUnderUnhalt(dir, { name: 't', file: 't.flat', smp: 1, args: '', qemuParams: '', timeoutS: 60, groups: [] }, 60_000, {
        cli: [process.execPath, script], enough: (out) => (out.match(/^latency: \d+\n/gm)?.length ?? 0) >= 20,
      });
      expect(r.output.match(/^latency: \d+\n/gm)!.length).toBeGreaterThanOrEqual(20);
      expect(r.status).toBeNull(); // ended by us (SIGKILL), not by the 60 s time-out
      expect(r.verdict).not.toBe('TIMEOUT');
      expect(performance.now() - t0).toBeLessThan(30_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
