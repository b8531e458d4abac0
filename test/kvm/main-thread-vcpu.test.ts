// vCPU 0 on the main thread at start (VirtualMachine.start's firstVcpuOnMainThread, what
// `unhalt run` uses): the guest runs before any worker exists, the event loop keeps turning
// (input, console output in order, SIGINT/SIGTERM with the exit codes of docs/cli.md), and the vCPU
// moves to its worker between two KVM_RUNs once the guest has lived long enough — or never, if
// the guest is gone first. Real KVM, real processes.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { validateConfig } from '../../electron/vmm/config/vm-config.ts';
import { resolveMachine } from '../../electron/vmm/config/resolve.ts';
import { probeHost } from '../../electron/vmm/machine/host-caps.ts';
import { VirtualMachine } from '../../electron/vmm/vm.ts';
import { firstVcpuCanRunOnMainThread } from '../../electron/vmm/runtime/main-thread-vcpu.ts';
import { UNHALT_BIN, runCli } from '../support/cli.ts';
import { kvmAvailable, threadNames, watch } from '../support/probe.ts';
import { scaled } from '../support/time-scale.ts';

/** The hand-over delay as a test sets it: never (the whole run on the main thread) or at once. */
const NEVER = { UNHALT_HANDOVER_AFTER_MS: String(24 * 3600 * 1000) };
const AT_ONCE = { UNHALT_HANDOVER_AFTER_MS: '0' };

/**
 * Starts `unhalt run` on the echo shell and sends `signal` as soon as the guest's first byte is on
 * stdout, or `afterPromptMs` after its prompt.
 */
function signalAtFirstByte(signal: NodeJS.Signals, env: NodeJS.ProcessEnv, afterPromptMs?: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [UNHALT_BIN, 'run', '--cpus', '1', '--append', 'scenario=echo'], {
      stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      const first = !stdout;
      const hadPrompt = stdout.includes('probe> ');
      stdout += d;
      if (afterPromptMs === undefined) {
        if (first) child.kill(signal);
      } else if (!hadPrompt && stdout.includes('probe> ')) {
        setTimeout(() => child.kill(signal), afterPromptMs);
      }
    });
    child.stderr.on('data', (d) => { stderr += d; });
    const killer = setTimeout(() => child.kill('SIGKILL'), scaled(60_000));
    child.on('error', reject);
    child.on('close', (code) => { clearTimeout(killer); resolve({ code, stdout, stderr }); });
  });
}

/**
 * Starts the echo shell with vCPU 0 on the main thread, the hand-over delay set to
 * `handoverAfterMs` for the start only (the VM reads it then); without it, the process's own.
 */
async function startOnMainThread(name: string, handoverAfterMs?: string): Promise<VirtualMachine> {
  const { spec } = resolveMachine(validateConfig({ guest: 'probe', cpus: 1, memoryMiB: 64, append: 'scenario=echo', name }), probeHost());
  if (handoverAfterMs === undefined) return VirtualMachine.start(spec, { firstVcpuOnMainThread: true });
  const before = process.env.UNHALT_HANDOVER_AFTER_MS;
  process.env.UNHALT_HANDOVER_AFTER_MS = handoverAfterMs;
  try {
    return await VirtualMachine.start(spec, { firstVcpuOnMainThread: true });
  } finally {
    if (before === undefined) delete process.env.UNHALT_HANDOVER_AFTER_MS;
    else process.env.UNHALT_HANDOVER_AFTER_MS = before;
  }
}

const ECHO_SESSION = 'cpus\nhelp\ncpus\npoweroff\n';
const ECHO_ANSWERS = ['probe> cpus', 'cpus up: 1', 'probe> help', 'commands: help, cpus, poweroff', 'probe> cpus', 'cpus up: 1', 'probe> poweroff'];

