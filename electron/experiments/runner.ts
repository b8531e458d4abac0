// The A/B experiment runner behind `unhalt bench` and the compare view, a layer above the VMM
// (docs/architecture.md): it starts VMs, QEMU and host binaries. For each configuration,
// boot a VM, run the workload, record the guest's result with the KVM stats deltas and the VMM's
// host CPU time; optionally the same guest and knobs under QEMU. Configurations are run
// alternately (A, B, A, B, ...) because this machine is noisy; results are medians and ratios.
//
// Linux workloads: each run boots the Linux guest, waits for the agent's `@u1 ready` on ttyS1,
// sends it `run NAME key=value ...` (VirtualMachine.sendAgent) and reads the result event and
// `@u1 done`. The first run that gets that far calibrates the workload's size; every deadline
// follows this host's measured speed (pacing.ts, host-speed.ts), never a fixed figure. A run that
// fails is recorded with its reason and the experiment goes on: the result says which failed.
// `--bare` runs the host build of the same C workload with the same arguments (a `bare` row, the
// reference of the ratio column). On PVM hosts the Linux guest cannot boot, so such an
// experiment is refused before anything runs. What a spec may be is spec.ts's; the verdicts are
// stats.ts's.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { release, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';
import { parseAgentLine } from '../vmm/agent/line-protocol.ts';
import { parseConfigString } from '../vmm/config/config-string.ts';
import { resolveMachine } from '../vmm/config/resolve.ts';
import type { VmConfig } from '../vmm/config/vm-config.ts';
import { qemuCpu, qemuOvercommit } from '../vmm/export/qemu.ts';
import { PROBE_KERNEL } from '../vmm/guests.ts';
import { LINUX_HOST_BUILD_HINT, LINUX_HOST_WORKLOAD, LINUX_WORKLOADS_DISK, LINUX_WORKLOADS_DISK_HINT, linuxKitInfo } from '../vmm/guests-linux.ts';
import { hostCpuModel, hostKind } from '../vmm/host.ts';
import { disableExitNames, probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { hostSpeed } from '../vmm/host-speed.ts';
import { Sampler } from '../vmm/telemetry/sampler.ts';
import { VirtualMachine } from '../vmm/vm.ts';
import { ExperimentPacing, probeRunDeadline, userDeadline, type Deadline, type RunPacer, type Step } from './pacing.ts';
import type { ExperimentProgress, ExperimentResult, ExperimentResultRow, ExperimentSpec, RunFailure, RunRecord } from './types.ts';
import { ExperimentError, fewRunsWarning, runnersOf, totalRuns, validateSpec } from './spec.ts';
import { compareRows, median } from './stats.ts';
import { givenKeys, linuxWorkloadArgs, withSize, workload, type Workload } from './workloads.ts';

/** Why a Linux-guest experiment is refused on PVM hosts (one line). */
export const LINUX_ON_PVM = 'the Linux guest cannot run on this host: its KVM is PVM (guest ring 0 is emulated), where a stock '
  + 'Linux kernel never finishes booting; use the probe guest (--guest probe, workloads ipi, timer, spinlock, pio, idle)';

export { ExperimentError };

interface Prepared {
  name: string;
  config: VmConfig;
  qemuArgs?: string[];
  /** Where the QEMU run differs from the config it is labelled with (QEMU lacks the knob), in one line. */
  qemuCaveat?: string;
}

/** Checks a spec completely before anything runs (every config parsed and resolved). */
export interface PreparedExperiment {
  spec: ExperimentSpec;
  work: Workload;
  prepared: Prepared[];
  notes: string[];
  /** Linux workloads: the complete `key=value` arguments for the agent and the host build. */
  linuxArgs?: string[];
}

/**
 * The host a spec is checked against: its capabilities, or how to get them (the service's probe,
 * which refuses in the words the app shows where KVM cannot be opened); default probeHost().
 */
export type HostSource = HostCapabilities | (() => HostCapabilities);

/** The host's kind without asking KVM for it (a PVM host is known from the OS). */
export function hostKindOf(host?: HostSource): HostCapabilities['kind'] {
  return (typeof host === 'object' ? host.kind : undefined) ?? hostKind();
}

/**
 * Checks a spec completely before anything runs: its shape and limits (spec.ts, the one place),
 * then what depends on this host (the workload, every config resolved against this KVM).
 * Returns the clean spec too: what the runner runs is what was checked.
 */
export function prepareExperiment(raw: unknown, host?: HostSource): PreparedExperiment {
  // First: nothing else matters when the guest cannot boot here.
  if (typeof raw === 'object' && raw !== null && (raw as ExperimentSpec).guest === 'linux' && hostKindOf(host) === 'pvm') throw new ExperimentError(LINUX_ON_PVM);
  const spec = validateSpec(raw);
  let work: Workload;
  try {
    work = workload(spec.guest, spec.workload);
  } catch (e) {
    throw new ExperimentError((e as Error).message);
  }
  const args = spec.workloadArgs ?? '';
  let linuxArgs: string[] | undefined;
  if (work.guest === 'linux') {
    try {
      linuxArgs = linuxWorkloadArgs(work, args);
    } catch (e) {
      throw new ExperimentError((e as Error).message);
    }
    if (spec.vsQemu) throw new ExperimentError('--vs-qemu is not available for the Linux guest yet (QEMU would need the initramfs and a two-way ttyS1); use --bare for the host reference');
    if (work.tool && spec.bare) throw new ExperimentError(`--bare is not available for ${work.name}: it runs Debian's ${work.tool} from the workloads disk, which has no host build here; use pipe, messaging or ctx for a bare-metal reference`);
    if (work.tool && !existsSync(LINUX_WORKLOADS_DISK)) throw new ExperimentError(`${work.name} runs ${work.tool} from the workloads disk, which is not built (${LINUX_WORKLOADS_DISK}): ${LINUX_WORKLOADS_DISK_HINT}`);
    if (spec.bare && !existsSync(LINUX_HOST_WORKLOAD)) throw new ExperimentError(`--bare needs the host build of the Linux workloads (${LINUX_HOST_WORKLOAD}): ${LINUX_HOST_BUILD_HINT}`);
  }
  const notes: string[] = [];
  const configs = spec.configs.map(({ name, config }): Prepared => {
    let c: VmConfig;
    try {
      const base: Record<string, unknown> = { guest: spec.guest, name: 'bench' };
      if (work.cmdline) base.append = work.cmdline(args); // Linux: the default kernel command line
      c = parseConfigString(String(config), base);
    } catch (e) {
      throw new ExperimentError(`configuration "${name}": ${(e as Error).message}`);
    }
    // Disks are no knob: the workloads run in the guest's RAM, and an experiment's configuration
    // (API, bench) must not hand the host's files to a guest past the service's allowed folders.
    if (c.disks) throw new ExperimentError(`configuration "${name}": disk= is not a bench knob (the workloads use no disk); drop it`);
    // The tool workloads' programs are on the workloads disk: attached read-only by the runner
    // itself (a file of the kit's, not the user's), so the guest's /init mounts it.
    if (work.tool) c = { ...c, disks: [{ path: LINUX_WORKLOADS_DISK, readonly: true }] };
    if (c.cpus < work.minCpus) throw new ExperimentError(`configuration "${name}": workload ${work.name} needs at least ${work.minCpus} vCPUs (cpus=${work.minCpus})`);
    return { name, config: c };
  });
  // The host only once the request itself is good: a bad one is refused in its own words on
  // any host, one without a usable /dev/kvm included (where a good one gets the probe's error).
  const caps = typeof host === 'function' ? host() : host ?? probeHost();
  const prepared = configs.map((p) => {
    try {
      resolveMachine(p.config, caps); // the runnability check, before any run starts
    } catch (e) {
      throw new ExperimentError(`configuration "${p.name}": ${(e as Error).message}`);
    }
    if (spec.vsQemu) Object.assign(p, qemuCommand(p.config, caps));
    return p;
  });
  if (spec.bare && work.guest !== 'linux') notes.push(`--bare: the ${work.name} workload runs inside the probe guest only; no bare-metal reference for it`);
  for (const p of prepared) if (p.qemuCaveat) notes.push(`${p.name} (qemu): ${p.qemuCaveat}`);
  return linuxArgs ? { spec, work, prepared, notes, linuxArgs } : { spec, work, prepared, notes };
}

/**
 * Runs an experiment: every config under every VMM, alternately (A, B, A, B, ...), `runs` times,
 * then the rows (medians, ratios) and a verdict per pair (stats.ts). `signal` cancels it
 * promptly: the run in progress is ended (its VM stopped, its QEMU or host process killed) and
 * the promise rejects with ExperimentCancelled.
 *
 * A search loop (a tuning advisor) wants "X n times alternately with Y, and the verdict":
 * compareConfigs (compare.ts) is that call over this one.
 */
export async function runExperiment(
  rawSpec: ExperimentSpec,
  onProgress: (p: ExperimentProgress) => void = () => {},
  signal?: AbortSignal,
): Promise<ExperimentResult> {
  const host = probeHost();
  const { spec, work, prepared, notes, linuxArgs } = prepareExperiment(rawSpec, host);
  const { vmms: runners, bare } = runnersOf(spec);
  const total = totalRuns(spec);
  const speed = hostSpeed();
  const deadlineMs = spec.deadlineS !== undefined ? spec.deadlineS * 1000 : undefined;
  // Guest-side phases scale by the guest slowdown (the clock's, floored where the CPU is emulated).
  const pacing = linuxArgs ? linuxPacing(work, spec.workloadArgs ?? '', linuxArgs, speed.guestSlowdown, deadlineMs) : undefined;
  const probeDeadline = deadlineMs !== undefined ? userDeadline(deadlineMs) : probeRunDeadline(speed.guestSlowdown);
  const raw: RunRecord[] = [];
  let done = 0;
  const cancelled = () => { if (signal?.aborted) throw new ExperimentCancelled(); };
  for (let run = 1; run <= spec.runs; run++) {
    for (const p of prepared) {
      for (const runner of runners) {
        cancelled();
        onProgress({ done, total, current: `${p.name} (${runner}) run ${run}/${spec.runs}` });
        const rec = await recorded(() => (runner === 'qemu' ? runOnQemu(p, work, probeDeadline, signal)
          : pacing ? runLinuxOnUnhalt(p, work, linuxArgs!, host, pacing, signal) : runOnUnhalt(p, work, host, probeDeadline, signal)));
        cancelled(); // a run cut short by the cancel is not a result
        raw.push({ ...rec, config: p.name, runner, run });
        done++;
      }
    }
    if (bare) {
      // In the same alternation as the configs: the host's noise hits every row alike.
      cancelled();
      onProgress({ done, total, current: `bare run ${run}/${spec.runs}` });
      // The host build runs at the calibrated size too (the first run calibrated it, in the guest).
      const args = pacing?.sizing ? withSize(linuxArgs!, pacing.sizing.param, pacing.sizing.size) : linuxArgs!;
      // Host processes slow down with the host clock too (a nested L1 runs them under TCG).
      const bareTimeoutMs = deadlineMs ?? Math.ceil(BARE_BUDGET_MS * speed.slowdown);
      const rec = await recorded(() => runBare(work, args, LINUX_HOST_WORKLOAD, bareTimeoutMs, signal));
      cancelled();
      raw.push({ ...rec, config: BARE_CONFIG, runner: 'bare', run });
      done++;
    }
  }
  onProgress({ done, total });
  const rowRunners = bare ? [...runners, 'bare'] : runners;
  const rows = summarize(prepared.map((p) => p.name), rowRunners, raw, work);
  for (const row of rows) {
    const caveat = row.runner === 'qemu' ? prepared.find((p) => p.name === row.config)?.qemuCaveat : undefined;
    if (caveat) row.caveat = caveat;
  }
  const failures = failuresOf(raw);
  const sizing = pacing?.sizing;
  const few = fewRunsWarning(spec.runs);
  return {
    spec,
    status: failures.length === 0 ? 'ok' : rows.length ? 'partial' : 'failed',
    unit: work.unit,
    rows,
    comparisons: compareRows(rows, work.lowerIsBetter ? 'lower' : 'higher'),
    raw,
    failures,
    ...(sizing ? { sizing, workloadArgsUsed: withSize(linuxArgs!, sizing.param, sizing.size).join(' ') } : {}),
    environment: { ...environment(host, prepared, spec), hostSpeed: speed },
    notes: few ? [few, ...notes] : notes,
  };
}

/** The experiment was cancelled (ExperimentRunner.cancel, an AbortSignal). */
export class ExperimentCancelled extends ExperimentError {
  override name = 'ExperimentCancelled';
  constructor() {
    super('the experiment was cancelled');
  }
}

/** Calls `stop` once when the signal aborts (now, if it has); returns the way to stop listening. */
function onAbort(signal: AbortSignal | undefined, stop: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    stop();
    return () => {};
  }
  signal.addEventListener('abort', stop, { once: true });
  return () => signal.removeEventListener('abort', stop);
}

