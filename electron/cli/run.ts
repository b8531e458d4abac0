// `unhalt run`: boot one VM with ttyS0 on stdin/stdout.
import { existsSync, rmSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { checkBootFiles } from '../vmm/boot/boot-file-checks.ts';
import { VM_OPTIONS, configFromOptions } from '../vmm/config/cli-args.ts';
import { resolveMachine, resolveMachineWithoutKvm, type ResolvedMachine } from '../vmm/config/resolve.ts';
import { checkFitsThisHost } from '../vmm/config/host-fit.ts';
import { judgedAtStart } from '../vmm/config/host-rules.ts';
import { ConfigError, decimal, integer, type VmConfig } from '../vmm/config/vm-config.ts';
import { probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { defaultGuest } from '../vmm/guests-select.ts';
import { libraryVm } from './library-vm.ts';
import { hostKind } from '../vmm/host.ts';
import { VirtualMachine } from '../vmm/vm.ts';
import { firstVcpuCanRunOnMainThread } from '../vmm/runtime/main-thread-vcpu.ts';
import { isCleanEnd, type VmEnd } from '../vmm/runtime/vm-end.ts';
import { debugExitStatus } from '../vmm/config/device-config.ts';
import { prewarmVcpuWorkers, setIdleVcpuWorkerLimit } from '../vmm/vcpu/worker-pool.ts';
import { NdjsonStatsWriter } from '../vmm/telemetry/ndjson.ts';
import { DEFAULT_INTERVAL_MS, Sampler } from '../vmm/telemetry/sampler.ts';
import { OutputError, OutputStream } from '../service/output-file.ts';
import { EXIT_CODES, SIGNAL_EXIT_CODES, UsageError, parse, say } from './args.ts';
import { describeResolution } from './describe.ts';
import { setLongTimeout } from './long-timer.ts';
import { onStopSignals, type StopSignal } from './stop-signals.ts';
import { flushStdout, markStdoutProblemReported, onStdoutError, stdoutProblem } from './stdout.ts';

export const RUN_OPTIONS = {
  ...VM_OPTIONS,
  /** A VM of the library by name, instead of the VM options. */
  vm: { type: 'string' },
  'agent-log': { type: 'string' },
  stats: { type: 'string' },
  'stats-interval': { type: 'string' },
  timeout: { type: 'string' },
  'dry-run': { type: 'boolean' },
} as const;

/** A year: longer is surely a typo, and says so instead of running "forever". */
export const MAX_TIMEOUT_S = 365 * 24 * 3600;

const CTRL_A = 0x01;

export async function runCommand(argv: string[]): Promise<number> {
  let vm: VirtualMachine;
  let timeoutS: number | undefined;
  let agentLog: OutputStream | undefined;
  let statsOut: OutputStream | undefined;
  let statsIntervalMs = DEFAULT_INTERVAL_MS;
  const created: string[] = [];
  try {
    const { values } = parse(argv, RUN_OPTIONS);
    if (values.timeout !== undefined) {
      const bad = `--timeout must be a positive number of seconds, got "${values.timeout.slice(0, 40)}"`;
      try {
        timeoutS = decimal(values.timeout, '--timeout', 0, Number.MAX_SAFE_INTEGER);
      } catch {
        throw new UsageError(bad);
      }
      if (timeoutS <= 0) throw new UsageError(bad);
      if (timeoutS > MAX_TIMEOUT_S) throw new UsageError(`--timeout must be at most ${MAX_TIMEOUT_S} seconds (a year), got ${timeoutS}`);
    }
    let guestNote: string | undefined;
    if (values.vm !== undefined) {
      const given = Object.keys(VM_OPTIONS).filter((k) => values[k as keyof typeof VM_OPTIONS] !== undefined);
      if (given.length) throw new UsageError(`--vm runs the library's VM as it is saved; leave out ${given.map((k) => `--${k}`).join(', ')} (change the VM in the app, or run it without --vm)`);
    } else if (values.guest === undefined && values.kernel === undefined) {
      const chosen = defaultGuest(hostKind());
      values.guest = chosen.kind;
      if (chosen.kind === 'probe') guestNote = `using the probe guest: ${chosen.reason}`;
    }
    // A relative path on the command line means what it means in this shell: resolve it here,
    // because a configuration only ever holds absolute paths (checkBootPath).
    for (const key of ['kernel', 'initrd'] as const) {
      if (values[key] !== undefined && values[key].trim() !== '') values[key] = resolvePath(values[key]);
    }
    if (values.disk) values.disk = values.disk.map((d) => (d.trim() !== '' && !d.startsWith(',') ? resolvePath(d) : d));
    const config = values.vm !== undefined ? libraryVm(values.vm) : configFromOptions(values);
    const host = await hostFor(config, values['dry-run'] === true);
    const resolved = host ? resolveMachine(config, host) : resolveMachineWithoutKvm(config);
    // vCPU 0 starts on this thread while its worker is not needed yet (VirtualMachine's
    // firstVcpuOnMainThread): a guest that ends at once never waits for, nor pays for, a worker.
    // With --stats every vCPU has its own thread from the start, so each thread's CPU is its
    // vCPU's. Otherwise the workers boot now, while the boot files are read and the machine built.
    const vcpu0OnMainThread = values.stats === undefined && firstVcpuCanRunOnMainThread(resolved.spec);
    // One VM, then the process ends: a worker that leaves it is ended at once, as before workers
    // were reused (nothing waits in the pool for a VM that never comes).
    setIdleVcpuWorkerLimit(0);
    if (!vcpu0OnMainThread && !values['dry-run']) prewarmVcpuWorkers(resolved.spec.cpus);
    await checkBootFiles(config);
    if (values['dry-run']) {
      process.stdout.write(describeResolution(config, resolved));
      if (!host) say(`note: ${judgedAtStart(config, resolved.resolution.features)}`);
      return EXIT_CODES.ok;
    }
    if (values['stats-interval'] !== undefined) statsIntervalMs = integer(values['stats-interval'], '--stats-interval (ms)', 10, 60_000);
    // Opened now (so a path that cannot be written is refused before anything starts) but
    // emptied only once the VM runs: a failed start leaves an existing file as it was.
    if (values['agent-log']) {
      if (!existsSync(values['agent-log'])) created.push(values['agent-log']);
      agentLog = await OutputStream.open(values['agent-log'], 'the agent log');
    }
    if (values.stats) {
      if (!existsSync(values.stats)) created.push(values.stats);
      statsOut = await OutputStream.open(values.stats, 'the stats file');
    }
    vm = await VirtualMachine.start(resolved.spec, { firstVcpuOnMainThread: vcpu0OnMainThread });
    if (guestNote) say(`note: ${guestNote}`);
    for (const w of resolved.resolution.warnings) say(`warning: ${w}`);
  } catch (e) {
    const known = e instanceof UsageError || e instanceof ConfigError || e instanceof OutputError;
    say(known ? e.message : `cannot start the VM: ${(e as Error).message}`);
    await agentLog?.close();
    await statsOut?.close();
    // Nothing started: leave no log or stats file behind that this run created.
    for (const f of created) rmSync(f, { force: true });
    return EXIT_CODES.badInput;
  }

  // Listeners first (the guest's first bytes are emitted from the next macrotask), then empty
  // the files; their streams hold writes back until then.
  vm.on('console', (bytes) => process.stdout.write(bytes));
  // A closed stdout (`unhalt run | head`) ends the run like Ctrl-A x; a full disk ends it too,
  // and is reported: console output is being lost.
  const offStdout = onStdoutError(() => void vm.stop());
  let outputFailed = false;
  const onOutputError = () => { outputFailed = true; void vm.stop(); };
  if (agentLog) {
    vm.on('agent-bytes', (bytes) => agentLog!.stream.write(bytes));
    agentLog.onError(onOutputError);
  }
  let statsWriter: NdjsonStatsWriter | undefined;
  if (statsOut) {
    statsWriter = new NdjsonStatsWriter(statsOut.stream);
    statsOut.onError(onOutputError);
    const sampler = Sampler.forVm(vm, { intervalMs: statsIntervalMs });
    if (!sampler.kvmStats.available) say(`note: ${sampler.kvmStats.reason}; writing the VMM's own counters only`);
    statsWriter.attach(sampler);
  }
  await agentLog?.begin();
  await statsOut?.begin();
  const detachInput = attachInput(vm);

  let timedOut = false;
  const cancelTimer = timeoutS === undefined ? undefined : setLongTimeout(() => { timedOut = true; void vm.stop(); }, timeoutS * 1000);
  let stoppedBy: StopSignal | undefined;
  const offSignals = onStopSignals((signal) => { stoppedBy = signal; void vm.stop(); });

  const end: VmEnd = await vm.ended;
  cancelTimer?.();
  offSignals();
  detachInput();
  await statsWriter?.close();
  await agentLog?.close();
  await statsOut?.close();
  await flushStdout();
  offStdout();

  const problems = [stdoutProblem(), agentLog?.failure(), statsOut?.failure()].filter((p): p is string => p !== undefined);
  for (const p of problems) say(p);
  if (stdoutProblem()) markStdoutProblemReported();
  return exitCode(end, { stoppedBy, timedOut, timeoutS, outputFailed: outputFailed || problems.length > 0 });
}

/** Which ending wins: what the user asked (a signal, --timeout), then the VM's own end, then lost output. */
function exitCode(end: VmEnd, how: { stoppedBy?: StopSignal; timedOut: boolean; timeoutS?: number; outputFailed: boolean }): number {
  if (how.stoppedBy) {
    say(`${how.stoppedBy}: stopped the VM`);
    return SIGNAL_EXIT_CODES[how.stoppedBy];
  }
  if (how.timedOut) {
    say(`timeout: stopped the VM after ${how.timeoutS} s`);
    return EXIT_CODES.timeout;
  }
  // QEMU's isa-debug-exit status: the guest's own verdict (kvm-unit-tests: 1 pass, 3 fail), which
  // shares its numbers with the codes above, so a runner reads the guest's output as well.
  if (end.kind === 'debug-exit') {
    say(end.message);
    return debugExitStatus(end.value ?? 0);
  }
  if (!isCleanEnd(end.kind) && end.kind !== 'stopped') {
    say(`the VM failed: ${end.message}`);
    return EXIT_CODES.vmFailed;
  }
  return how.outputFailed ? EXIT_CODES.badInput : EXIT_CODES.ok;
}

export type { VmConfig, ResolvedMachine };

/** stdin -> ttyS0. On a TTY: raw mode, and Ctrl-A x quits (Ctrl-A Ctrl-A sends one Ctrl-A), as in QEMU. */
function attachInput(vm: VirtualMachine): () => void {
  const stdin = process.stdin;
  const tty = stdin.isTTY === true;
  let escape = false;
  const onData = (chunk: Buffer) => {
    if (!tty) { vm.sendConsole(chunk); return; }
    const out: number[] = [];
    for (const b of chunk) {
      if (escape) {
        escape = false;
        if (b === 0x78 /* x */) { void vm.stop(); return; }
        if (b === CTRL_A) out.push(CTRL_A);
        continue;
      }
      if (b === CTRL_A) escape = true;
      else out.push(b);
    }
    if (out.length) vm.sendConsole(Uint8Array.from(out));
  };
  if (tty) stdin.setRawMode(true);
  stdin.on('data', onData);
  stdin.on('error', () => { /* a closed stdin only ends input */ });
  return () => {
    stdin.off('data', onData);
    if (tty) stdin.setRawMode(false);
    stdin.pause();
    stdin.unref?.();
  };
}

/**
 * The host's KVM for the runnability check. Where it cannot be had, the configuration is judged
 * against what the OS tells and the user's own files are checked first, so that a mistake in them
 * is what is said, in the words the service and the wizard use (a missing kernel is a missing
 * kernel on any host); a dry run then goes on without KVM (undefined), a start says why it cannot.
 * Where KVM can be had, the files are checked later, while the vCPU workers start.
 */
async function hostFor(config: VmConfig, dryRun: boolean): Promise<HostCapabilities | undefined> {
  try {
    return probeHost();
  } catch (e) {
    checkFitsThisHost(config);
    await checkBootFiles(config);
    if (dryRun) return undefined;
    throw e;
  }
}
