// kvm-unit-tests on the user's own KVM: every x86 test in scope under Unhalt and, where QEMU is
// installed, under QEMU `-cpu host` on the same KVM (a test QEMU passes must pass under us), then
// vmexit's cycles per exit under both. The suite comes from its upstream source tarball, built
// here with its own configure and make (native/guest/kvm-unit-tests/build.mjs).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { runUnderQemu, runUnderUnhalt, type RunResult } from '../kvm-unit-tests/runner.ts';
import { outOfScope, unitTests, type Verdict } from '../kvm-unit-tests/suite.ts';
import { exitCycles, VMEXIT_EXITS, vmexitTest } from '../kvm-unit-tests/vmexit.ts';
import type { KvmBackend } from '../vmm/host.ts';

export interface SuiteRow {
  test: string;
  unhalt: Verdict;
  unhaltS: number;
  qemu?: Verdict;
  qemuS?: number;
  /** FAIL under us where QEMU passed: a bug of ours until shown otherwise. */
  regression: boolean;
  /** What ended a run that did not pass: the VMM's last line, per VMM. */
  note?: string;
}

export interface VmexitRow {
  exit: string;
  unhalt?: number;
  qemu?: number;
  /** Why a VMM gave no figure (its verdict and last line). */
  note?: string;
}

export interface SuiteReport {
  /** Where the built suite is, or why none ran. */
  source: string;
  ran: boolean;
  rows: SuiteRow[];
  outOfScope: { test: string; why: string }[];
  vmexit: VmexitRow[];
  /** vmexit's exits left out here, with why. */
  exitsLeftOut?: string;
}

export interface SuiteOptions {
  /** A built suite (a folder with x86/unittests.cfg) or its source tarball; absent: the checkout's. */
  path?: string;
  /** Run QEMU beside us (default: when qemu-system-x86_64 is on PATH). */
  qemu: boolean;
  /** Only these tests (names of unittests.cfg). */
  only?: string[];
  /** vmexit's exits to time (default VMEXIT_EXITS); [] for none. */
  exits?: readonly string[];
  /** How to start `unhalt` (this CLI). */
  cli: readonly [string, string];
  /** The guest slowdown of this host (1 on hardware): time-outs grow with it. */
  slowdown: number;
  progress(line: string): void;
  signal?: AbortSignal;
}

/** The exits that hang a vCPU on PVM (a hypercall; the TSC-deadline timer armed ahead). */
const HANGS_ON_PVM = new Set(['vmcall', 'tscdeadline']);

/** The built suite's folder: the given one, or the tarball (given or the checkout's) built. */
export async function suiteFolder(given: string | undefined, log: (m: string) => void): Promise<{ dir?: string; why: string }> {
  // Relative to where the user is, not to the checkout the build runs in.
  const path = given === undefined ? undefined : resolve(given);
  if (path && existsSync(join(path, 'x86', 'unittests.cfg'))) return { dir: path, why: `built suite ${path}` };
  if (path && !existsSync(path)) return { why: `--kvm-unit-tests ${given}: no such file or folder; give the suite's source tarball (.tar.gz) or a built suite` };
  if (path && statSync(path).isFile() && !/\.tar\.gz$|\.tgz$/.test(path)) return { why: `--kvm-unit-tests ${given}: not a .tar.gz; give the suite's source tarball or a built suite (a folder with x86/unittests.cfg)` };
  const build = await import('../../native/guest/kvm-unit-tests/build.mjs');
  const before = process.env.UNHALT_KVM_UNIT_TESTS;
  if (path) process.env.UNHALT_KVM_UNIT_TESTS = path;
  try {
    // A folder given must hold the tarball: never the suite built earlier from another one.
    if (path) build.findTarball();
    // Built unless already built from this tarball (or carried here built, without its source).
    const dir = build.buildKvmUnitTests({ log });
    let from = dir;
    try { from = (JSON.parse(readFileSync(join(dir, 'stamp.json'), 'utf8')) as { tarball: string }).tarball; } catch { /* no stamp: the folder says it */ }
    return { dir, why: `built from ${from}` };
  } catch (e) {
    const message = (e as Error).message;
    if (/^no kvm-unit-tests source tarball/.test(message)) {
      return { why: `${message.replace(/: set UNHALT_KVM_UNIT_TESTS to the .tar.gz$/, '')}; give --kvm-unit-tests TARBALL (the upstream source, gitlab.com/kvm-unit-tests/kvm-unit-tests)` };
    }
    return { why: `kvm-unit-tests did not build (it needs the suite's source tarball, gcc and make): ${message.split('\n')[0]}` };
  } finally {
    if (path) {
      if (before === undefined) delete process.env.UNHALT_KVM_UNIT_TESTS;
      else process.env.UNHALT_KVM_UNIT_TESTS = before;
    }
  }
}