/** A run that threw (the VM did not start, a device failed) is a failed run, not the end of the experiment. */
async function recorded(run: () => Promise<RunOutcome>): Promise<RunOutcome> {
  const t0 = performance.now();
  try {
    return await run();
  } catch (e) {
    return { value: null, fields: {}, wallMs: performance.now() - t0, error: `the run failed: ${(e as Error)?.message ?? String(e)}` };
  }
}

/** The failed runs, one line each (the error text is one line already; newlines would break the formats). */
export function failuresOf(raw: readonly RunRecord[]): RunFailure[] {
  return raw.filter((r) => r.value === null || r.error)
    .map((r) => ({ config: r.config, runner: r.runner, run: r.run, error: (r.error ?? 'no value').replace(/\s*\n\s*/g, ' ') }));
}

function linuxPacing(work: Workload, userArgs: string, args: readonly string[], slowdown: number, deadlineMs?: number): ExperimentPacing {
  const size = work.size!;
  const param = work.params![size.param]!;
  const given = givenKeys(userArgs).includes(size.param);
  const value = Number(args.find((a) => a.startsWith(`${size.param}=`))!.slice(size.param.length + 1));
  return new ExperimentPacing({
    slowdown,
    param: { name: size.param, calibrateFrom: size.calibrateFrom, min: param.min, max: param.default },
    ...(given ? { givenSize: value } : {}),
    ...(deadlineMs !== undefined ? { deadlineMs } : {}),
  });
}

