// Test support: the probe guest under QEMU microvm (the side-by-side reference VMM), with the
// command line of bench/lib.ts qemuArgs: ttyS0 on stdio, ttyS1 in a file (microvm creates one
// ISA UART only, so ttyS1 is an explicit isa-serial device at 0x2f8/IRQ 3). A clean power-off
// makes QEMU exit with status 1 (isa-debug-exit, value 0); a reported exception with status 3
// (value 1).
//
// `-cpu host` aborts on PVM hosts with QEMU 7.2 ("failed to set MSR 0x10a"): ARCH_CAPABILITIES is
// offered in CPUID but the MSR cannot be set, so it is turned off (harmless elsewhere).
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type AgentEvent, parseAgentLine } from '../../electron/vmm/agent/line-protocol.ts';
import { scaled } from './time-scale.ts';

export const root = fileURLToPath(new URL('../../', import.meta.url));
const elfPath = `${root}assets/guests/probe.elf`;
const QEMU = 'qemu-system-x86_64';
/** QEMU is killed after this long unless the caller gives its own limit (a liveness deadline: scaled). */
const RUN_TIMEOUT_MS = scaled(25_000);

export function qemuSkipReason(): string | undefined {
  if (!existsSync('/dev/kvm')) return '/dev/kvm is absent';
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK);
  } catch {
    return 'no read/write access to /dev/kvm';
  }
  if (spawnSync(QEMU, ['--version']).error) return `${QEMU} is not on PATH`;
  return undefined;
}
export interface Run {
  status: number | null;
  signal: NodeJS.Signals | null;
  ttyS0: string;
  events: AgentEvent[];
  stderr: string;
  firstOutputMs: number;
  totalMs: number;
}

export interface Qemu {
  pid: number;
  /** SIGKILL: QEMU gone at once, as a crash would leave it. */
  kill(): void;
  output(): string;
  waitForOutput(text: string, timeoutMs?: number): Promise<void>;
  send(text: string): void;
  done: Promise<Run>;
}

/**
 * `machine`: microvm by default; `q35` (with SeaBIOS, which assigns the BARs) for a PCI bus reached
 * through 0xCF8/0xCFC, as ours is; `devices`: extra `-device` values (e.g. virtio-rng-pci); `args`:
 * any other options (e.g. a -qmp socket).
 */
export function startQemu(smp: number, append: string, timeoutMs = RUN_TIMEOUT_MS, opts: { machine?: 'microvm' | 'q35'; devices?: string[]; args?: string[] } = {}): Qemu {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-probe-qemu-'));
  const ttyS1 = join(dir, 'ttyS1.txt');
  const args = [
    '-machine', opts.machine ?? 'microvm', '-accel', 'kvm', '-cpu', 'host,-arch-capabilities',
    ...(opts.machine === 'q35' ? ['-nodefaults', '-no-user-config'] : []),
    ...(opts.devices ?? []).flatMap((d) => ['-device', d]),
    '-smp', String(smp), '-m', '128',
    '-display', 'none', '-monitor', 'none', '-no-reboot',
    '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', elfPath, '-append', append,
    '-serial', 'stdio',
    '-chardev', `file,id=ttyS1,path=${ttyS1}`, '-device', 'isa-serial,chardev=ttyS1,iobase=0x2f8,irq=3',
    ...(opts.args ?? []),
  ];
  const t0 = performance.now();
  const proc = spawn(QEMU, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let firstOutputMs = -1;
  const waiters = new Set<() => void>();
  proc.stdout.on('data', (b: Buffer) => {
    if (firstOutputMs < 0) firstOutputMs = performance.now() - t0;
    out += b.toString('latin1');
    for (const w of [...waiters]) w();
  });
  proc.stderr.on('data', (b: Buffer) => { err += b.toString('latin1'); });
  proc.stdin.on('error', () => {}); // QEMU may exit while we still write
  const killer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const done = new Promise<Run>((resolve, reject) => {
    proc.on('error', reject);
    proc.on('close', (status, signal) => {
      clearTimeout(killer);
      for (const w of [...waiters]) w();
      let raw = '';
      try {
        raw = readFileSync(ttyS1, 'latin1');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      const events = raw.split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object');
      resolve({ status, signal, ttyS0: out, events, stderr: err, firstOutputMs, totalMs: performance.now() - t0 });
    });
  });
  return {
    pid: proc.pid!,
    kill: () => { proc.kill('SIGKILL'); },
    output: () => out,
    send: (text) => { proc.stdin.write(text); },
    waitForOutput: (text, timeoutMs = scaled(20_000)) => new Promise<void>((resolve, reject) => {
      const check = () => {
        if (out.includes(text)) { cleanup(); resolve(); } else if (proc.exitCode !== null || proc.signalCode !== null) {
          cleanup();
          reject(new Error(`QEMU exited before ${JSON.stringify(text)}; ttyS0: ${JSON.stringify(out.slice(-400))}`));
        }
      };
      const timer = setTimeout(() => { cleanup(); reject(new Error(`timed out waiting for ${JSON.stringify(text)}`)); }, timeoutMs);
      const cleanup = () => { clearTimeout(timer); waiters.delete(check); };
      waiters.add(check);
      check();
    }),
    done,
  };
}

export const runQemu = (smp: number, append: string, timeoutMs?: number) => startQemu(smp, append, timeoutMs).done;

