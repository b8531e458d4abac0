// The tuning advisor on KVM: checks a tune request once for every surface (`unhalt tune`, the
// API), then runs advisor.ts's search with compareConfigs as its measurement (the current
// configuration and one candidate, alternately, per round) and the wall clock as its clock. The
// result is an experiment record too (rows per configuration, every raw run), so it is kept and
// listed with the others.
import { haltPollParamsOf } from './halt-poll-model.ts';
import { parseConfigString, formatConfigString, withKnobs } from '../vmm/config/config-string.ts';
import { resolveMachine } from '../vmm/config/resolve.ts';
import { ConfigError, type VmConfig } from '../vmm/config/vm-config.ts';
import { probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { hostSpeed } from '../vmm/host-speed.ts';
import { AdvisorError, ROUND_RUNS, applyDelta, deltaString, goalProblem, searchKnobs, type Advice, type Candidate, type KnobDelta, type Sample } from './advisor.ts';
import { compareConfigs } from './compare.ts';
import { ExperimentCancelled, ExperimentError } from './runner.ts';
import { LINUX_ON_PVM, hostKindOf, prepareExperiment, type HostSource } from './prepare.ts';
import { failuresOf, summarize } from './summary.ts';
import { MAX_WORKLOAD_ARGS } from './limits.ts';
import { GOAL_KINDS, MAX_BUDGET_S, MIN_BUDGET_S, type GoalKind, type TuneSpec } from './tune-limits.ts';

export type { TuneSpec };
import type { ExperimentProgress, ExperimentResultRow, ExperimentSpec, RunFailure, RunRecord } from './types.ts';
import { workload, workloadNames, type Workload } from './workloads.ts';
import { benchWorkload } from './bench-workload.ts';
import { LoadSampler, hostConditions, type HostConditions } from './conditions.ts';
import { validateSpec } from './spec.ts';
import type { UserBenchmark } from './user-bench.ts';
import { configOnVm } from './vm-base.ts';

export { AdvisorError, applyDelta };


/** A tune's result: the advice, and the experiment record's fields (rows, raw runs, failures). */
export interface TuneResult {
  kind: 'tune';
  tune: TuneSpec;
  advice: Advice;
  /** The recommended configuration as a config string (machine type pinned); absent: keep the current one. */
  recommendedConfig?: string;
  /** For the experiments list: what ran, as an experiment spec. */
  spec: ExperimentSpec;
  status: 'ok' | 'partial' | 'failed';
  unit: string;
  rows: ExperimentResultRow[];
  comparisons: NonNullable<Advice['current']['comparison']>[];
  raw: RunRecord[];
  failures: RunFailure[];
  wallMs: number;
  environment: Record<string, unknown>;
  conditions?: HostConditions;
  notes: string[];
}

const FIELDS = new Set(['guest', 'workload', 'workloadArgs', 'config', 'vmId', 'vmName', 'goal', 'latencyBound', 'budgetS', 'vm', 'bench']);

/** The goal a user's benchmark implies: its metric's direction (lower: the p50 of its figure; higher: the figure as a throughput). */
export { benchGoal } from './user-bench.ts';

/** The workload a tune measures: a built-in one, or the user's benchmark. */
function tuneWorkload(spec: Pick<TuneSpec, 'guest' | 'workload' | 'bench'>): Workload {
  return spec.bench ? benchWorkload(spec.workload, spec.bench, spec.guest) : workload(spec.guest, spec.workload);
}

/** The configuration a tune starts from: the config string alone, or on a library VM its knobs changed on top of it. */
function currentConfig(spec: Pick<TuneSpec, 'guest' | 'config' | 'vm'>): VmConfig {
  return spec.vm ? configOnVm(spec.vm.config, spec.config) : parseConfigString(spec.config, { guest: spec.guest });
}

/** The one check of a tune request (shape, limits, the config, the goal against the workload); a clean copy. */
export function validateTuneSpec(raw: unknown): TuneSpec {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ExperimentError('a tune request must be an object');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!FIELDS.has(k)) throw new ExperimentError(`unknown tune field "${String(k).slice(0, 40)}"`);
  // A VM and a benchmark come only from the CLI (a library VM by name, a saved workload): the
  // API's startTune builds its request from named fields and passes neither.
  const checked = r.vm !== undefined || r.bench !== undefined
    ? validateSpec({ vm: r.vm, bench: r.bench, workload: r.workload, configs: [{ name: 'a', config: '' }, { name: 'b', config: '' }], runs: 1 })
    : undefined;
  if (checked?.bench && !checked.vm) throw new ExperimentError('the user\'s own benchmark is tuned on a VM of the library: unhalt tune VM --workload SAVED');
  const guest = checked?.vm ? checked.guest : r.guest;
  if (guest !== 'probe' && guest !== 'linux' && !(guest === 'custom' && checked?.bench)) throw new ExperimentError('the guest must be probe or linux: the advisor runs the bench workloads, which need one of them');
  if (typeof r.workload !== 'string' || !r.workload) throw new ExperimentError(`a workload is required (${workloadNames()})`);
  let w: Workload;
  try {
    w = tuneWorkload({ guest, workload: r.workload, ...(checked?.bench ? { bench: checked.bench } : {}) });
  } catch (e) {
    throw new ExperimentError((e as Error).message);
  }
  if (!GOAL_KINDS.includes(r.goal as GoalKind)) throw new ExperimentError(`the goal must be one of ${GOAL_KINDS.join(', ')}, got ${JSON.stringify(r.goal)?.slice(0, 40)}`);
  const spec: TuneSpec = { guest, workload: w.name, config: '', goal: r.goal as GoalKind, budgetS: 0 };
  if (checked?.vm) spec.vm = checked.vm;
  if (checked?.bench) spec.bench = checked.bench;
  if (r.latencyBound !== undefined) {
    if (typeof r.latencyBound !== 'number') throw new ExperimentError(`the latency bound must be a number (${w.unit})`);
    spec.latencyBound = r.latencyBound;
  }
  const problem = goalProblem({ kind: spec.goal, ...(spec.latencyBound !== undefined ? { latencyBound: spec.latencyBound } : {}) }, { name: w.name, unit: w.unit, lowerIsBetter: w.lowerIsBetter, hasTail: !!w.tail });
  if (problem) throw new ExperimentError(problem);
  if (typeof r.budgetS !== 'number' || !Number.isFinite(r.budgetS) || r.budgetS < MIN_BUDGET_S || r.budgetS > MAX_BUDGET_S) {
    throw new ExperimentError(`the budget must be from ${MIN_BUDGET_S} s to ${MAX_BUDGET_S / 3600} h, got ${JSON.stringify(r.budgetS)?.slice(0, 20)}`);
  }
  spec.budgetS = r.budgetS;
  if (r.workloadArgs !== undefined) {
    if (typeof r.workloadArgs !== 'string' || r.workloadArgs.length > MAX_WORKLOAD_ARGS || !/^[\x20-\x7e]*$/.test(r.workloadArgs)) {
      throw new ExperimentError(`workload arguments must be one line of printable ASCII, at most ${MAX_WORKLOAD_ARGS} characters`);
    }
    if (r.workloadArgs.trim()) spec.workloadArgs = r.workloadArgs;
  }
  if (typeof r.config !== 'string') throw new ExperimentError('the configuration must be a config string such as cpus=1,halt-poll-ns=0');
  let c: VmConfig;
  try {
    c = currentConfig({ guest: spec.guest, config: r.config, ...(spec.vm ? { vm: spec.vm } : {}) });
  } catch (e) {
    throw new ExperimentError(`the configuration: ${(e as Error).message}`);
  }
  if (c.cpus < w.minCpus) throw new ExperimentError(`workload ${w.name} needs at least ${w.minCpus} vCPUs; this configuration has ${c.cpus}`);
  // Every knob written out, the machine type as its version: the baseline and the advice never
  // depend on a default that may change. On a VM: the knobs given, on top of its saved configuration.
  spec.config = spec.vm ? r.config : formatConfigString(c);
  for (const k of ['vmId', 'vmName'] as const) {
    if (r[k] === undefined) continue;
    if (typeof r[k] !== 'string' || (r[k] as string).length > 100) throw new ExperimentError(`${k} must be text of at most 100 characters`);
    spec[k] = r[k] as string;
  }
  return spec;
}