/** The config name of the bare-metal rows. */
export const BARE_CONFIG = 'bare';

export type RunOutcome = Omit<RunRecord, 'config' | 'runner' | 'run'>;

async function runOnUnhalt(p: Prepared, work: Workload, host: HostCapabilities, deadline: Deadline, signal?: AbortSignal): Promise<RunOutcome> {
  const { spec } = resolveMachine(p.config, host);
  const t0 = performance.now();
  const vm = await VirtualMachine.start(spec);
  const unlisten = onAbort(signal, () => void vm.stop());
  const sampler = Sampler.forVm(vm, { intervalMs: 100 });
  let boot: AgentEvent | undefined;
  let result: AgentEvent | undefined;
  vm.on('agent', (e) => {
    if (e.event === 'boot') boot = e;
    if (e.event === work.event && !result) {
      result = e;
      // A result is all we need; a live probe keeps going, so end the run here.
      setTimeout(() => void vm.stop(), 50);
    }
  });
  let timedOut = false;
  const timer = setTimeout(() => { timedOut = true; void vm.stop(); }, deadline.ms);
  const end = await vm.ended;
  clearTimeout(timer);
  unlisten();
  const wallMs = performance.now() - t0;
  const stats = statsDelta(sampler);
  if (!result) return { value: null, fields: {}, wallMs, error: `no ${work.event} result: ${timedOut ? stoppedAt(deadline) : end.message}`, ...stats };
  return { value: work.value(result, boot), fields: result.fields, wallMs, ...stats };
}