describe.skipIf(!kvmAvailable)('vCPU 0 on the main thread at start', () => {
  it('applies to one unpinned vCPU without virtio devices only', () => {
    expect(firstVcpuCanRunOnMainThread({ cpus: 1 }, 2)).toBe(true);
    expect(firstVcpuCanRunOnMainThread({ cpus: 2 }, 2)).toBe(false);
    expect(firstVcpuCanRunOnMainThread({ cpus: 1, pin: [0] }, 2)).toBe(false);
    expect(firstVcpuCanRunOnMainThread({ cpus: 1, virtio: ['rng'] }, 2)).toBe(false);
    expect(firstVcpuCanRunOnMainThread({ cpus: 1, disks: [{ path: '/x', readonly: true }] }, 2)).toBe(false);
    // One host CPU: the worker would boot on the guest's CPU; it boots before the guest instead.
    expect(firstVcpuCanRunOnMainThread({ cpus: 1 }, 1)).toBe(false);
  });

  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    it(`unhalt run stopped by ${signal} while vCPU 0 runs on the main thread exits with ${code}`, async () => {
      const r = await signalAtFirstByte(signal, NEVER);
      // What the guest printed before the stop: its banner, or the start of it (the signal goes
      // at the first byte, and the VM may stop before the guest has written the rest of its line).
      const banner = 'Unhalt probe guest';
      expect(r.stdout.length).toBeGreaterThan(0);
      expect(r.stdout.startsWith(banner) || banner.startsWith(r.stdout), JSON.stringify(r.stdout)).toBe(true);
      expect(r.stderr).toContain(`${signal}: stopped the VM`);
      expect(r.code).toBe(code);
    });
  }

  it('unhalt run stopped by SIGINT after the hand-over exits with 130', async () => {
    // Long after the prompt: the worker (started at once) has the vCPU by then.
    const r = await signalAtFirstByte('SIGINT', AT_ONCE, scaled(1500));
    expect(r.stderr).toContain('SIGINT: stopped the VM');
    expect(r.code).toBe(130);
  });

  for (const [what, env] of [['never handed over', NEVER], ['handed over at once', AT_ONCE]] as const) {
    it(`the echo shell answers stdin in order (${what})`, async () => {
      const r = await runCli(['run', '--cpus', '1', '--append', 'scenario=echo'], { input: ECHO_SESSION, inputAfter: 'probe> ', env });
      expect(r.code, r.stderr).toBe(0);
      const lines = r.stdout.split(/\r?\n/).map((l) => l.trimEnd()).filter((l) => /^(probe> \S.*|cpus up: \d+|commands: .*)$/.test(l));
      expect(lines).toEqual(ECHO_ANSWERS);
    });
  }

  /** The names of `unhalt run`'s threads once the echo shell's prompt is out (then it is ended). */
  function threadsAtPrompt(prefix: string[], env: NodeJS.ProcessEnv): Promise<string[]> {
    return new Promise((resolve, reject) => {
      const child = spawn(prefix[0]!, [...prefix.slice(1), process.execPath, UNHALT_BIN, 'run', '--cpus', '1', '--append', 'scenario=echo'], {
        stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env },
      });
      let out = '';
      let names: string[] | undefined;
      child.stdout.on('data', (d) => {
        out += d;
        if (names || !out.includes('probe> ')) return;
        names = threadNames(child.pid!);
        child.kill('SIGTERM');
      });
      const killer = setTimeout(() => child.kill('SIGKILL'), scaled(60_000));
      child.on('error', reject);
      child.on('close', () => { clearTimeout(killer); names ? resolve(names) : reject(new Error(`no prompt: ${out.slice(-200)}`)); });
    });
  }

  it('on one host CPU, vCPU 0 starts on its worker: the worker boots before the guest, not on its CPU', async () => {
    // taskset runs Node itself, so the process sees one CPU (availableParallelism follows affinity).
    const one = await threadsAtPrompt(['taskset', '-c', '0'], NEVER);
    expect(one).toContain('vcpu-0');
    // The same run on every CPU of this host (2 in CI): vCPU 0 on the main thread, no worker yet.
    const all = await threadsAtPrompt(['env'], NEVER);
    expect(all).not.toContain('vcpu-0');
  });

  it('a 2-vCPU guest still brings up its AP (workers from the start)', async () => {
    const r = await runCli(['run', '--cpus', '2', '--append', 'scenario=hello']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('2 of 2 CPUs up');
    expect(r.stdout).toContain('hello from 2 CPUs (2 answered)');
  });

  it('runs vCPU 0 on the main thread, then on its worker after the hand-over, with input and output across it', async () => {
    const vm = await startOnMainThread('main-thread', '300');
    const w = watch(vm);
    try {
      await w.waitForConsole('probe> ');
      // The vCPU thread is this one (a forked test process: its main thread's id is the pid)...
      const onMain = vm.vcpuThreadIds()[0];
      vm.sendConsole('cpus\n');
      await w.waitForConsole('cpus up: 1');
      // ...until the worker takes it over.
      const deadline = Date.now() + scaled(30_000);
      while ((vm.vcpuThreadIds()[0] === onMain || vm.vcpuThreadIds()[0] === 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const onWorker = vm.vcpuThreadIds()[0];
      expect(onMain).toBe(process.pid);
      expect(onWorker).toBeGreaterThan(0);
      expect(onWorker).not.toBe(process.pid);
      vm.sendConsole('help\n');
      await w.waitForConsole('commands: help, cpus, poweroff');
      // Pause and resume work on the worker as ever.
      await vm.pause();
      vm.resume();
      vm.sendConsole('poweroff\n');
      const exit = await vm.ended;
      expect(exit.kind).toBe('poweroff');
      expect(w.console().indexOf('cpus up: 1')).toBeLessThan(w.console().indexOf('commands: help'));
    } finally {
      await vm.stop();
    }
  });

  it('pauses and resumes while vCPU 0 is still on the main thread', async () => {
    const vm = await startOnMainThread('main-thread-pause', NEVER.UNHALT_HANDOVER_AFTER_MS);
    const w = watch(vm);
    try {
      await w.waitForConsole('probe> ');
      await vm.pause();
      const exits = vm.control.counter(0, 0);
      vm.sendConsole('cpus\n');
      await new Promise((r) => setTimeout(r, 100));
      // Paused: the guest made no exits, so it could not have read the line yet.
      expect(vm.control.counter(0, 0)).toBe(exits);
      expect(w.console()).not.toContain('cpus up');
      vm.resume();
      await w.waitForConsole('cpus up: 1');
      expect(vm.vcpuThreadIds()[0]).toBe(process.pid);
    } finally {
      await vm.stop();
    }
  });

  it('a stop() right after the start, before vCPU 0\'s first slice, ends the VM cleanly', async () => {
    const vm = await startOnMainThread('main-thread-stop');
    const exit = await vm.stop();
    expect(exit.kind).toBe('stopped');
    expect(vm.state).toBe('stopped');
    // The vCPU never ran: no exit was counted.
    expect(vm.control.counter(0, 0)).toBe(0);
  });
});
