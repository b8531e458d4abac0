// Shared helpers of the side-by-side benchmarks: option parsing, child processes timed from the
// parent (with whole-process CPU time through wait4 rusage, as GNU time reports it), the QEMU
// microvm command line (qemuArgs), summaries and markdown tables. Nothing here asserts speed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { loadavg, tmpdir, cpus as hostCpus, release } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { type AgentEvent, parseAgentLine } from '../electron/vmm/agent/line-protocol.ts';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const UNHALT_BIN = join(ROOT, 'bin/unhalt.mjs');
export const PROBE_ELF = join(ROOT, 'assets/guests/probe.elf');
export const QEMU = process.env.QEMU ?? 'qemu-system-x86_64';
/** Where benchmark binaries are built (an ignored folder). */
export const BUILD_DIR = join(ROOT, 'build/bench');
const GNU_TIME = '/usr/bin/time';

/** PVM host (README, "Where it runs"): the probe guest then needs `unhalt.pvm=1` under QEMU. */
export const isPvmHost = (): boolean => existsSync('/sys/module/kvm_pvm');

export interface CommonOptions {
  runs: number;
  json?: string;
}

/** Parses `--runs N`, `--json FILE`, `--help` plus the script's own string options (with defaults). */
export function parseBenchArgs<K extends string>(usage: string, defaultRuns: number, defaults: Record<K, string>): CommonOptions & Record<K, string> {
  const extra: Record<string, { type: 'string'; default: string }> = {};
  for (const [k, v] of Object.entries<string>(defaults)) extra[k] = { type: 'string', default: v };
  const { values } = parseArgs({
    options: { ...extra, runs: { type: 'string', default: String(defaultRuns) }, json: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    process.stdout.write(usage);
    process.exit(0);
  }
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1) fail(`--runs must be a positive integer, got "${values.runs}"`);
  return { ...(values as unknown as Record<K, string>), runs, json: values.json as string | undefined };
}

export function fail(message: string): never {
  process.stderr.write(`bench: ${message}\n`);
  process.exit(1);
}

/** `--base DIR`: the `unhalt` of another checkout of this tree, to run alternately with ours. */
export function baseUnhaltBin(dir: string | undefined): string | undefined {
  if (!dir) return undefined;
  const bin = join(resolve(dir), 'bin/unhalt.mjs');
  if (!existsSync(bin)) fail(`${bin} does not exist: --base names a checkout of this tree`);
  return bin;
}

/** Refuses to start without /dev/kvm, the probe guest and (if asked) QEMU, with what to do. */
export function checkPrerequisites(opts: { qemu?: boolean; gcc?: boolean } = {}): void {
  if (!existsSync('/dev/kvm')) fail('/dev/kvm is absent: these benchmarks need KVM');
  if (!existsSync(PROBE_ELF)) fail(`${PROBE_ELF} is missing: run \`npm run build:guests\``);
  if (opts.qemu && spawnSync(QEMU, ['--version']).error) fail(`${QEMU} is not on PATH (apt-get install qemu-system-x86)`);
  if (opts.gcc && spawnSync(process.env.CC ?? 'gcc', ['--version']).error) fail('gcc is not on PATH');
}

// ---- statistics and tables ----

export interface Summary {
  n: number;
  median: number;
  min: number;
  max: number;
  mean: number;
}

export function summarize(xs: readonly number[]): Summary {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return { n: 0, median: NaN, min: NaN, max: NaN, mean: NaN };
  const median = n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
  return { n, median, min: s[0]!, max: s[n - 1]!, mean: s.reduce((a, b) => a + b, 0) / n };
}

/** Median of the per-pair ratios a[i] / b[i] (pairs ran back to back, so drift cancels). */
export function pairedRatio(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  return summarize(Array.from({ length: n }, (_, i) => a[i]! / b[i]!)).median;
}

export function fmt(x: number, digits = 1): string {
  return Number.isFinite(x) ? x.toFixed(digits) : '—';
}

export function markdownTable(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const line = (cells: readonly (string | number)[]) => `| ${cells.map(String).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n') + '\n';
}

// ---- host description ----

export function hostInfo(): Record<string, unknown> {
  const q = spawnSync(QEMU, ['--version'], { encoding: 'utf8' });
  return {
    date: new Date().toISOString(),
    node: process.version,
    qemu: q.error ? undefined : q.stdout.split('\n')[0],
    kernel: release(),
    pvm: isPvmHost(),
    hostCpus: hostCpus().length,
    cpuModel: hostCpus()[0]?.model,
    loadavgAtStart: loadavg().map((x) => Number(x.toFixed(2))),
  };
}

export function describeHost(info: Record<string, unknown>): string {
  return `host: ${info.hostCpus} CPUs (${info.cpuModel}), kernel ${info.kernel}${info.pvm ? ' (KVM is PVM)' : ''}, ` +
    `Node ${info.node}, ${info.qemu ?? 'no QEMU'}, load average at start ${(info.loadavgAtStart as number[]).join(' ')}\n`;
}

/** Ends a report: prints the load average now, and writes the JSON file if one was asked for. */
export function finishReport(file: string | undefined, data: unknown): void {
  process.stdout.write(`\nload average at the end: ${loadavg().map((x) => x.toFixed(2)).join(' ')}\n`);
  if (!file) return;
  writeFileSync(file, JSON.stringify({ ...(data as object), loadavgAtEnd: loadavg().map((x) => Number(x.toFixed(2))) }, null, 2) + '\n');
  process.stderr.write(`wrote ${file}\n`);
}

// ---- guests and their ttyS1 lines ----

export function agentEvents(text: string): AgentEvent[] {
  return text.split('\n').map(parseAgentLine).filter((e): e is AgentEvent => typeof e === 'object');
}

export function findEvent(events: readonly AgentEvent[], name: string, context: string): AgentEvent {
  const e = events.find((x) => x.event === name);
  if (!e) throw new Error(`${context}: no "@u1 ${name}" line on ttyS1 (saw: ${events.map((x) => x.event).join(', ') || 'nothing'})`);
  return e;
}

/** The QEMU microvm command line for the probe guest, ttyS0 on stdio, ttyS1 to a file if asked. */
export function qemuArgs(o: { smp: number; memoryMiB: number; append: string; ttyS1File?: string; threadNames?: boolean }): string[] {
  const append = isPvmHost() ? `${o.append} unhalt.pvm=1` : o.append;
  return [
    '-machine', 'microvm', '-accel', 'kvm',
    // QEMU 7.2 aborts on PVM ("failed to set MSR 0x10a"): ARCH_CAPABILITIES is offered in CPUID
    // but cannot be set; turning it off changes nothing else (see test/qemu/probe-qemu.test.ts).
    '-cpu', 'host,-arch-capabilities',
    '-m', String(o.memoryMiB), '-smp', String(o.smp),
    '-nographic', '-no-reboot',
    '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', PROBE_ELF, '-append', append,
    // microvm makes one ISA UART; ttyS1 must be an explicit isa-serial at 0x2f8 / IRQ 3.
    ...(o.ttyS1File ? ['-chardev', `file,id=ttyS1,path=${o.ttyS1File}`, '-device', 'isa-serial,chardev=ttyS1,iobase=0x2f8,irq=3'] : []),
    ...(o.threadNames ? ['-name', 'bench,debug-threads=on'] : []),
  ];
}

/** QEMU exits with 1 when the guest wrote 0 to isa-debug-exit: a clean power-off there. */
export const QEMU_CLEAN_EXIT = 1;

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `unhalt-bench-${prefix}-`));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

// ---- timed child processes ----

export interface Rusage {
  userMs: number;
  sysMs: number;
  maxRssKiB: number;
}

export interface TimedRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** From just before spawn() to the first '\n' on stdout (undefined: no line). */
  firstLineMs?: number;
  /** From just before spawn() to the process's exit. */
  totalMs: number;
  stdout: string;
  stderr: string;
  /** Whole-process CPU time of the command (all threads), from wait4 via GNU time. */
  rusage?: Rusage;
}

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  /** Wrap in GNU time (`-f '%U %S %M'`, wait4 rusage of the whole process) when it exists. */
  rusage?: boolean;
  /** Called once the command's own pid is known (the child of GNU time when wrapped). */
  onPid?: (pid: number) => void;
  /** Called when the first '\n' arrives on stdout, with ms since spawn. */
  onFirstLine?: (ms: number) => void;
}

export const haveGnuTime = (): boolean => existsSync(GNU_TIME);

/** Pid of the first child of `pid` (polls /proc until it appears or the parent is gone). */
async function childPid(pid: number, deadlineMs = 5000): Promise<number | undefined> {
  const t0 = performance.now();
  while (performance.now() - t0 < deadlineMs) {
    try {
      const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
      if (kids) return Number(kids.split(/\s+/)[0]);
    } catch {
      return undefined;
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  return undefined;
}

export function runTimed(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<TimedRun> {
  const wrap = opts.rusage === true && haveGnuTime();
  const rusageDir = wrap ? tempDir('rusage') : undefined;
  const rusageFile = rusageDir ? join(rusageDir, 'rusage') : undefined;
  const argv = wrap ? ['-o', rusageFile!, '-f', '%U %S %M', cmd, ...args] : [...args];
  const file = wrap ? GNU_TIME : cmd;
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(file, argv, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let firstLineMs: number | undefined;
    let totalMs = 0;
    child.stdout.on('data', (b: Buffer) => {
      if (firstLineMs === undefined && b.includes(0x0a)) {
        firstLineMs = performance.now() - t0;
        opts.onFirstLine?.(firstLineMs);
      }
      stdout += b.toString('latin1');
    });
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString('latin1'); });
    const killer = opts.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs) : undefined;
    if (opts.onPid && child.pid !== undefined) {
      if (wrap) void childPid(child.pid).then((p) => { if (p !== undefined) opts.onPid!(p); });
      else opts.onPid(child.pid);
    }
    child.on('exit', () => { totalMs = performance.now() - t0; });
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (killer) clearTimeout(killer);
      let rusage: Rusage | undefined;
      let status = code;
      if (rusageFile) {
        try {
          const lines = readFileSync(rusageFile, 'utf8').trim().split('\n');
          const [u, s, rss] = lines.at(-1)!.split(' ').map(Number);
          if (Number.isFinite(u) && Number.isFinite(s)) rusage = { userMs: u! * 1000, sysMs: s! * 1000, maxRssKiB: rss! };
          // GNU time passes the command's status through; a signal shows as "Command terminated by signal N".
          const sig = lines.find((l) => l.startsWith('Command terminated by signal'));
          if (sig) status = null;
        } catch { /* no rusage */ }
        removeDir(rusageDir!);
      }
      resolve({ code: status, signal, firstLineMs, totalMs, stdout, stderr, rusage });
    });
  });
}

// ---- per-thread CPU from /proc (for "what dominates") ----

export interface ThreadCpu {
  tid: number;
  name: string;
  /** user + system, ms */
  cpuMs: number;
  userMs: number;
  sysMs: number;
}

const CLK_TCK = 100; // USER_HZ on Linux (sysconf(_SC_CLK_TCK)); /proc times are in these ticks.

/** CPU time so far of every live thread of a process (/proc/PID/task/TID/stat, 10 ms resolution). */
export function threadCpu(pid: number): ThreadCpu[] {
  const out: ThreadCpu[] = [];
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const t of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const name = stat.slice(stat.indexOf('(') + 1, close);
      const f = stat.slice(close + 2).split(' '); // f[0] = state (field 3); utime = field 14, stime = 15
      const userMs = Number(f[11]) * 1000 / CLK_TCK;
      const sysMs = Number(f[12]) * 1000 / CLK_TCK;
      out.push({ tid: Number(t), name, cpuMs: userMs + sysMs, userMs, sysMs });
    } catch { /* the thread exited meanwhile */ }
  }
  return out;
}

/** Process-wide CPU time so far (all threads, live and exited), ms. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 1000 / CLK_TCK;
  } catch {
    return undefined;
  }
}

// ---- building the C reference ----

/** Builds a C file with gcc -O2 into build/bench/ when the binary is missing or older than the source. */
export function buildC(source: string, name: string): string {
  mkdirSync(BUILD_DIR, { recursive: true });
  const out = join(BUILD_DIR, name);
  const fresh = existsSync(out) && statSync(out).mtimeMs >= statSync(source).mtimeMs;
  if (!fresh) {
    const r = spawnSync(process.env.CC ?? 'gcc', ['-O2', '-Wall', '-Wextra', '-o', out, source], { encoding: 'utf8' });
    if (r.status !== 0) fail(`gcc failed on ${source}:\n${r.stderr ?? r.error?.message}`);
  }
  return out;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