/** How a run ended that ran into its deadline (one line). */
export function stoppedAt(d: Deadline): string {
  return `stopped at its ${d.ms >= 10_000 ? (d.ms / 1000).toFixed(0) : (d.ms / 1000).toFixed(1)} s deadline (${d.why})`;
}

/**
 * The host's side of one Linux workload run over ttyS1, apart from any VM (tests drive it with
 * the agent built for the host, `unhalt-agent --stdio`): on the agent's `@u1 ready` it sends
 * `run NAME key=value ...`; it keeps the result event, the first error and `@u1 done`, and calls
 * `finished` when done arrives. With a pacer (an experiment's runs) it first sends the pacer's
 * calibration or warm-up commands, each after the previous one's `done`, then the measured one,
 * and arms each step's deadline; only the measured command's result is the run's.
 */
export class LinuxAgentRun {
  ready?: AgentEvent;
  result?: AgentEvent;
  failure?: AgentEvent;
  /** The `@u1 done` that ended the run: the measured command's, or a failed earlier step's. */
  done?: AgentEvent;
  /** The command last sent (the measured one once the run gets there). */
  command: string;
  /** The step of the command last sent; undefined without a pacer. */
  step?: Step;
  private readonly work: Workload;
  private readonly args: readonly string[];
  private readonly send: (line: string, step?: Step) => void;
  private readonly finished: () => void;
  private readonly pacer?: RunPacer;
  private readonly now: () => number;
  private sentAt = 0;

