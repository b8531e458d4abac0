// What the nested lane runs inside L1, and how it reads the results that come back out.
import { E2E_VM_FILES, LINUX_E2E_FILES, hostHasKvm } from '../support/e2e-files.ts';

/**
 * The checks whose outcome depends on KVM's semantics, run inside L1 (docs/nested.md says why
 * each is there). The rest of the kvm lane (argument parsing, QEMU side by side on the same
 * semantics, flood and concurrency limits) behaves the same on PVM and is run there. Two groups:
 * the probe-guest files, and the Linux files, which boot the kit's kernel to user space in L2
 * (under them QEMU's emulated SVM now and then panics L1 itself: docs/nested.md).
 * `UNHALT_NESTED_LINUX=0` leaves the Linux files out.
 */
export const NESTED_PROBE_FILES = [
  'test/kvm/boot.test.ts',
  'test/kvm/knobs.test.ts',
  'test/kvm/probe-scenarios.test.ts',
  'test/kvm/faults.test.ts',
  'test/kvm/stats.test.ts',
  'test/kvm/send-agent.test.ts',
  'test/qemu/cpuid-vs-qemu.test.ts',
  'test/qemu/watch-qmp.test.ts',
  'test/kvm/service.test.ts',
  'test/kvm/cli.test.ts',
  'test/kvm/smp-start.test.ts',
  'test/kvm/virtio-rng.test.ts',
  'test/kvm/virtio-blk.test.ts',
  'test/kvm/virtio-net.test.ts',
  'test/kvm/pause-clock.test.ts',
  'test/kvm/halt-poll-prediction.test.ts',
  'test/kvm/kvm-unit-tests.test.ts',
  'test/kvm/selftest.test.ts',
];
/** The files that boot kvm-unit-tests' kernels: L1 gets the suite built on the host. */
export const KVM_UNIT_TESTS_FILES = ['test/kvm/kvm-unit-tests.test.ts', 'test/kvm/selftest.test.ts'];
export const NESTED_LINUX_FILES = [
  'test/linux/linux-boot.test.ts',
  'test/linux/linux-hw.test.ts',
  'test/linux/linux-disk.test.ts',
  'test/linux/linux-net.test.ts',
  'test/linux/linux-workloads.test.ts',
  'test/linux/import-boot.test.ts',
  ...LINUX_E2E_FILES,
];
/** Everything the lane knows how to run in L1 by default (the e2e files join where the host has no KVM). */
export const NESTED_FILES = [...NESTED_PROBE_FILES, ...NESTED_LINUX_FILES];

/**
 * About how long each file's checks take in an L1 with one CPU on an idle 2-CPU host (minutes,
 * nested run L in bench/history.md),
 * for splitting the files over several L1s. A file not listed counts as the longest listed.
 */
