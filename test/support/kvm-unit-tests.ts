// kvm-unit-tests' x86 tests run by the project itself (the suite's own x86/run drives QEMU only):
// its x86/unittests.cfg read, each test judged in scope or listed with the reason it is not, and
// run under Unhalt (the CLI, a real process) and under QEMU on the same KVM with `-cpu host`.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { UNHALT_BIN } from './cli.ts';

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

/**
 * The devices the suite's own runner (x86/run) gives QEMU for every test, in QEMU's spelling, which
 * we take too: its exit device and pc-testdev (the ioapic test's IRQ lines, the emulator's string
 * I/O port). Its pci-testdev (only vmexit's optional pci_* figures use it) neither VMM gets.
 */
const TEST_DEVICES = ['-device', 'isa-debug-exit,iobase=0xf4,iosize=0x4', '-device', 'pc-testdev'];

export interface RunResult {
  verdict: Verdict;
  /** The guest's serial output (the VMM's stdout). */
  output: string;
  /** The VMM's own messages. */
  stderr: string;
  status: number | null;
  ms: number;
}

/** The environment file the suite reads from its module: vCPUs and memory without fw_cfg. */
function envFile(dir: string, t: UnitTest, memoryMiB: number): string {
  const path = join(dir, 'env');
  writeFileSync(path, `NR_CPUS=${t.smp}\nMEMSIZE=${memoryMiB}\n`);
  return path;
}

const MEMORY_MIB = 256;

export interface UnhaltRunOptions {
  /** `--machine`; absent: the default (the newest version). */
  machine?: string;
  /** Give the suite its environment file (default true); without it the suite asks fw_cfg. */
  envFile?: boolean;
  /** `--timeout` in seconds: the VMM ends the run itself (exit status 124). */
  vmmTimeoutS?: number;
  /** `--halt-poll-ns`: this VM's halt polling (absent: the host's default). */
  haltPollNs?: number;
}

/** Runs one test under Unhalt's CLI; `timeoutMs` already scaled for this host. */
export function runUnderUnhalt(suiteDir: string, t: UnitTest, timeoutMs: number, opts: UnhaltRunOptions = {}): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-kut-'));
  const argv = [process.execPath, UNHALT_BIN, 'run', '--kernel', join(suiteDir, 'x86', t.file), '--cpus', String(t.smp), '--memory', String(MEMORY_MIB),
    ...(opts.envFile === false ? [] : ['--initrd', envFile(dir, t, MEMORY_MIB)]), ...TEST_DEVICES.map((a) => a === '-device' ? '--device' : a), ...(t.args ? ['--append', t.args] : []),
    ...(opts.machine ? ['--machine', opts.machine] : []), ...(opts.vmmTimeoutS ? ['--timeout', String(opts.vmmTimeoutS)] : []),
    ...(opts.haltPollNs !== undefined ? ['--halt-poll-ns', String(opts.haltPollNs)] : [])];
  return runProcess(argv, timeoutMs).finally(() => rmSync(dir, { recursive: true, force: true }));
}

/**
 * QEMU's CPU: `host`, like ours. A PVM host's KVM refuses QEMU's write of IA32_ARCH_CAPABILITIES
 * (MSR 0x10a: QEMU then aborts), so there it goes without that one feature.
 */
export const QEMU_CPU = existsSync('/sys/module/kvm_pvm') ? 'host,-arch-capabilities' : 'host';

/** Runs one test under QEMU on the same KVM, `-cpu host` like ours, with the suite's test devices. */
export function runUnderQemu(suiteDir: string, t: UnitTest, timeoutMs: number): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-kut-'));
  const argv = ['qemu-system-x86_64', '-machine', 'pc,accel=kvm', '-cpu', QEMU_CPU, '-smp', String(t.smp), '-m', String(MEMORY_MIB),
    '-nodefaults', '-display', 'none', '-vga', 'none', '-serial', 'stdio', ...TEST_DEVICES,
    '-kernel', join(suiteDir, 'x86', t.file), '-initrd', envFile(dir, t, MEMORY_MIB), ...(t.args ? ['-append', t.args] : [])];
  return runProcess(argv, timeoutMs).finally(() => rmSync(dir, { recursive: true, force: true }));
}

function runProcess(argv: string[], timeoutMs: number): Promise<RunResult> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { output += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (e) => { stderr += `\n${e.message}`; });
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ verdict: judge(output, status, timedOut), output, stderr, status, ms: performance.now() - t0 });
    });
  });
}

/** The suite's tests, read from a built tree. */
export function unitTests(suiteDir: string): UnitTest[] {
  return parseUnittestsCfg(readFileSync(join(suiteDir, 'x86', 'unittests.cfg'), 'utf8'));
}