  constructor(work: Workload, args: readonly string[], send: (line: string, step?: Step) => void, finished: () => void,
    opts: { pacer?: RunPacer; now?: () => number } = {}) {
    this.work = work;
    this.args = args;
    this.command = this.commandFor(args);
    this.send = send;
    this.finished = finished;
    if (opts.pacer) this.pacer = opts.pacer;
    this.now = opts.now ?? (() => performance.now());
  }

  onEvent(e: AgentEvent): void {
    if (!this.ready) {
      if (e.event !== 'ready') return; // the agent's ttyS1 may carry other lines before it starts
      this.ready = e;
      if (this.pacer) this.sendStep(this.pacer.next()!);
      else this.send(`${this.command}\n`);
    } else if (e.event === this.work.event && !this.result) {
      if (this.measuring()) this.result = e;
    } else if (e.event === 'error' && !this.failure) {
      this.failure = e;
    } else if (e.event === 'done' && e.fields.workload === this.work.id && !this.done) {
      const next = this.pacer && e.fields.status === 0 && !this.measuring() ? this.pacer.next(this.now() - this.sentAt) : undefined;
      if (next) {
        this.sendStep(next);
        return;
      }
      this.done = e;
      this.finished();
    }
  }

  /** The run's value, or why there is none (`ended`: how the VM or process ended). */
  outcome(ended: string): Pick<RunOutcome, 'value' | 'fields' | 'error'> {
    if (!this.ready) return { value: null, fields: {}, error: `the Linux agent never reported ready on ttyS1: ${ended}` };
    if (!this.result) {
      const f = this.failure;
      const stepName = this.measuring() ? undefined : this.step!.kind === 'calibrate' ? 'calibration' : 'warm-up';
      const why = this.done
        ? `the agent's ${this.work.name}${stepName ? ` ${stepName}` : ''} run failed (status ${this.done.fields.status}${f ? `, ${fieldText(f)}` : ''})`
        : `no ${this.work.event} result after "${this.command}"${stepName ? ` (${stepName})` : ''}: ${ended}`;
      return { value: null, fields: {}, error: why };
    }
    return { value: this.work.value(this.result, this.ready), fields: this.result.fields };
  }

  private measuring(): boolean {
    return !this.step || this.step.kind === 'measure';
  }

  private commandFor(args: readonly string[]): string {
    return `run ${this.work.name} ${args.join(' ')}`.trim();
  }

  private sendStep(step: Step): void {
    const param = this.work.size!.param;
    this.step = step;
    this.command = this.commandFor(withSize(this.args, param, step.size));
    this.sentAt = this.now();
    this.send(`${this.command}\n`, step);
  }
}

/**
 * One run of a Linux workload: boot, wait for the agent's `@u1 ready`, the pacer's calibration
 * or warm-up commands, then the measured `run NAME args` (VirtualMachine.sendAgent), read the
 * result and `@u1 done`, stop the VM. Each phase has its own deadline (pacing.ts). KVM stats cover
 * the measured command only (from the moment it is sent).
 */
async function runLinuxOnUnhalt(p: Prepared, work: Workload, args: string[], host: HostCapabilities, pacing: ExperimentPacing, signal?: AbortSignal): Promise<RunOutcome> {
  const { spec } = resolveMachine(p.config, host);
  const t0 = performance.now();
  const vm = await VirtualMachine.start(spec);
  const unlisten = onAbort(signal, () => void vm.stop());
  const sampler = Sampler.forVm(vm, { intervalMs: 100 });
  let fromT: number | undefined;
  let expired: Deadline | undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = (d: Deadline) => {
    clearTimeout(timer);
    timer = setTimeout(() => { expired = d; void vm.stop(); }, d.ms);
  };
  const run = new LinuxAgentRun(work, args, (line, step) => {
    const t = sampler.markEvent(`run ${work.name}${step && step.kind !== 'measure' ? ` (${step.kind})` : ''}`).t;
    if (!step || step.kind === 'measure') fromT = t;
    if (step) arm(step.deadline);
    vm.sendAgent(line);
  }, () => { clearTimeout(timer); setTimeout(() => void vm.stop(), 50); }, { pacer: pacing.newRun() });
  vm.on('agent', (e) => {
    if (e.event === 'ready' && !run.ready) pacing.noteReady(performance.now() - t0);
    run.onEvent(e);
  });
  arm(pacing.readyDeadline());
  const end = await vm.ended;
  clearTimeout(timer);
  unlisten();
  const wallMs = performance.now() - t0;
  return { ...run.outcome(expired ? stoppedAt(expired) : end.message), wallMs, ...statsDelta(sampler, fromT) };
}