const secs = (r: RunResult) => Math.round(r.ms / 100) / 10;
/** The last line a run said (its stderr, else its output), for a run that did not pass. */
const lastLine = (r: RunResult) => (r.stderr.trim() || r.output.trim()).split('\n').at(-1)?.trim().slice(0, 200) ?? '';
/** Why a run did not pass: its first FAIL line, else the last line it said. */
const whyNot = (r: RunResult) => (r.verdict === 'FAIL' ? /^FAIL[: ].*$/m.exec(r.output)?.[0].trim().slice(0, 200) : undefined) ?? lastLine(r);
const noteOf = (who: string, r: RunResult | undefined) => (r && r.verdict !== 'PASS' && whyNot(r) ? `${who}: ${r.verdict}, ${whyNot(r)}` : undefined);

/** Runs the suite's tests in scope (and vmexit's exits) under Unhalt and, if asked, QEMU. */
export async function runSuiteChecks(dir: string, kvm: KvmBackend, o: SuiteOptions): Promise<Omit<SuiteReport, 'source' | 'ran'>> {
  const tests = unitTests(dir);
  const chosen = tests.filter((t) => !o.only || o.only.includes(t.name));
  const rows: SuiteRow[] = [];
  const out: SuiteReport['outOfScope'] = [];
  for (const t of chosen) {
    if (o.signal?.aborted) break;
    const why = outOfScope(t);
    if (why) {
      out.push({ test: t.name, why });
      continue;
    }
    // The suite's own time-out, grown with this host's slowdown, never past 10 minutes.
    const ms = Math.min(t.timeoutS * 1000 * Math.max(1, o.slowdown), 600_000);
    o.progress(`kvm-unit-tests: ${t.name}`);
    // The VMM's own --timeout too: a run a second signal leaves behind still ends by itself.
    const ours = await runUnderUnhalt(dir, t, ms, { cli: o.cli, vmmTimeoutS: Math.ceil(ms / 1000) + 10, ...(o.signal ? { signal: o.signal } : {}) });
    if (o.signal?.aborted) break;
    const theirs = o.qemu ? await runUnderQemu(dir, t, ms, o.signal) : undefined;
    const note = [noteOf('Unhalt', ours), noteOf('QEMU', theirs)].filter(Boolean).join('; ');
    rows.push({
      test: t.name, unhalt: ours.verdict, unhaltS: secs(ours),
      ...(theirs ? { qemu: theirs.verdict, qemuS: secs(theirs) } : {}),
      regression: theirs?.verdict === 'PASS' && ours.verdict !== 'PASS',
      ...(note ? { note } : {}),
    });
  }
  const vmexit: VmexitRow[] = [];
  const exits = o.exits ?? VMEXIT_EXITS;
  const leftOut = kvm === 'kvm_pvm' ? exits.filter((e) => HANGS_ON_PVM.has(e)) : [];
  for (const exit of exits) {
    if (o.signal?.aborted) break;
    if (leftOut.includes(exit)) continue;
    o.progress(`vmexit: ${exit}`);
    // Warm: the figure is a running VMM's, not one still starting (bench/vmexit.ts --warm).
    const t = vmexitTest(exit, true);
    const ms = Math.min(t.timeoutS * 1000 * Math.max(1, o.slowdown), 600_000);
    const oursRun = await runUnderUnhalt(dir, t, ms, { cli: o.cli, vmmTimeoutS: Math.ceil(ms / 1000) + 10, ...(o.signal ? { signal: o.signal } : {}) });
    if (o.signal?.aborted) break;
    const theirsRun = o.qemu ? await runUnderQemu(dir, t, ms, o.signal) : undefined;
    const ours = exitCycles(oursRun.output).get(exit);
    const theirs = theirsRun ? exitCycles(theirsRun.output).get(exit) : undefined;
    const note = [ours === undefined ? `Unhalt: ${oursRun.verdict}, ${lastLine(oursRun)}` : '', theirsRun && theirs === undefined ? `QEMU: ${theirsRun.verdict}, ${lastLine(theirsRun)}` : ''].filter(Boolean).join('; ');
    vmexit.push({ exit, ...(ours !== undefined ? { unhalt: ours } : {}), ...(theirs !== undefined ? { qemu: theirs } : {}), ...(note ? { note } : {}) });
  }
  return { rows, outOfScope: out, vmexit, ...(leftOut.length ? { exitsLeftOut: `${leftOut.join(', ')}: not run on PVM, where they hang a vCPU` } : {}) };
}
