// One kvm-unit-tests test run as a real process: under Unhalt's CLI and under QEMU on the same
// KVM with `-cpu host`, both with the devices the suite's own runner gives QEMU, the same vCPUs,
// arguments, memory and environment file (docs/kvm-unit-tests.md).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { judge, type UnitTest, type Verdict } from './suite.ts';

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
  /** How to start `unhalt`: the Node binary and the CLI's script (a test's, a bench's, or the running CLI's own). */
  cli: readonly [string, string];
  /** `--machine`; absent: the default (the newest version). */
  machine?: string;
  /** Give the suite its environment file (default true); without it the suite asks fw_cfg. */
  envFile?: boolean;
  /** `--timeout` in seconds: the VMM ends the run itself (exit status 124). */
  vmmTimeoutS?: number;
  /** `--halt-poll-ns`: this VM's halt polling (absent: the host's default). */
  haltPollNs?: number;
  /** Ends the run at once (SIGKILL). */
  signal?: AbortSignal;
  /** Ends the run (SIGKILL) once the guest's output so far holds what the caller needs. */
  enough?: (output: string) => boolean;
}

/** Runs one test under Unhalt's CLI; `timeoutMs` already scaled for this host. */
export function runUnderUnhalt(suiteDir: string, t: UnitTest, timeoutMs: number, opts: UnhaltRunOptions): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-kut-'));
  const argv = [...opts.cli, 'run', '--kernel', join(suiteDir, 'x86', t.file), '--cpus', String(t.smp), '--memory', String(MEMORY_MIB),
    ...(opts.envFile === false ? [] : ['--initrd', envFile(dir, t, MEMORY_MIB)]), ...TEST_DEVICES.map((a) => a === '-device' ? '--device' : a), ...(t.args ? ['--append', t.args] : []),
    ...(opts.machine ? ['--machine', opts.machine] : []), ...(opts.vmmTimeoutS ? ['--timeout', String(opts.vmmTimeoutS)] : []),
    ...(opts.haltPollNs !== undefined ? ['--halt-poll-ns', String(opts.haltPollNs)] : [])];
  return runProcess(argv, timeoutMs, opts.signal, opts.enough).finally(() => rmSync(dir, { recursive: true, force: true }));
}

/**
 * QEMU's CPU: `host`, like ours. A PVM host's KVM refuses QEMU's write of IA32_ARCH_CAPABILITIES
 * (MSR 0x10a: QEMU then aborts), so there it goes without that one feature.
 */
export const QEMU_CPU = existsSync('/sys/module/kvm_pvm') ? 'host,-arch-capabilities' : 'host';

/** Runs one test under QEMU on the same KVM, `-cpu host` like ours, with the suite's test devices; `enough` as for Unhalt. */
export function runUnderQemu(suiteDir: string, t: UnitTest, timeoutMs: number, signal?: AbortSignal, enough?: (output: string) => boolean): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-kut-'));
  const argv = ['qemu-system-x86_64', '-machine', 'pc,accel=kvm', '-cpu', QEMU_CPU, '-smp', String(t.smp), '-m', String(MEMORY_MIB),
    '-nodefaults', '-display', 'none', '-vga', 'none', '-serial', 'stdio', ...TEST_DEVICES,
    '-kernel', join(suiteDir, 'x86', t.file), '-initrd', envFile(dir, t, MEMORY_MIB), ...(t.args ? ['-append', t.args] : [])];
  return runProcess(argv, timeoutMs, signal, enough).finally(() => rmSync(dir, { recursive: true, force: true }));
}

function runProcess(argv: string[], timeoutMs: number, signal?: AbortSignal, enough?: (output: string) => boolean): Promise<RunResult> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let stderr = '';
    let satisfied = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      output += d;
      if (enough && !satisfied && enough(output)) {
        satisfied = true;
        child.kill('SIGKILL');
      }
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    const abort = () => child.kill('SIGKILL');
    signal?.addEventListener('abort', abort, { once: true });
    if (signal?.aborted) abort();
    child.on('error', (e) => { stderr += `\n${e.message}`; });
    child.on('close', (status) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
      resolve({ verdict: judge(output, status, timedOut), output, stderr, status, ms: performance.now() - t0 });
    });
  });
}