/** The expected wall time of one run before any is measured (the search then uses its own runs). */
export function priorRunMs(guest: TuneSpec['guest'], slowdown: number): number {
  // Probe: boot in milliseconds, a workload of ~0.5-1 s, VM set-up and teardown; Linux: its boot
  // to the agent (4 s on hardware) and a ~5 s calibrated command, with the calibration itself.
  // A custom kernel (the user's own VM and benchmark): a distribution's boot, like Linux's.
  return guest === 'probe' ? 1500 * slowdown : (4_000 * slowdown + 10_000);
}

const CURRENT = 'current';

/** A candidate's name as an experiment row (CONFIG_NAME: no '=' or ','). */
export function rowName(label: string): string {
  return label.replace(/[=,]/g, ' ').slice(0, 40).trim();
}

/** Checks a tune request against this host before anything runs (the baseline's runnability). */
export function prepareTune(raw: unknown, host?: HostSource): TuneSpec {
  if (typeof raw === 'object' && raw !== null && (raw as TuneSpec).guest === 'linux' && hostKindOf(host) === 'pvm') throw new ExperimentError(LINUX_ON_PVM);
  const spec = validateTuneSpec(raw);
  const { baseline, candidate, ...rest } = pairSpec(spec, { label: 'check', delta: {}, stage: 'variant' }, 1);
  prepareExperiment({ ...rest, configs: [baseline, candidate] }, host);
  return spec;
}

