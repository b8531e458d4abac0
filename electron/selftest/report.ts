// The selftest's report: what ran where, and the verdict, as Markdown a user can paste into an
// issue, or as JSON. Pure: the unit tests feed it fixed results.
import { conditionsLines } from '../experiments/conditions-format.ts';
import type { HostVirtualization } from '../vmm/host.ts';
import type { HostFacts } from './host-facts.ts';
import type { CheckResult } from './knob-checks.ts';
import type { SuiteReport } from './suite-checks.ts';

export interface SelftestReport {
  /** ISO time the selftest started. */
  startedAt: string;
  unhalt: { version: string; node: string };
  host: HostFacts;
  platform: HostVirtualization;
  checks: CheckResult[];
  suite: SuiteReport;
  /** fail: a knob check failed, or a test QEMU passes failed under Unhalt. */
  verdict: 'pass' | 'fail';
  summary: string;
}

const KVM_NAMES: Record<string, string> = {
  kvm_intel: 'kvm_intel (Intel VMX: hardware semantics)',
  kvm_amd: 'kvm_amd (AMD SVM: hardware semantics)',
  kvm_pvm: 'kvm_pvm (PVM: guest kernel mode emulated; not hardware semantics)',
  unknown: 'unknown',
};

/** The verdict and its one-line summary from the parts. */
export function verdictOf(checks: readonly CheckResult[], suite: SuiteReport): Pick<SelftestReport, 'verdict' | 'summary'> {
  const failed = checks.filter((c) => c.verdict === 'fail').map((c) => c.name);
  const regressions = suite.rows.filter((r) => r.regression).map((r) => r.test);
  const judged = checks.filter((c) => c.verdict !== 'not judged').length;
  const parts = [
    `${judged - failed.length} of ${judged} knob checks passed${checks.length > judged ? ` (${checks.length - judged} not judged on this host)` : ''}`,
    suite.ran
      ? `kvm-unit-tests: ${suite.rows.filter((r) => r.unhalt === 'PASS').length} of ${suite.rows.length} in scope pass under Unhalt`
        + (suite.rows.some((r) => r.qemu) ? `, ${suite.rows.filter((r) => r.qemu === 'PASS').length} under QEMU; ${regressions.length ? `failing under Unhalt only: ${regressions.join(', ')}` : 'every test QEMU passes passes under Unhalt'}` : ' (QEMU not run: nothing to judge them against)')
      : `kvm-unit-tests not run: ${suite.source}`,
  ];
  const fail = failed.length > 0 || regressions.length > 0;
  return { verdict: fail ? 'fail' : 'pass', summary: `${fail ? 'FAIL' : 'PASS'}: ${parts.join('; ')}${failed.length ? `; failed: ${failed.join(', ')}` : ''}` };
}

/** Text safe in a Markdown table cell: one line, no column breaks. */
const inCell = (text: string) => text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
const cell = (v: string | undefined, s: number | undefined) => (v === undefined ? '—' : `${v}${s !== undefined ? ` (${s} s)` : ''}`);

export function formatReport(r: SelftestReport): string {
  const params = Object.entries(r.host.kvmParameters)
    .map(([m, p]) => `- \`${m}\`: ${Object.entries(p).map(([k, v]) => `${k}=${v}`).join(', ') || 'none readable'}`);
  const platform = r.platform.platform === 'bare-metal' ? 'bare metal'
    : `${r.platform.platform === 'emulated' ? 'an emulated CPU' : 'a virtual machine'}${r.platform.hypervisor ? ` (${r.platform.hypervisor})` : ''}`;
  const lines = [
    `# Unhalt selftest, ${r.startedAt}`,
    '',
    `**${r.summary}**`,
    '',
    '## Host',
    `- CPU: ${r.host.conditions.cpuModel} (${r.host.cpuVendor}), ${r.host.hostCpus} CPUs, on ${platform}`,
    `- kernel: Linux ${r.host.conditions.kernel}`,
    `- KVM: ${KVM_NAMES[r.host.kvm] ?? r.host.kvm}`,
    ...conditionsLines(r.host.conditions).map((l) => `- ${l}`),
    `- Unhalt ${r.unhalt.version}, Node ${r.unhalt.node}`,
    '',
    'KVM module parameters:',
    ...(params.length ? params : ['- none readable']),
    '',
    '## The knobs\' mechanisms (probe guest, KVM\'s counters)',
    '',
    '| check | verdict | what a pass shows | seen |',
    '|---|---|---|---|',
    ...r.checks.map((c) => `| ${c.name} | ${c.verdict.toUpperCase()} | ${inCell(c.shows)} | ${inCell(c.seen)} |`),
    '',
    `## kvm-unit-tests (${inCell(r.suite.source)})`,
  ];
  if (r.suite.ran) {
    const withQemu = r.suite.rows.some((x) => x.qemu);
    lines.push('', `| test | Unhalt |${withQemu ? ' QEMU -cpu host |' : ''} what ended a run that did not pass |`, `|---|---|${withQemu ? '---|' : ''}---|`,
      ...r.suite.rows.map((x) => `| ${x.test}${x.regression ? ' **(fails only under Unhalt)**' : ''} | ${cell(x.unhalt, x.unhaltS)} |${withQemu ? ` ${cell(x.qemu, x.qemuS)} |` : ''} ${inCell(x.note ?? '')} |`));
    if (r.suite.outOfScope.length) lines.push('', `Out of scope: ${r.suite.outOfScope.map((o) => `${o.test} (${o.why})`).join('; ')}.`);
    if (r.suite.vmexit.length) {
      lines.push('', '### vmexit: TSC cycles per exit (one run each, after warm-up exits in the same VM)', '', '| exit | Unhalt | QEMU | Unhalt / QEMU |', '|---|---:|---:|---:|',
        ...r.suite.vmexit.map((v) => `| ${v.exit} | ${v.unhalt ?? '—'} | ${v.qemu ?? '—'} | ${v.unhalt !== undefined && v.qemu ? (v.unhalt / v.qemu).toFixed(2) : '—'} |`));
      const missing = r.suite.vmexit.filter((v) => v.note);
      if (missing.length) lines.push('', ...missing.map((v) => `- ${v.exit}: ${inCell(v.note!)}`));
    }
    if (r.suite.exitsLeftOut) lines.push('', `vmexit: ${r.suite.exitsLeftOut}.`);
  } else {
    lines.push('', 'Not run.');
  }
  return `${lines.join('\n')}\n`;
}