const fieldText = (e: AgentEvent): string => Object.entries(e.fields).map(([k, v]) => `${k}=${v}`).join(' ');

/** The host build of a Linux workload at its default size on hardware: ~10 s (pipe, 1M loops); generous. */
const BARE_BUDGET_MS = 300_000;

/**
 * The bare-metal reference: the host build of the same C workload with the same arguments
 * (assets/guests/linux/host/unhalt-workload), its `@u1` lines read from stdout.
 */
export async function runBare(work: Workload, args: string[], binary: string = LINUX_HOST_WORKLOAD, timeoutMs = BARE_BUDGET_MS, signal?: AbortSignal): Promise<RunOutcome> {
  const t0 = performance.now();
  let timedOut = false;
  const out = await new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string; error?: string }>((resolve) => {
    let stdout = '';
    let stderr = '';
    const child = spawn(binary, [work.name, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d) => { if (stdout.length < 1 << 20) stdout += d; });
    child.stderr.on('data', (d) => { if (stderr.length < 1 << 16) stderr += d; });
    const timer = setTimeout(() => { timedOut = true; child.kill('SIGKILL'); }, timeoutMs);
    const unlisten = onAbort(signal, () => child.kill('SIGKILL'));
    child.on('error', (e) => { clearTimeout(timer); unlisten(); resolve({ code: null, signal: null, stdout, stderr, error: e.message }); });
    child.on('close', (code, sig) => { clearTimeout(timer); unlisten(); resolve({ code, signal: sig, stdout, stderr }); });
  });
  const wallMs = performance.now() - t0;
  if (out.error) return { value: null, fields: {}, wallMs, error: `cannot run ${binary}: ${out.error} (${LINUX_HOST_BUILD_HINT})` };
  let result: AgentEvent | undefined;
  for (const line of out.stdout.split('\n')) {
    const e = parseAgentLine(line);
    if (typeof e === 'object' && e.event === work.event && !result) result = e;
  }
  if (!result || out.code !== 0) {
    const why = timedOut ? `stopped after ${(timeoutMs / 1000).toFixed(timeoutMs >= 10_000 ? 0 : 1)} s, its deadline`
      : out.stderr.trim().split('\n')[0] || (out.signal ? `killed by ${out.signal}` : `exit status ${out.code}`);
    return { value: null, fields: {}, wallMs, error: `bare ${work.name} failed: ${why}` };
  }
  return { value: work.value(result), fields: result.fields, wallMs };
}

/**
 * KVM stats deltas over the run; from `fromT` (ms since the VM started) on when given: the
 * last sample at or before it is the baseline, and host CPU time is a delta too. Halt exits and
 * hypercalls are the mechanism the knobs change: cpu-pm=on takes halt exits to 0 on
 * hardware-backed KVM, pv-unhalt kicks are KVM_HC_KICK_CPU hypercalls.
 */