function pairSpec(spec: TuneSpec, c: Candidate, runs: number) {
  const extra = deltaString(c.delta);
  return {
    guest: spec.guest, workload: spec.workload, runs,
    ...(spec.workloadArgs ? { workloadArgs: spec.workloadArgs } : {}),
    ...(spec.vm ? { vm: spec.vm } : {}), ...(spec.bench ? { bench: spec.bench } : {}),
    baseline: { name: CURRENT, config: spec.config },
    candidate: { name: rowName(c.label) || 'candidate', config: extra ? withKnobs(spec.config, extra) : spec.config },
  };
}

/**
 * Runs the advisor. `onProgress` gets seconds used of the budget (done/total) and what runs;
 * `signal` cancels: the run in progress ends at once and the promise rejects with ExperimentCancelled.
 */
export async function runTune(rawSpec: unknown, onProgress: (p: ExperimentProgress) => void = () => {}, signal?: AbortSignal): Promise<TuneResult> {
  const host = probeHost();
  const spec = prepareTune(rawSpec, host);
  const w = tuneWorkload(spec);
  const current = currentConfig(spec);
  const { resolution } = resolveMachine(current, host);
  const speed = hostSpeed();
  const raw: RunRecord[] = [];
  const names: string[] = [CURRENT];
  const configs: ExperimentSpec['configs'] = [{ name: CURRENT, config: spec.config }];
  const t0 = performance.now();
  const budgetS = spec.budgetS;
  let now = '';
  const report = (current?: string) => onProgress({ done: Math.min(budgetS, Math.round((performance.now() - t0) / 1000)), total: budgetS, ...(current ? { current } : {}) });
  const ticker = setInterval(() => report(now), 1000);
  const toSample = (r: RunRecord): Sample | undefined => {
    if (r.value === null || !Number.isFinite(r.value)) return undefined;
    const s: Sample = { value: r.value, wallMs: r.wallMs };
    const tail = w.tail ? r.fields[w.tail] : undefined;
    if (typeof tail === 'number') s.tail = tail;
    if (r.hostCpuNs !== undefined) s.hostCpuNs = r.hostCpuNs;
    if (r.pollNs !== undefined) s.pollNs = r.pollNs;
    if (r.haltWaitNs !== undefined) s.haltWaitNs = r.haltWaitNs;
    if (r.haltExitsPerS !== undefined) s.haltExitsPerS = r.haltExitsPerS;
    if (r.pollHitRate !== undefined) s.pollHitRate = r.pollHitRate;
    if (r.haltHists) s.haltHists = r.haltHists;
    if (r.haltHistsMs !== undefined) s.haltHistsMs = r.haltHistsMs;
    return s;
  };
  let round = 0;
  const load = new LoadSampler(); // the host's load at each round's start, for the conditions
  const runCount = new Map<string, number>();
  let advice: Advice;
  try {
    advice = await searchKnobs({
      goal: { kind: spec.goal, ...(spec.latencyBound !== undefined ? { latencyBound: spec.latencyBound } : {}) },
      unit: w.unit, lowerIsBetter: w.lowerIsBetter, hasTail: !!w.tail,
      current: {
        cpus: current.cpus, cpuPm: current.cpuPm,
        pvUnhalt: resolution.features.find((f) => f.name === 'kvm-pv-unhalt')?.value ?? false,
        ...(current.haltPollNs !== undefined ? { haltPollNs: current.haltPollNs } : {}),
        ...(current.pin ? { pin: current.pin } : {}),
      },
      hostCpus: host.hostCpus.length,
      ...(typeof host.haltPollParams.halt_poll_ns === 'number' ? { defaultHaltPollNs: host.haltPollParams.halt_poll_ns } : {}),
      haltPollParams: haltPollParamsOf(host.haltPollParams),
      runnable: (d) => {
        try {
          resolveMachine(applyDelta(current, d), host);
          return undefined;
        } catch (e) {
          return (e as Error).message;
        }
      },
      budgetMs: budgetS * 1000,
      priorRunMs: priorRunMs(spec.guest, speed.guestSlowdown),
      now: () => performance.now(),
      signal,
      onRound: (c, n) => { round = n; now = `round ${n}: ${c.label} vs current`; report(now); },
      measure: async (c, runs, sig) => {
        const t = performance.now();
        load.sample();
        const pair = pairSpec(spec, c, runs);
        if (!names.includes(pair.candidate.name)) { names.push(pair.candidate.name); configs.push(pair.candidate); }
        const r = await compareConfigs(pair, (p) => { now = `round ${round}: ${c.label} vs current, run ${p.done + 1}/${p.total}`; }, sig);
        // Runs numbered over the whole tune, per configuration (each call starts at 1).
        const recs = r.result.raw.map((x) => ({ ...x, run: (runCount.set(x.config, (runCount.get(x.config) ?? 0) + 1), runCount.get(x.config)!) }));
        raw.push(...recs);
        const side = (name: string) => recs.filter((x) => x.config === name).map(toSample).filter((s): s is Sample => !!s);
        return { baseline: side(CURRENT), candidate: side(pair.candidate.name), wallMs: performance.now() - t };
      },
    });
  } finally {
    clearInterval(ticker);
  }
  if (signal?.aborted) throw new ExperimentCancelled();
  report();
  const failures = failuresOf(raw);
  const rows = summarize(names, ['unhalt'], raw, w);
  const comparisons = advice.points.map((p) => p.comparison!).filter(Boolean).map((c) => ({ ...c, candidate: rowName(c.candidate) }));
  // On a VM: the VM's own saved configuration with the advice (its disks as saved, not the runs' snapshot ones).
  const own = spec.vm ? parseConfigString(spec.config, { ...spec.vm.config }) : current;
  const recommendedConfig = advice.recommendation.kind === 'change' ? formatConfigString(applyDelta(own, advice.recommendation.delta)) : undefined;
  return {
    kind: 'tune', tune: spec, advice, ...(recommendedConfig ? { recommendedConfig } : {}),
    spec: {
      guest: spec.guest, workload: spec.workload, ...(spec.workloadArgs ? { workloadArgs: spec.workloadArgs } : {}), configs, runs: ROUND_RUNS,
      ...(spec.vm ? { vm: spec.vm } : {}), ...(spec.bench ? { bench: spec.bench } : {}),
    },
    status: raw.length === 0 || failures.length === raw.length ? 'failed' : failures.length ? 'partial' : 'ok',
    unit: w.unit, rows, comparisons, raw, failures, wallMs: performance.now() - t0,
    environment: { hostKind: host.kind, hostCpus: host.hostCpus.length, hostSpeed: speed, haltPollParams: host.haltPollParams, node: process.versions.node },
    conditions: { ...hostConditions(), load: load.summary() },
    notes: [],
  };
}

export { ConfigError };
