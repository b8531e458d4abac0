// kvm-unit-tests' x86 test list as the project reads it (the suite's own x86/run drives QEMU
// only): its x86/unittests.cfg parsed, each test judged in scope for our VMM or listed with the
// reason it is not, and a run's verdict read from its lines and exit status. Pure.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface UnitTest {
  name: string;
  file: string;
  smp: number;
  /** The guest's arguments (test_args; extra_params' -append). */
  args: string;
  /** Options for QEMU beyond the kernel's (qemu_params, extra_params without -append). */
  qemuParams: string;
  arch?: string;
  /** Seconds, as the suite writes them (its default is 90). */
  timeoutS: number;
  groups: string[];
  accel?: string;
}

/** Reads x86/unittests.cfg: one section per test, `key = value` lines, quotes around test_args. */
export function parseUnittestsCfg(text: string): UnitTest[] {
  const tests: UnitTest[] = [];
  let cur: Record<string, string> | undefined;
  let name = '';
  const flush = () => {
    if (!cur) return;
    const extra = cur.extra_params ?? cur.qemu_params ?? '';
    const append = /-append\s+(?:'([^']*)'|"([^"]*)"|(\S+))/.exec(extra);
    const args = [unquote(cur.test_args ?? ''), append ? (append[1] ?? append[2] ?? append[3] ?? '') : ''].filter(Boolean).join(' ');
    tests.push({
      name, file: cur.file ?? `${name}.flat`, smp: Number(cur.smp ?? 1) || 1, args,
      qemuParams: extra.replace(/-append\s+(?:'[^']*'|"[^"]*"|\S+)/, '').trim(),
      ...(cur.arch ? { arch: cur.arch } : {}), timeoutS: parseTimeout(cur.timeout),
      groups: (cur.groups ?? '').split(/\s+/).filter(Boolean), ...(cur.accel ? { accel: cur.accel } : {}),
    });
  };
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const section = /^\[(.+)\]$/.exec(line);
    if (section) {
      flush();
      name = section[1]!;
      cur = {};
      continue;
    }
    const kv = /^(\w+)\s*=\s*(.*)$/.exec(line);
    if (kv && cur) cur[kv[1]!] = kv[2]!;
  }
  flush();
  return tests;
}

function unquote(s: string): string {
  return s.replace(/^'(.*)'$/, '$1').replace(/^"(.*)"$/, '$1');
}

function parseTimeout(s: string | undefined): number {
  const m = /^(\d+)([smh]?)$/.exec(s ?? '');
  if (!m) return 90;
  return Number(m[1]) * ({ '': 1, s: 1, m: 60, h: 3600 } as Record<string, number>)[m[2]!]!;
}

/**
 * Why a test is out of scope for a VMM with x86-64 vCPUs like `-cpu host`, an in-kernel irqchip
 * that always offers x2APIC, and of QEMU's test devices isa-debug-exit and pc-testdev; undefined when in scope.
 */
export function outOfScope(t: UnitTest): string | undefined {
  if (t.arch === 'i386') return 'a 32-bit build (the lane builds the suite for x86_64)';
  if (t.accel === 'tcg') return 'runs under QEMU TCG only';
  if (/^hyperv_/.test(t.name) || t.groups.includes('hyperv')) return 'Hyper-V enlightenments: not offered';
  if (/^(vmx|svm)/.test(t.name) || t.groups.some((g) => g === 'vmx' || g === 'svm' || g === 'nested')) return 'nested virtualization: our vCPUs have no VMX/SVM';
  if (/-cpu\s+\S*-x2apic/.test(t.qemuParams)) return 'hides x2APIC: Unhalt always offers it';
  const device = /-device\s+([\w-]+)/.exec(t.qemuParams.replace(/-device\s+(isa-debug-exit|pc-testdev)\S*/g, ''));
  if (device) return `needs QEMU's ${device[1]} device`;
  const machine = /-machine\s+(\S+)/.exec(t.qemuParams);
  if (machine) return `needs QEMU machine option ${machine[1]}`;
  if (/-global\s|-overcommit\s|-numa\s|-object\s/.test(t.qemuParams)) return `needs QEMU options ${t.qemuParams}`;
  const cpu = /-cpu\s+([^,\s]+)/.exec(t.qemuParams);
  if (cpu && !['host', 'max', 'qemu64'].includes(cpu[1]!)) return `needs QEMU CPU model ${cpu[1]}`;
  return undefined;
}

export type Verdict = 'PASS' | 'FAIL' | 'SKIP' | 'TIMEOUT' | 'ERROR';

/** The exit statuses isa-debug-exit gives the suite's report() (QEMU's (V << 1) | 1). */
const STATUS = { pass: 1, fail: 3, skip: 77 } as const;

/**
 * A test's verdict from its serial output (PASS/FAIL/SKIP lines, a closing SUMMARY) and the exit
 * status its write to isa-debug-exit gave, as the suite's own runner reads it: status 1 passes
 * (vmexit prints figures, no SUMMARY), 77 skips, 3 fails; a FAIL line fails whatever the status.
 */
export function judge(output: string, status: number | null, timedOut: boolean): Verdict {
  if (timedOut) return 'TIMEOUT';
  if (/^FAIL[: ]/m.test(output) || /SUMMARY:.*\d+ (unexpected )?failures/.test(output) || status === STATUS.fail) return 'FAIL';
  if (status === STATUS.skip) return 'SKIP';
  if (status !== STATUS.pass) return 'ERROR';
  const summary = /SUMMARY: (\d+) tests(?:, (\d+) skipped)?/.exec(output);
  return summary && Number(summary[1]) > 0 && Number(summary[2] ?? 0) === Number(summary[1]) ? 'SKIP' : 'PASS';
}


/** The suite's tests, read from a built tree. */
export function unitTests(suiteDir: string): UnitTest[] {
  return parseUnittestsCfg(readFileSync(join(suiteDir, 'x86', 'unittests.cfg'), 'utf8'));
}
