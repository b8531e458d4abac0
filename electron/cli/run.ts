// `unhalt run`: boot one VM with ttyS0 on stdin/stdout.
import { createWriteStream, existsSync, rmSync, type WriteStream } from 'node:fs';
import { VM_OPTIONS, configFromOptions } from '../vmm/config/cli-args.ts';
import { resolveMachine, type ResolvedMachine } from '../vmm/config/resolve.ts';
import { ConfigError, type VmConfig } from '../vmm/config/vm-config.ts';
import { probeHost } from '../vmm/machine/host-caps.ts';
import { defaultGuest } from '../vmm/guests-select.ts';
import { hostKind } from '../vmm/host.ts';
import { isCleanExit, VirtualMachine, type VmExit } from '../vmm/vm.ts';
import { NdjsonStatsWriter } from '../vmm/telemetry/ndjson.ts';
import { DEFAULT_INTERVAL_MS, Sampler } from '../vmm/telemetry/sampler.ts';
import { EXIT_CODES, UsageError, parse, say } from './args.ts';
import { describeResolution } from './describe.ts';

const OPTIONS = {
  ...VM_OPTIONS,
  'agent-log': { type: 'string' },
  stats: { type: 'string' },
  'stats-interval': { type: 'string' },
  timeout: { type: 'string' },
  'dry-run': { type: 'boolean' },
} as const;

const CTRL_A = 0x01;

export async function runCommand(argv: string[]): Promise<number> {
  let vm: VirtualMachine;
  let timeoutS: number | undefined;
  let agentLog: WriteStream | undefined;
  let statsWriter: NdjsonStatsWriter | undefined;
  let statsIntervalMs = DEFAULT_INTERVAL_MS;
  const created: string[] = [];
  try {
    const { values } = parse(argv, OPTIONS);
    if (values.timeout !== undefined) {
      timeoutS = Number(values.timeout);
      if (!Number.isFinite(timeoutS) || timeoutS <= 0) throw new UsageError(`--timeout must be a positive number of seconds, got "${values.timeout}"`);
    }
    let guestNote: string | undefined;
    if (values.guest === undefined && values.kernel === undefined) {
      const chosen = defaultGuest(hostKind());
      values.guest = chosen.kind;
      if (chosen.kind === 'probe') guestNote = chosen.reason;
    }
    const config = configFromOptions(values);
    const resolved = resolveMachine(config, probeHost());
    if (values['dry-run']) {
      process.stdout.write(describeResolution(config, resolved));
      return EXIT_CODES.ok;
    }
    if (values['stats-interval'] !== undefined) {
      statsIntervalMs = Number(values['stats-interval']);
      if (!Number.isInteger(statsIntervalMs) || statsIntervalMs < 10 || statsIntervalMs > 60_000) {
        throw new UsageError(`--stats-interval must be a whole number of ms between 10 and 60000, got "${values['stats-interval']}"`);
      }
    }
    if (values['agent-log']) {
      if (!existsSync(values['agent-log'])) created.push(values['agent-log']);
      agentLog = await openLog(values['agent-log']);
    }
    if (values.stats) {
      if (!existsSync(values.stats)) created.push(values.stats);
      try {
        statsWriter = await NdjsonStatsWriter.open(values.stats);
      } catch (e) {
        throw new UsageError(`cannot write the stats file ${values.stats}: ${(e as Error).message}`);
      }
    }
    vm = await VirtualMachine.start(resolved.spec);
    if (guestNote) say(`note: ${guestNote}`);
    for (const w of resolved.resolution.warnings) say(`warning: ${w}`);
  } catch (e) {
    say(e instanceof UsageError || e instanceof ConfigError ? e.message : `cannot start the VM: ${(e as Error).message}`);
    if (agentLog) await new Promise<void>((r) => agentLog!.end(r));
    await statsWriter?.close();
    // Nothing started: leave no log or stats file behind that this run created.
    for (const f of created) rmSync(f, { force: true });
    return EXIT_CODES.badInput;
  }

  vm.on('console', (bytes) => process.stdout.write(bytes));
  // A closed stdout (`unhalt run | head`) ends the run like a signal would, not with a crash.
  const onStdoutError = () => void vm.stop();
  process.stdout.on('error', onStdoutError);
  if (agentLog) vm.on('agent-bytes', (bytes) => agentLog!.write(bytes));
  if (statsWriter) {
    const sampler = Sampler.forVm(vm, { intervalMs: statsIntervalMs });
    if (!sampler.kvmStats.available) say(`note: ${sampler.kvmStats.reason}; writing the VMM's own counters only`);
    statsWriter.attach(sampler);
  }
  const detachInput = attachInput(vm);

  let timedOut = false;
  const timer = timeoutS === undefined ? undefined : setTimeout(() => { timedOut = true; void vm.stop(); }, timeoutS * 1000);
  const onSignal = () => void vm.stop();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const exit: VmExit = await vm.exited;
  clearTimeout(timer);
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  detachInput();
  if (agentLog) await new Promise<void>((r) => agentLog!.end(r));
  await statsWriter?.close();
  if (process.stdout.writable) await new Promise<void>((r) => process.stdout.write('', () => r()));
  process.stdout.off('error', onStdoutError);

  if (timedOut) {
    say(`timeout: stopped the VM after ${timeoutS} s`);
    return EXIT_CODES.timeout;
  }
  if (isCleanExit(exit.kind) || exit.kind === 'stopped') return EXIT_CODES.ok;
  say(`the VM failed: ${exit.message}`);
  return EXIT_CODES.vmFailed;
}

export type { VmConfig, ResolvedMachine };

function openLog(path: string): Promise<WriteStream> {
  return new Promise((resolve, reject) => {
    const s = createWriteStream(path);
    s.once('open', () => resolve(s));
    s.once('error', (e) => reject(new UsageError(`cannot write the agent log ${path}: ${e.message}`)));
  });
}

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
