// The user's own benchmark's back end: one run boots the VM on Unhalt, waits until its console
// prints the --ready expression (the guest's service is up) and, for a guest command, until the
// guest's agent is ready; runs the command as an argument vector — on the host (spawn, no shell)
// or in the guest (the agent's `exec`, guest-exec.ts) — reads the metric from its output, stops
// the VM, and records the KVM stats deltas from the moment the guest was ready. Anything short
// of a number is a failed run with its reason: the VM ended or the deadline came before ready,
// the command could not start, exited non-zero or by a signal, ran past its deadline, or its
// output has no match for the metric (or a match that is no number).
import { spawn } from 'node:child_process';
import { resolveMachine } from '../vmm/config/resolve.ts';
import type { HostCapabilities } from '../vmm/machine/host-caps.ts';
import { Sampler } from '../vmm/telemetry/sampler.ts';
import { VirtualMachine } from '../vmm/vm.ts';
import { onAbort, statsDelta, stoppedAt, type Prepared, type RunOutcome } from './backend.ts';
import type { Deadline } from './pacing.ts';
import { joinCommand } from './argv-split.ts';
import { lastLine, readMetric, benchCommandOf, type UserBenchmark } from './user-bench.ts';
import { execLine, GuestExec } from './guest-exec.ts';
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';

/** The console text kept for matching --ready (a service's banner is a line, not megabytes). */
const CONSOLE_KEEP = 64 * 1024;
/** How long output may still arrive after the command exited (a background child holding the pipe). */
const EXIT_DRAIN_MS = 2000;
/** The command's stdout kept for the metric (the summary is at its end). */
const STDOUT_KEEP = 1024 * 1024;

export interface HostCmdDeadlines {
  ready: Deadline;
  command: Deadline;
}

export async function runUserCmdOnUnhalt(p: Prepared, bench: UserBenchmark, host: HostCapabilities, deadlines: HostCmdDeadlines, signal?: AbortSignal): Promise<RunOutcome> {
  const { spec } = resolveMachine(p.config, host);
  const { where, argv } = benchCommandOf(bench);
  const t0 = performance.now();
  const vm = await VirtualMachine.start(spec);
  const sampler = Sampler.forVm(vm, { intervalMs: 100 });
  // Listened for from the start: the agent may be ready before the console's --ready line.
  const agentReady = where === 'guest' ? waitAgentReady(vm, deadlines.ready) : undefined;
  let child: ReturnType<typeof spawn> | undefined;
  const unlisten = onAbort(signal, () => { child?.kill('SIGKILL'); void vm.stop(); });
  const fail = async (error: string): Promise<RunOutcome> => {
    child?.kill('SIGKILL');
    await vm.stop();
    unlisten();
    return { value: null, fields: {}, wallMs: performance.now() - t0, error, ...statsDelta(sampler) };
  };
  try {
    const ready = await waitReady(vm, bench.ready, deadlines.ready);
    if (ready.error) return await fail(ready.error);
    const agent = await agentReady;
    if (agent?.error) return await fail(agent.error);
    const readyT = performance.now() - t0;
    // The sampler's own clock (ms since the VM started, not since this run began): where the benchmark's counters start.
    const fromT = sampler.markEvent(`run the ${where} command`).t;
    const ran = where === 'guest' ? await runInGuest(vm, argv, deadlines.command) : await runCommand(argv, deadlines.command, (c) => { child = c; });
    if (ran.error) return await fail(ran.error);
    const metric = readMetric(ran.stdout, bench.metric, where);
    if ('error' in metric) return await fail(metric.error);
    await vm.stop();
    unlisten();
    // The counters over the benchmark, not the boot: from the sample before ready on.
    return { value: metric.value, fields: { ready_ms: readyT, command_ms: ran.ms }, wallMs: performance.now() - t0, ...statsDelta(sampler, fromT) };
  } catch (e) {
    return fail(`the run failed: ${(e as Error)?.message ?? String(e)}`);
  }
}

/** A guest's console as waitReady reads it: its bytes, and the end of the VM (how it ended). */
export interface ConsoleSource {
  listen(onBytes: (b: Uint8Array) => void): () => void;
  ended: Promise<string>;
}

export const vmConsole = (vm: VirtualMachine): ConsoleSource => ({
  listen: (f) => { vm.on('console', f); return () => vm.off('console', f); },
  ended: vm.ended.then((end) => end.message),
});

/** Until the console prints `ready` (at once without one), the VM ends, or the deadline passes. */
export function waitReady(vm: VirtualMachine | ConsoleSource, ready: string | undefined, deadline: Deadline): Promise<{ error?: string }> {
  if (ready === undefined) return Promise.resolve({});
  const source = vm instanceof VirtualMachine ? vmConsole(vm) : vm;
  const re = new RegExp(ready);
  const decoder = new TextDecoder();
  let text = '';
  return new Promise((resolve) => {
    const done = (r: { error?: string }) => {
      clearTimeout(timer);
      off();
      resolve(r);
    };
    const off = source.listen((b: Uint8Array) => {
      text = (text + decoder.decode(b, { stream: true })).slice(-CONSOLE_KEEP);
      if (re.test(text)) done({});
    });
    const timer = setTimeout(() => done({ error: `the guest never printed /${ready}/ on its console: ${stoppedAt(deadline)}` }), deadline.ms);
    void source.ended.then((how) => done({ error: `the VM ended before the guest printed /${ready}/ on its console (${how})` }));
  });
}