function statsDelta(sampler: Sampler, fromT?: number): Pick<RunRecord, 'haltExits' | 'haltExitsPerS' | 'hypercalls' | 'pollHitRate' | 'hostCpuNs' | 'pollNs' | 'haltWaitNs'> {
  let recs = sampler.records();
  if (fromT !== undefined) {
    const base = recs.filter((r) => r.t <= fromT).at(-1)?.t;
    recs = recs.filter((r) => base === undefined || r.t >= base);
  }
  if (recs.length === 0) return {};
  let halts = 0;
  let hypercalls = 0;
  let polls = 0;
  let hits = 0;
  let cpu = 0;
  let pollNs = 0;
  let waitNs = 0;
  let seconds = 0;
  for (let v = 0; v < sampler.cpus; v++) {
    const mine = recs.filter((r) => r.vcpu === v);
    const first = mine[0];
    const last = mine.at(-1);
    if (!first || !last) continue;
    const d = (k: string) => Number(last[k] ?? 0) - Number(first[k] ?? 0);
    halts += d('halt_exits');
    hypercalls += d('hypercalls');
    polls += d('halt_attempted_poll');
    hits += d('halt_successful_poll');
    pollNs += d('halt_poll_success_ns') + d('halt_poll_fail_ns');
    waitNs += d('halt_wait_ns');
    // The thread's CPU time from the last sample that could read it: the final sample, taken as
    // the vCPU thread ends, often finds it gone (null), which read as 0 ns.
    const lastCpu = mine.findLast((r) => typeof r.host_cpu_ns === 'number')?.host_cpu_ns;
    cpu += Number(lastCpu ?? 0) - (fromT !== undefined ? Number(first.host_cpu_ns ?? 0) : 0);
    seconds = Math.max(seconds, (last.t - first.t) / 1000);
  }
  return {
    haltExits: halts,
    haltExitsPerS: seconds > 0 ? halts / seconds : undefined,
    // A host kernel without the counter has none to show (absent, not 0).
    ...(sampler.fields.includes('hypercalls') ? { hypercalls } : {}),
    pollHitRate: polls > 0 ? hits / polls : null,
    hostCpuNs: cpu,
    // Host kernels without the binary stats have neither counter (absent, not 0).
    ...(sampler.fields.includes('halt_poll_success_ns') ? { pollNs } : {}),
    ...(sampler.fields.includes('halt_wait_ns') ? { haltWaitNs: waitNs } : {}),
  };
}

/** The QEMU command line for the same guest and knobs (where QEMU has the knob). */
export function qemuCommand(c: VmConfig, host: HostCapabilities): { qemuArgs: string[]; qemuCaveat?: string } {
  const { spec, resolution } = resolveMachine(c, host);
  // The knobs as the QEMU export maps them (export/qemu.ts); the board is microvm here, the
  // smallest QEMU has, for like-for-like timings with Unhalt's.
  const args = [
    '-machine', 'microvm', '-accel', 'kvm', '-cpu', qemuCpu(resolution.features, host.kind), '-smp', String(c.cpus), '-m', String(c.memoryMiB),
    '-nographic', '-no-reboot', '-device', 'isa-debug-exit,iobase=0xf4,iosize=4',
    '-kernel', spec.kernelPath, '-append', spec.cmdline,
  ];
  const overcommit = qemuOvercommit(c);
  if (overcommit) args.push('-overcommit', overcommit);
  // What the QEMU row cannot do as labelled: it runs anyway (the noise of QEMU's rows is worth
  // seeing), and the row, the chart and the notes say how it differs.
  const missing: string[] = [];
  if (c.haltPollNs !== undefined) missing.push(`ran at the host's halt polling (${host.haltPollParams.halt_poll_ns ?? '?'} ns), not halt-poll-ns=${c.haltPollNs}: QEMU has no per-VM halt-polling option`);
  if (c.pin) missing.push('ran unpinned: QEMU does not pin vCPU threads itself');
  if (c.rng) missing.push('ran without virtio-rng: the microvm board of the QEMU rows has no PCI bus (bench/virtio-notify.ts compares the devices on q35)');
  if (c.net) missing.push('ran without a network: the microvm board of the QEMU rows has no PCI bus (bench/virtio-net-rr.ts compares virtio-net on q35)');
  return missing.length ? { qemuArgs: args, qemuCaveat: missing.join('; ') } : { qemuArgs: args };
}

