// `unhalt selftest`'s report from fixed results (electron/selftest/report.ts) and the host facts it
// reads (host-facts.ts): the verdict rule (a failed knob check or a test QEMU passes failing under
// us fails it; "not judged" does not), the Markdown a user shares, /proc/cpuinfo and module
// parameters as read.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cpuVendor, moduleParameters } from '../../electron/selftest/host-facts.ts';
import type { CheckResult } from '../../electron/selftest/knob-checks.ts';
import { formatReport, verdictOf, type SelftestReport } from '../../electron/selftest/report.ts';
import type { SuiteReport } from '../../electron/selftest/suite-checks.ts';

const dirs: string[] = [];
afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

const check = (name: string, verdict: CheckResult['verdict']): CheckResult => ({ name, shows: `${name} works`, verdict, seen: `${name}: seen` });
const suite = (rows: SuiteReport['rows'], extra: Partial<SuiteReport> = {}): SuiteReport => ({ source: 'built from /srv/kut.tar.gz', ran: true, rows, outOfScope: [], vmexit: [], ...extra });
const row = (test: string, unhalt: SuiteReport['rows'][number]['unhalt'], qemu?: SuiteReport['rows'][number]['unhalt']) =>
  ({ test, unhalt, unhaltS: 1.5, ...(qemu ? { qemu, qemuS: 2.5 } : {}), regression: qemu === 'PASS' && unhalt !== 'PASS' });

describe('the selftest verdict', () => {
  it('passes when every judged check passes and no test fails only under Unhalt; "not judged" counts neither way', () => {
    const v = verdictOf([check('halt polling', 'pass'), check('cpu-pm', 'not judged')], suite([row('smptest', 'PASS', 'PASS'), row('pmu', 'FAIL', 'FAIL')]));
    expect(v.verdict).toBe('pass');
    expect(v.summary).toBe('PASS: 1 of 1 knob checks passed (1 not judged on this host); kvm-unit-tests: 1 of 2 in scope pass under Unhalt, 1 under QEMU; every test QEMU passes passes under Unhalt');
  });

  it('fails on a failed check, naming it, and on a test QEMU passes that fails under Unhalt, naming that', () => {
    const a = verdictOf([check('halt polling', 'fail'), check('cpu-pm', 'pass')], suite([]));
    expect(a.verdict).toBe('fail');
    expect(a.summary).toMatch(/^FAIL: 1 of 2 knob checks passed; .*; failed: halt polling$/);
    const b = verdictOf([check('halt polling', 'pass')], suite([row('ioapic', 'TIMEOUT', 'PASS'), row('tsc', 'PASS', 'PASS')]));
    expect(b.verdict).toBe('fail');
    expect(b.summary).toContain('failing under Unhalt only: ioapic');
  });

  it('without QEMU the suite judges nothing, and a suite that could not run is said with why', () => {
    expect(verdictOf([], suite([row('pmu', 'FAIL')]))).toEqual({ verdict: 'pass', summary: 'PASS: 0 of 0 knob checks passed; kvm-unit-tests: 0 of 1 in scope pass under Unhalt (QEMU not run: nothing to judge them against)' });
    const none = verdictOf([check('halt polling', 'pass')], { source: 'no kvm-unit-tests source tarball in /x; give --kvm-unit-tests TARBALL', ran: false, rows: [], outOfScope: [], vmexit: [] });
    expect(none).toEqual({ verdict: 'pass', summary: 'PASS: 1 of 1 knob checks passed; kvm-unit-tests not run: no kvm-unit-tests source tarball in /x; give --kvm-unit-tests TARBALL' });
  });
});