export const EXPECTED_MINUTES: Record<string, number> = {
  'test/kvm/boot.test.ts': 0.7,
  'test/kvm/knobs.test.ts': 1.5,
  'test/kvm/probe-scenarios.test.ts': 0.6,
  'test/kvm/faults.test.ts': 0.2,
  'test/kvm/stats.test.ts': 0.4,
  'test/kvm/send-agent.test.ts': 0.2,
  'test/qemu/cpuid-vs-qemu.test.ts': 1.0,
  'test/qemu/watch-qmp.test.ts': 0.8,
  'test/kvm/service.test.ts': 1.2,
  'test/kvm/cli.test.ts': 1.8,
  'test/kvm/smp-start.test.ts': 1.3,
  'test/kvm/virtio-rng.test.ts': 1.7,
  'test/kvm/virtio-blk.test.ts': 2.8,
  'test/kvm/virtio-net.test.ts': 2.8,
  'test/kvm/pause-clock.test.ts': 0.3,
  'test/kvm/halt-poll-prediction.test.ts': 1.5,
  // 12-07: 15 tests under both VMMs in 74 s, smptest/smptest3 under us in 20 s.
  'test/kvm/kvm-unit-tests.test.ts': 2,
  // 12-07: 107 s (six probe boots, smptest and two vmexit exits under both VMMs, a SIGINT, refusals).
  'test/kvm/selftest.test.ts': 2,
  'test/linux/linux-boot.test.ts': 4,
  'test/linux/linux-hw.test.ts': 6.5,
  'test/linux/linux-disk.test.ts': 3,
  'test/linux/linux-net.test.ts': 3.5,
  'test/linux/linux-workloads.test.ts': 8,
  'test/linux/import-boot.test.ts': 4,
  // Not yet timed in L1: one boot of the built-in Linux, ~1 min of load.
  'test/e2e/linux-vm-page.test.ts': 4,
  // The full own-guest set (npm run test:own-guest): 12-06, L1 beside another on the Xeon host.
  'test/linux/import-ab.test.ts': 4,
  'test/e2e/import-compare.test.ts': 9,
  // The UI files, where the host has no KVM (2026-12-03, from each file's start in L1's console).
  'test/e2e/app.test.ts': 2.7,
  'test/e2e/chart-figures.test.ts': 1.5,
  'test/e2e/halt-histograms.test.ts': 1.5,
  // Not yet timed in L1: ~35 s here, most of it waiting for samples (real time in L1 too).
  'test/e2e/chart-drawing.test.ts': 4,
  'test/e2e/compare.test.ts': 3,
  // Not yet timed in L1: four probe boots and a tune started and cancelled.
  'test/e2e/compare-own.test.ts': 3,
  'test/e2e/device-telemetry.test.ts': 2,
  'test/e2e/fields.test.ts': 2.7,
  'test/e2e/net.test.ts': 0.8,
  'test/e2e/virtio-blk.test.ts': 2.1,
  'test/e2e/virtio-rng.test.ts': 1.2,
  'test/e2e/vm-manage.test.ts': 3,
  'test/e2e/wizard-net.test.ts': 1.7,
  'test/e2e/tune.test.ts': 6.5,
};

/**
 * The files split over `shards` L1s so that they end about together: longest first, each to the
 * L1 with the least work so far (the ~50 s each L1 pays per lane to start its vitest is left out:
 * every L1 gets files of every lane as the lists stand). Every
 * file goes to exactly one L1; an L1 may get none (more L1s than files); order within one is the
 * order of `files`.
 */
/** A file's expected minutes in L1; one not listed counts as the longest listed. */
const expectedMinutes = (f: string): number => EXPECTED_MINUTES[f] ?? Math.max(...Object.values(EXPECTED_MINUTES));

export function splitFiles(files: string[], shards: number): string[][] {
  const cost = expectedMinutes;
  const bins = Array.from({ length: Math.max(1, shards) }, () => ({ files: [] as string[], minutes: 0 }));
  for (const f of [...files].sort((a, b) => cost(b) - cost(a) || files.indexOf(a) - files.indexOf(b))) {
    const bin = bins.reduce((a, b) => (b.minutes < a.minutes ? b : a));
    bin.files.push(f);
    bin.minutes += cost(f);
  }
  return bins.map((b) => b.files.sort((x, y) => files.indexOf(x) - files.indexOf(y)));
}

/**
 * How long the L1s may take for their checks, in minutes: half as long again as the busiest L1's
 * expected time and 5 minutes more, never under 45 (`override`, UNHALT_NESTED_CHECKS_MINUTES,
 * sets it). It follows the selection, so a longer list never meets a deadline made for a shorter.
 */
export function checksMinutes(parts: string[][], override?: string): number {
  if (override) return Number(override);
  const busiest = Math.max(0, ...parts.map((p) => p.reduce((sum, f) => sum + expectedMinutes(f), 0)));
  return Math.max(45, Math.ceil(busiest * 1.5 + 5));
}

/** The kernel command-line words that carry one L1's part of the selection into it (its init reads unhalt.* words). */
export function l1Append(files: string[], tests?: string): string {
  const lanes = lanesOf(files);
  return `unhalt.lanes=${lanes.join(',')} unhalt.filter=${files.join(',')}${tests ? ` unhalt.tests=${tests}` : ''}`;
}