async function runOnQemu(p: Prepared, work: Workload, deadline: Deadline, signal?: AbortSignal): Promise<RunOutcome> {
  const dir = mkdtempSync(join(tmpdir(), 'unhalt-qemu-'));
  const ttyS1 = join(dir, 'ttyS1');
  const args = [...p.qemuArgs!, '-chardev', `file,id=s1,path=${ttyS1}`, '-device', 'isa-serial,chardev=s1,iobase=0x2f8,irq=3'];
  const t0 = performance.now();
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn('qemu-system-x86_64', args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (d) => { err += d; });
      const timer = setTimeout(() => child.kill('SIGKILL'), deadline.ms);
      const unlisten = onAbort(signal, () => child.kill('SIGKILL'));
      child.on('close', unlisten);
      child.on('error', (e) => { clearTimeout(timer); unlisten(); reject(new ExperimentError(`cannot run QEMU: ${e.message} (install qemu-system-x86)`)); });
      child.on('close', (c) => { clearTimeout(timer); if (c !== 1 && err) reject(new ExperimentError(`QEMU failed: ${err.trim().split('\n')[0]}`)); else resolve(c); });
    });
    const wallMs = performance.now() - t0;
    let boot: AgentEvent | undefined;
    let result: AgentEvent | undefined;
    for (const line of readFileSync(ttyS1, 'latin1').split('\n')) {
      const e = parseAgentLine(line);
      if (typeof e !== 'object') continue;
      if (e.event === 'boot') boot = e;
      if (e.event === work.event && !result) result = e;
    }
    if (!result) return { value: null, fields: {}, wallMs, error: `no ${work.event} result from QEMU (exit status ${code})` };
    return { value: work.value(result, boot), fields: result.fields, wallMs };
  } catch (e) {
    return { value: null, fields: {}, wallMs: performance.now() - t0, error: (e as Error).message };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function medianOrNull(xs: number[]): number | null {
  return xs.length ? median(xs) : null;
}

function mean(xs: number[]): number | null {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

export function summarize(configs: string[], runners: readonly string[], raw: RunRecord[], work: Pick<Workload, 'unit' | 'secondary'>): ExperimentResultRow[] {
  const rows: ExperimentResultRow[] = [];
  for (const runner of runners) {
    // The bare-metal reference has one row of its own.
    for (const config of runner === 'bare' ? [BARE_CONFIG] : configs) {
      const all = raw.filter((r) => r.config === config && r.runner === runner);
      // Counters of failed runs would mix a boot that hung into the figures: successful runs only.
      const recs = all.filter((r) => r.value !== null && Number.isFinite(r.value));
      const values = recs.map((r) => r.value!);
      // A config without any value has no row; ExperimentResult.failures says why.
      if (!values.length) continue;
      const numbers = (k: 'haltExitsPerS' | 'pollHitRate' | 'haltExits' | 'hypercalls') => recs.map((r) => r[k]).filter((v): v is number => typeof v === 'number');
      const row: ExperimentResultRow = {
        config, runner, unit: work.unit, median: median(values), min: Math.min(...values), max: Math.max(...values),
        ratioToFirst: null, ratioToReference: null,
        haltExitsPerS: mean(numbers('haltExitsPerS')),
        pollHitRate: mean(numbers('pollHitRate')),
        runs: values,
        haltExits: medianOrNull(numbers('haltExits')),
        hypercalls: medianOrNull(numbers('hypercalls')),
        failedRuns: all.length - recs.length,
      };
      const sec = work.secondary;
      if (sec) {
        const xs = recs.map((r) => sec.value({ event: '', fields: r.fields }))
          .filter((v) => Number.isFinite(v));
        if (xs.length) row.secondary = { unit: sec.unit, median: median(xs) };
      }
      rows.push(row);
    }
  }
  const bare = rows.find((r) => r.runner === 'bare');
  for (const row of rows) {
    const first = rows.find((r) => r.runner === row.runner);
    if (first && first.median !== 0) row.ratioToFirst = row.median / first.median;
    // The reference: QEMU on the same config where there is one, else the bare-metal row.
    const ref = row.runner === 'unhalt' ? rows.find((r) => r.runner === 'qemu' && r.config === row.config) ?? bare
      : row.runner === 'qemu' ? bare : undefined;
    if (ref && ref.median !== 0) row.ratioToReference = row.median / ref.median;
  }
  return rows;
}

function environment(host: HostCapabilities, prepared: Prepared[], spec: ExperimentSpec): Record<string, unknown> {
  let version = 'unknown';
  try {
    version = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;
  } catch { /* not fatal */ }
  return {
    appVersion: version,
    node: process.versions.node,
    hostCpuModel: hostCpuModel(),
    hostCpus: host.hostCpus.length,
    hostKind: host.kind,
    kernel: release(),
    kvm: {
      features: host.kvmFeatures, disableExits: disableExitNames(host.disableExits), haltPoll: host.haltPoll,
      binaryStats: host.binaryStats, maxVcpus: host.maxVcpus, haltPollParams: host.haltPollParams,
    },
    guest: spec.guest === 'probe' ? PROBE_KERNEL : spec.guest,
    ...(spec.guest === 'linux' ? { linuxKit: linuxKitInfo() ?? null, linuxWorkloadArgs: spec.workloadArgs ?? '' } : {}),
    ...(spec.guest === 'linux' && spec.bare ? { bare: { binary: LINUX_HOST_WORKLOAD } } : {}),
    configs: prepared.map((p) => ({ name: p.name, config: p.config, resolved: resolveMachine(p.config, host).resolution, qemu: p.qemuArgs })),
  };
}