/** Until the guest's agent says `@u1 ready` on ttyS1, the VM ends, or the deadline passes. */
function waitAgentReady(vm: VirtualMachine, deadline: Deadline): Promise<{ error?: string }> {
  return new Promise((resolve) => {
    const done = (r: { error?: string }) => {
      clearTimeout(timer);
      vm.off('agent', onAgent);
      resolve(r);
    };
    const onAgent = (e: AgentEvent) => { if (e.event === 'ready') done({}); };
    const timer = setTimeout(() => done({ error: `the guest's agent never reported ready on ttyS1 (a guest command runs through it: a VM imported with the tools disk starts it): ${stoppedAt(deadline)}` }), deadline.ms);
    vm.on('agent', onAgent);
    void vm.ended.then((end) => done({ error: `the VM ended before the guest's agent was ready (${end.message})` }));
  });
}

/** Runs argv in the guest through its agent; its output, or why it gave none to read. */
function runInGuest(vm: VirtualMachine, argv: string[], deadline: Deadline): Promise<{ stdout: string; ms: number; error?: string }> {
  const shown = joinCommand(argv);
  const what = `the guest command (${shown.length > 80 ? `${shown.slice(0, 80)}…` : shown})`;
  const t0 = performance.now();
  const exec = new GuestExec();
  return new Promise((resolve) => {
    const done = (r: { stdout: string; error?: string }) => {
      clearTimeout(timer);
      vm.off('agent', onAgent);
      resolve({ ...r, ms: performance.now() - t0 });
    };
    const onAgent = (e: AgentEvent) => {
      if (!exec.onEvent(e)) return;
      const r = exec.result;
      if (!r) return done({ stdout: '', error: `${what}: ${exec.refused}` });
      const tail = lastLine(r.output);
      if (r.timedOut) done({ stdout: r.output, error: `${what} ${stoppedAt(deadline)}` });
      else if (r.signal) done({ stdout: r.output, error: `${what} was ended by signal ${r.signal}${tail ? `: ${tail}` : ''}` });
      else if (r.status !== 0) done({ stdout: r.output, error: `${what} exited with status ${r.status}${tail ? `: ${tail}` : ''}` });
      else done({ stdout: r.output });
    };
    // The agent kills the command at the deadline; ours is later, for an agent that never answers.
    const timer = setTimeout(() => done({ stdout: '', error: `${what}: no answer from the guest's agent: ${stoppedAt(deadline)}` }), deadline.ms + 10_000);
    vm.on('agent', onAgent);
    void vm.ended.then((end) => done({ stdout: '', error: `the VM ended while ${what} ran (${end.message})` }));
    vm.sendAgent(execLine(argv, deadline.ms));
  });
}

/** Runs argv without a shell; its stdout, or why it gave none to read. */
export function runCommand(argv: string[], deadline: Deadline, started: (c: ReturnType<typeof spawn>) => void): Promise<{ stdout: string; ms: number; error?: string }> {
  const shown = joinCommand(argv);
  const what = `the host command (${shown.length > 80 ? `${shown.slice(0, 80)}…` : shown})`;
  const t0 = performance.now();
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], shell: false });
    started(child);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => { stdout = (stdout + d).slice(-STDOUT_KEEP); });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => { stderr = (stderr + d).slice(-16 * 1024); });
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL'); }, deadline.ms);
    child.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ stdout, ms: performance.now() - t0, error: `${what} could not start: ${e.code === 'ENOENT' ? `no program "${argv[0]!.slice(0, 80)}" (give its path, or put it on PATH)` : e.message}` });
    });
    // The figure is read once the command has exited and its output is drained. A program that
    // left a background child holding its stdout would keep 'close' away: after EXIT_DRAIN_MS
    // the pipes are closed from our side and what was read counts.
    let drain: NodeJS.Timeout | undefined;
    const finish = (code: number | null, sig: NodeJS.Signals | null) => {
      clearTimeout(timer);
      clearTimeout(drain);
      const ms = performance.now() - t0;
      const tail = lastLine(stderr);
      if (timedOut) resolve({ stdout, ms, error: `${what} ${stoppedAt(deadline)}` });
      else if (sig) resolve({ stdout, ms, error: `${what} was ended by ${sig}${tail ? `: ${tail}` : ''}` });
      else if (code !== 0) resolve({ stdout, ms, error: `${what} exited with status ${code}${tail ? `: ${tail}` : ''}` });
      else resolve({ stdout, ms });
    };
    child.on('exit', (code, sig) => {
      drain = setTimeout(() => { child.stdout!.destroy(); child.stderr!.destroy(); finish(code, sig); }, EXIT_DRAIN_MS);
    });
    child.on('close', finish);
  });
}