/** The lanes (kvm, linux, e2e) a list of files belongs to, in first-seen order. */
export const lanesOf = (files: string[]): string[] => [...new Set(files.map(laneOf))];
const laneOf = (f: string): string => (f.startsWith('test/linux/') ? 'linux' : f.startsWith('test/e2e/') ? 'e2e' : 'kvm');

/**
 * What L1 runs: the files, their lanes, and `UNHALT_NESTED_TESTS`, a vitest `-t` pattern (no
 * spaces: it travels as one kernel command-line word) that narrows the run to matching checks —
 * for working on one check by hand; the other checks of the files are then skipped, not failed.
 */
export function innerSelection(env = process.env): { files: string[]; lanes: string[]; tests?: string; append: string } {
  // UNHALT_NESTED_FILES (space-separated paths) replaces the list, e.g. to run one file in L1.
  // Where this host has no KVM, the UI files that start VMs run in L1 (their browser stays here);
  // UNHALT_NESTED_E2E=0 leaves them out, =1 takes them on any host.
  const e2e = env.UNHALT_NESTED_E2E === undefined || env.UNHALT_NESTED_E2E === '' ? !hostHasKvm(env) : env.UNHALT_NESTED_E2E !== '0';
  const files = env.UNHALT_NESTED_FILES?.split(/\s+/).filter(Boolean)
    ?? [...(env.UNHALT_NESTED_LINUX === '0' ? NESTED_PROBE_FILES : NESTED_FILES), ...(e2e ? E2E_VM_FILES : [])];
  const tests = env.UNHALT_NESTED_TESTS?.trim() || undefined;
  // It travels on L1's kernel command line, which kept only "agree" of "agree|pause" (run M):
  // letters, digits and . - _ arrive as they are.
  if (tests && !/^[\w.-]+$/.test(tests)) throw new Error(`UNHALT_NESTED_TESTS must be one word of letters, digits, '.', '-' and '_' (a vitest -t pattern): ${JSON.stringify(tests)}`);
  return { files, lanes: lanesOf(files), tests, append: l1Append(files, tests) };
}

/** A test file's path from the checkout's root ("test/kvm/boot.test.ts"), wherever the checkout is (L1's /project). */
export const repoPath = (path: string): string => path.replace(/^.*?\/(test\/)/, '$1');

export interface VitestJson {
  testResults: { name: string; assertionResults: { fullName: string; status: string; duration?: number | null; failureMessages?: string[] }[] }[];
}

/** The selected files no report has results for (a file vitest never got to, or did not find). */
export function filesWithoutResults(files: string[], reports: VitestJson[]): string[] {
  const ran = new Set(reports.flatMap((r) => r.testResults).map((f) => repoPath(f.name)));
  return files.filter((f) => !ran.has(f));
}

export interface InnerReport {
  totals: { passed: number; failed: number; skipped: number };
  failures: string[];
  skips: string[];
  markdown: string;
}

/** One row per check with its result and time in L1; failures and skips named. */
export function summarizeInner(reports: VitestJson[]): InnerReport {
  const totals = { passed: 0, failed: 0, skipped: 0 };
  const failures: string[] = [];
  const skips: string[] = [];
  const rows: string[] = ['| file | check | result | s |', '| --- | --- | --- | ---: |'];
  for (const file of reports.flatMap((r) => r.testResults)) {
    const short = repoPath(file.name);
    for (const t of file.assertionResults) {
      const name = `${short}: ${t.fullName}`;
      if (t.status === 'passed') totals.passed++;
      else if (t.status === 'failed') { totals.failed++; failures.push(`${name}: ${(t.failureMessages ?? []).join(' ').split('\n')[0]}`); }
      else { totals.skipped++; skips.push(name); }
      rows.push(`| ${short} | ${t.fullName.replace(/\|/g, '\\|')} | ${t.status} | ${((t.duration ?? 0) / 1000).toFixed(1)} |`);
    }
  }
  return { totals, failures, skips, markdown: `${rows.join('\n')}\n` };
}
