// `unhalt selftest` as a user runs it, on this host's KVM: the knob checks judged where the KVM can
// show them (all three on hardware semantics, in the nested lane's L1; halt polling alone on PVM,
// the others "not judged" with why), a kvm-unit-tests test and two vmexit exits under Unhalt and
// QEMU, the report as JSON and Markdown; bad input refused before anything runs; SIGINT mid-run.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildKvmUnitTests } from '../../native/guest/kvm-unit-tests/build.mjs';
import type { SelftestReport } from '../../electron/selftest/report.ts';
import { kvmBackend } from '../../electron/vmm/host.ts';
import { runCli, UNHALT_BIN } from '../support/cli.ts';
import { hardwareKvm } from '../support/kvm-semantics.ts';
import { kvmAvailable } from '../support/probe.ts';
import { guestScaled, scaled } from '../support/time-scale.ts';

const dir = mkdtempSync(join(tmpdir(), 'unhalt-selftest-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(() => { buildKvmUnitTests(); }, scaled(300_000));

describe.skipIf(!kvmAvailable)('unhalt selftest on this host\'s KVM', () => {
  it('judges the knobs this KVM can show, runs smptest and two vmexit exits under both VMMs, and reports it all', async () => {
    const json = join(dir, 'report.json');
    const r = await runCli(['selftest', '--only', 'smptest', '--exits', 'cpuid,inl_from_qemu', '--format', 'json', '--output', json], { killAfterMs: guestScaled(600_000) });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(readFileSync(json, 'utf8')) as SelftestReport;
    expect(report.verdict).toBe('pass');
    expect(r.stderr).toContain(`unhalt: ${report.summary}`);
    expect(report.host.kvm).toBe(kvmBackend());
    expect(report.host.kvmParameters.kvm?.halt_poll_ns).toMatch(/^\d+$/);
    expect(report.host.conditions.kernel).toBe((await import('node:os')).release());
    const verdicts = Object.fromEntries(report.checks.map((c) => [c.name, c.verdict]));
    if (hardwareKvm()) {
      expect(verdicts).toEqual({ 'halt polling': 'pass', 'cpu-pm': 'pass', 'pv-unhalt kicks': 'pass' });
      expect(report.checks.find((c) => c.name === 'cpu-pm')!.seen).toMatch(/; on: 0$/);
    } else {
      expect(verdicts).toEqual({ 'halt polling': 'pass', 'cpu-pm': 'not judged', 'pv-unhalt kicks': 'not judged' });
      expect(report.checks.find((c) => c.name === 'pv-unhalt kicks')!.seen).toBe('not judged on this host: KVM hypercalls hang a vCPU on PVM');
    }
    expect(report.checks.find((c) => c.name === 'halt polling')!.seen).toMatch(/^halt-poll-ns=0: [1-9]\d* halt exits, no polls; 2 ms: \d+ halt exits, poll hit rate \d+%$/);
    expect(report.suite.ran).toBe(true);
    expect(report.suite.source).toMatch(/^built from \//);
    expect(report.suite.rows.map((x) => [x.test, x.unhalt, x.qemu])).toEqual([['smptest', 'PASS', 'PASS']]);
    expect(report.suite.vmexit.map((v) => v.exit)).toEqual(['cpuid', 'inl_from_qemu']);
    for (const v of report.suite.vmexit) {
      expect(v.unhalt, v.exit).toBeGreaterThan(0);
      expect(v.qemu, v.exit).toBeGreaterThan(0);
    }
    // The same run as Markdown on stdout: what a user pastes.
    const md = await runCli(['selftest', '--only', 'smptest', '--exits', 'none', '--no-qemu'], { killAfterMs: guestScaled(600_000) });
    expect(md.code, md.stderr).toBe(0);
    expect(md.stdout).toMatch(/^# Unhalt selftest, \d{4}-\d\d-\d\dT[\d:]+Z\n\n\*\*PASS: /);
    expect(md.stdout).toContain('(QEMU not run: nothing to judge them against)');
    expect(md.stdout).toContain('| smptest | PASS (');
  }, guestScaled(1_200_000));

  it('SIGINT mid-run: the run in progress is killed, exit 130, no report', async () => {
    const out = join(dir, 'cancelled.md');
    const child = spawn(process.execPath, [UNHALT_BIN, 'selftest', '--only', 'ioapic', '--exits', 'none', '--no-qemu', '--output', out], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const seen = new Promise<void>((resolve) => child.stderr.on('data', (d) => { stderr += d; if (stderr.includes('selftest: kvm-unit-tests: ioapic')) resolve(); }));
    const code = new Promise<number | null>((resolve) => child.on('close', resolve));
    await seen;
    // The `unhalt run` of ioapic it started (a child of the selftest's process).
    const children = () => readdirSync(`/proc/${child.pid}/task`).flatMap((t) => readFileSync(`/proc/${child.pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
    const deadline = performance.now() + scaled(20_000);
    while (children().length === 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const runs = children();
    expect(runs.length, 'the test run under Unhalt was started').toBeGreaterThan(0);
    child.kill('SIGINT');
    expect(await code, stderr).toBe(130);
    expect(stderr).toContain('SIGINT: the selftest was cancelled; no report');
    expect(existsSync(out)).toBe(false);
    const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
    expect(runs.filter(alive), 'its runs went with it').toEqual([]);
  }, guestScaled(600_000));
});

/** Runs `unhalt selftest ARGS` and expects one line matching `message`, exit 1 and nothing on stdout. */
async function refused(args: string[], message: RegExp, env?: NodeJS.ProcessEnv): Promise<void> {
  const r = await runCli(['selftest', ...args], env ? { env } : {});
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr.trim().split('\n').filter((l) => !l.startsWith('unhalt: selftest: building'))).toHaveLength(1);
  expect(r.stderr.trim().split('\n').at(-1)).toMatch(message);
  expect(r.stdout).toBe('');
}

describe('unhalt selftest refuses bad input in one line, exit 1, before anything runs', () => {
  const cases: [string[], RegExp, NodeJS.ProcessEnv?][] = [
    [['--format', 'csv'], /^unhalt: --format must be md or json, got "csv"$/],
    [['--no-suite', '--only', 'smptest'], /^unhalt: --no-suite runs no kvm-unit-tests: drop --kvm-unit-tests, --only and --exits, or --no-suite$/],
    [['--exits', 'cpuid,nosuch'], /^unhalt: --exits: "nosuch" is not one of vmexit's exits \(cpuid, /],
    [['--output', '/nonexistent/dir/r.md'], /^unhalt: cannot write the selftest report \/nonexistent\/dir\/r.md: the folder \/nonexistent\/dir does not exist$/],
    [[], /^unhalt: selftest needs KVM: UNHALT_KVM_DEVICE names \/nonexistent\/kvm, a path that does not exist\. To fix: /, { UNHALT_KVM_DEVICE: '/nonexistent/kvm' }],
  ];
  for (const [args, message, env] of cases) it(args.join(' ') || 'no KVM', () => refused(args, message, env), scaled(60_000));

  // Judged against the suite, which is read once KVM is known to be there.
  it.skipIf(!kvmAvailable)('an unknown test, a suite that is not there', async () => {
    await refused(['--only', 'nosuch'], /^unhalt: --only: no test nosuch in the suite's x86\/unittests.cfg \(/);
    await refused(['--kvm-unit-tests', '/nonexistent/kut.tar.gz'], /^unhalt: --kvm-unit-tests \/nonexistent\/kut.tar.gz: no such file or folder; give the suite's source tarball/);
  }, scaled(120_000));
});