describe('the report', () => {
  const checks = [check('halt polling', 'pass'), check('cpu-pm', 'not judged')];
  const s = suite([row('smptest', 'PASS', 'PASS'), { ...row('ioapic', 'TIMEOUT', 'PASS'), note: 'Unhalt: TIMEOUT, a | b\nc' }], {
    outOfScope: [{ test: 'xapic', why: 'hides x2APIC' }], vmexit: [{ exit: 'inl_from_qemu', unhalt: 3000, qemu: 2500 }, { exit: 'cpuid', unhalt: 100 }],
    exitsLeftOut: 'vmcall: not run on PVM, where they hang a vCPU',
  });
  const report: SelftestReport = {
    startedAt: '2026-12-08T10:00:00Z', unhalt: { version: '0.1.0', node: '24.0.0' },
    host: {
      conditions: {
        kernel: '6.1.0', cpuModel: 'AMD EPYC 7B13', kvm: { haltPollNs: '200000', haltPollNsGrow: '2', haltPollNsShrink: '0' },
        governor: 'performance', boost: 'on', smt: 'on', mitigations: { spectre_v2: 'Mitigation: Retpolines' },
      },
      cpuVendor: 'AuthenticAMD', hostCpus: 8, kvm: 'kvm_amd', kvmParameters: { kvm: { halt_poll_ns: '200000' }, kvm_amd: { nested: '1', avic: '0' } },
    },
    platform: { platform: 'bare-metal', evidence: [] }, checks, suite: s, ...verdictOf(checks, s),
  };
  const md = formatReport(report);
  it('says the verdict first, then the host: CPU, kernel, which KVM, its module parameters', () => {
    expect(md.split('\n').slice(0, 3)).toEqual(['# Unhalt selftest, 2026-12-08T10:00:00Z', '', `**${report.summary}**`]);
    expect(md).toContain('- CPU: AMD EPYC 7B13 (AuthenticAMD), 8 CPUs, on bare metal\n- kernel: Linux 6.1.0\n- KVM: kvm_amd (AMD SVM: hardware semantics)\n'
      + '- host: AMD EPYC 7B13, kernel 6.1.0, governor performance, boost on, SMT on, load unknown\n- kvm: halt_poll_ns 200000, grow 2, shrink 0; mitigations: 1 listed, none vulnerable');
    expect(md).toContain('- `kvm`: halt_poll_ns=200000\n- `kvm_amd`: nested=1, avic=0');
  });
  it('gives each check with what it shows and what was seen, each test under both VMMs, vmexit with ratios', () => {
    expect(md).toContain('| halt polling | PASS | halt polling works | halt polling: seen |');
    expect(md).toContain('| cpu-pm | NOT JUDGED |');
    // A run's last line goes in its row, as one line with its column breaks escaped.
    expect(md).toContain('| ioapic **(fails only under Unhalt)** | TIMEOUT (1.5 s) | PASS (2.5 s) | Unhalt: TIMEOUT, a \\| b c |');
    expect(md).toContain('| smptest | PASS (1.5 s) | PASS (2.5 s) |  |');
    expect(md).toContain('Out of scope: xapic (hides x2APIC).');
    expect(md).toContain('| inl_from_qemu | 3000 | 2500 | 1.20 |');
    expect(md).toContain('| cpuid | 100 | — | — |');
    expect(md).toContain('vmexit: vmcall: not run on PVM, where they hang a vCPU.');
  });
});

describe('host facts', () => {
  it('reads the CPU vendor of /proc/cpuinfo, unknown when absent', () => {
    expect(cpuVendor('processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6248\n\nprocessor\t: 1\nvendor_id\t: other\n')).toBe('GenuineIntel');
    expect(cpuVendor('')).toBe('unknown');
  });
  it('reads every readable module parameter, sorted and trimmed; one it cannot read is left out; no folder: none', () => {
    const dir = mkdtempSync(join(tmpdir(), 'unhalt-params-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'halt_poll_ns'), '200000\n');
    writeFileSync(join(dir, 'avic'), 'N\n');
    mkdirSync(join(dir, 'not-a-file')); // reading it fails (EISDIR), as a root-only file would for a user
    expect(moduleParameters(dir)).toEqual({ avic: 'N', halt_poll_ns: '200000' });
    expect(Object.keys(moduleParameters(dir))).toEqual(['avic', 'halt_poll_ns']);
    expect(moduleParameters(join(dir, 'missing'))).toEqual({});
  });
});
