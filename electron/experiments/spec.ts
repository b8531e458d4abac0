// What an experiment spec may be, checked once for every surface: the API (service/experiments.ts),
// `unhalt bench` (cli/bench.ts) and the runner (runner.ts prepareExperiment, which adds what
// depends on this host: the workload, the runnability of each config). Input is untrusted: it may
// come from a WebSocket as any JSON. The limits are plain data (limits.ts) so the renderer can
// show them without importing this file.
import { parseConfigString } from '../vmm/config/config-string.ts';
import type { ExperimentSpec } from './types.ts';
import { ExperimentError } from './spec-error.ts';
import { validateUserBenchmark } from './user-bench.ts';
import { validateConfig } from '../vmm/config/vm-config.ts';
import { CONFIG_NAME, MAX_CONFIGS, MAX_CONTENTION, MAX_DEADLINE_S, MAX_RUNS, MAX_WORKLOAD_ARGS, FEW_RUNS } from './limits.ts';

export { CONFIG_NAME, MAX_CONFIGS, MAX_DEADLINE_S, MAX_RUNS, MAX_WORKLOAD_ARGS, FEW_RUNS };

export { ExperimentError };

const SPEC_FIELDS = new Set(['guest', 'workload', 'workloadArgs', 'configs', 'runs', 'vsQemu', 'bare', 'deadlineS', 'vm', 'bench', 'contention']);

/** The label of an experiment whose figure is the user's own host command's (no workload named). */
export const HOST_CMD_WORKLOAD = 'host-cmd';
/** The same for the user's own guest command. */
export const GUEST_CMD_WORKLOAD = 'guest-cmd';

/** The label of an unnamed user benchmark. */
export const userBenchLabel = (b: { guestCmd?: unknown }): string => (b.guestCmd !== undefined ? GUEST_CMD_WORKLOAD : HOST_CMD_WORKLOAD);

/**
 * Checks the shape, the limits and every config string of a spec; returns a clean copy. `vm` and
 * `bench` arrive here resolved (a VM's whole configuration, a command's argument vector): the
 * CLI builds them from what its user typed, the API only through experiment-api.ts, which
 * refuses them raw and resolves a VM id and a confirmed command id instead.
 */
export function validateSpec(raw: unknown): ExperimentSpec {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ExperimentError('an experiment must be an object');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!SPEC_FIELDS.has(k)) throw new ExperimentError(`unknown experiment field "${clip(k)}"`);
  const vm = r.vm === undefined ? undefined : checkVm(r.vm);
  const bench = r.bench === undefined ? undefined : validateUserBenchmark(r.bench);
  // A library VM has its own guest; a bare config string names one of ours.
  const guest = vm ? vm.config.guest : r.guest;
  if (vm && r.guest !== undefined && r.guest !== guest) throw new ExperimentError(`the experiment's guest is ${describe(r.guest)} but VM "${vm.name}" boots ${guest}; leave the guest out with a VM`);
  if (guest !== 'probe' && guest !== 'linux' && !(guest === 'custom' && vm)) throw new ExperimentError(`experiment guest must be probe or linux, got ${describe(r.guest)}`);
  if (guest === 'custom' && !bench) throw new ExperimentError(`VM "${vm!.name}" boots its own kernel, where the built-in workloads cannot run: give your own benchmark (--host-cmd 'CMD' or --guest-cmd 'CMD', with --metric 'REGEX')`);
  if (bench?.guestCmd && guest === 'probe') throw new ExperimentError('a guest command runs through the Linux agent, which the probe guest does not have: use --guest linux, or --vm with a Linux VM (an imported one has the agent)');
  const workload = r.workload === undefined && bench ? userBenchLabel(bench) : text(r.workload, 'workload', 64);
  if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(workload)) throw new ExperimentError(`workload "${clip(workload)}" must be a lower-case name (letters, digits, - and _)`);
  const spec: ExperimentSpec = { guest, workload, configs: [], runs: 0 };
  if (vm) spec.vm = vm;
  if (bench) spec.bench = bench;
  if (r.workloadArgs !== undefined) {
    const args = text(r.workloadArgs, 'workloadArgs', MAX_WORKLOAD_ARGS);
    if (!/^[\x20-\x7e]*$/.test(args)) throw new ExperimentError('workload arguments must be one line of printable ASCII');
    spec.workloadArgs = args;
  }
  if (!Array.isArray(r.configs) || r.configs.length < 2) throw new ExperimentError('an experiment needs two or more configurations (a list of at least two configurations, each { name, config })');
  if (r.configs.length > MAX_CONFIGS) throw new ExperimentError(`an experiment compares at most ${MAX_CONFIGS} configurations, got ${r.configs.length}`);
  const names = new Set<string>();
  spec.configs = r.configs.map((c, i) => {
    if (typeof c !== 'object' || c === null || Array.isArray(c)) throw new ExperimentError(`configuration #${i + 1} must be an object { name, config }`);
    const { name, config, ...rest } = c as Record<string, unknown>;
    if (Object.keys(rest).length) throw new ExperimentError(`configuration #${i + 1}: unknown field "${clip(Object.keys(rest)[0]!)}"`);
    const n = text(name, `configuration #${i + 1} name`, 64);
    if (!CONFIG_NAME.test(n)) throw new ExperimentError(`configuration name "${clip(n)}": use up to 40 letters, digits, spaces and . _ + - (starting with a letter or digit)`);
    if (names.has(n)) throw new ExperimentError(`two configurations are named "${n}"`);
    names.add(n);
    const configText = text(config, `configuration "${n}"`, 4096);
    try {
      // On a VM: its configuration with the named knobs changed (the one parser, on top of it).
      if (vm && /(^|,)\s*(disk|readonly|snapshot)\s*=/.test(configText)) throw new Error('disk= is not a bench knob: the runs use the VM\'s own disks, each attached snapshot=on; drop it');
      parseConfigString(configText, vm ? { ...vm.config } : { guest: spec.guest });
    } catch (e) {
      throw new ExperimentError(`configuration "${n}": ${(e as Error).message}`);
    }
    return { name: n, config: configText };
  });
  if (typeof r.runs !== 'number' || !Number.isSafeInteger(r.runs) || r.runs < 1 || r.runs > MAX_RUNS) {
    throw new ExperimentError(`runs must be a whole number from 1 to ${MAX_RUNS}, got ${describe(r.runs)}`);
  }
  spec.runs = r.runs;
  for (const k of ['vsQemu', 'bare'] as const) {
    if (r[k] === undefined) continue;
    if (typeof r[k] !== 'boolean') throw new ExperimentError(`${k} must be true or false, got ${describe(r[k])}`);
    if (r[k]) spec[k] = true;
  }
  if (r.deadlineS !== undefined) {
    if (typeof r.deadlineS !== 'number' || !(r.deadlineS > 0) || r.deadlineS > MAX_DEADLINE_S) {
      throw new ExperimentError(`the deadline must be a number of seconds above 0 and at most ${MAX_DEADLINE_S}, got ${describe(r.deadlineS)}`);
    }
    spec.deadlineS = r.deadlineS;
  }
  if (r.contention !== undefined) {
    if (typeof r.contention !== 'number' || !Number.isSafeInteger(r.contention) || r.contention < 0 || r.contention > MAX_CONTENTION) {
      throw new ExperimentError(`host contention must be a whole number of CPU-bound processes from 0 to ${MAX_CONTENTION}, got ${describe(r.contention)}`);
    }
    if (r.contention > 0) spec.contention = r.contention;
  }
  return spec;
}

/** A library VM as the experiment's base: its name, its first disk's image, its whole configuration (checked as any saved VM's). */
function checkVm(v: unknown): NonNullable<ExperimentSpec['vm']> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ExperimentError('vm must be an object { name, config }');
  const { name, image, config, ...rest } = v as Record<string, unknown>;
  if (Object.keys(rest).length) throw new ExperimentError(`vm: unknown field "${clip(Object.keys(rest)[0]!)}"`);
  const n = text(name, 'vm name', 256);
  let c;
  try {
    c = validateConfig(config);
  } catch (e) {
    throw new ExperimentError(`VM "${clip(n)}": ${(e as Error).message}`);
  }
  const out: NonNullable<ExperimentSpec['vm']> = { name: n, config: c };
  if (image !== undefined) out.image = text(image, 'vm image', 4096);
  return out;
}

/** Which runners an experiment uses: every config under Unhalt, also under QEMU, and a bare row (Linux workloads only). */
export function runnersOf(spec: Pick<ExperimentSpec, 'vsQemu' | 'bare' | 'guest'>): { vmms: ('unhalt' | 'qemu')[]; bare: boolean } {
  return { vmms: spec.vsQemu ? ['unhalt', 'qemu'] : ['unhalt'], bare: spec.bare === true && spec.guest === 'linux' };
}

/** How many runs an experiment makes: every config under every VMM, and the bare runs, `runs` times each. */
export function totalRuns(spec: Pick<ExperimentSpec, 'vsQemu' | 'bare' | 'guest' | 'runs' | 'configs'>): number {
  const { vmms, bare } = runnersOf(spec);
  return spec.runs * (spec.configs.length * vmms.length + (bare ? 1 : 0));
}

/** The warning for a spec with too few runs for a verdict to mean much, or undefined. */
export function fewRunsWarning(runs: number): string | undefined {
  return runs < FEW_RUNS
    ? `${runs} run${runs === 1 ? '' : 's'} per configuration: fewer than ${FEW_RUNS} runs rarely show a difference as significant (the verdicts say so); use ${FEW_RUNS} or more`
    : undefined;
}

function text(v: unknown, field: string, max: number): string {
  if (typeof v !== 'string') throw new ExperimentError(`${field} must be text, got ${describe(v)}`);
  if (v.length > max) throw new ExperimentError(`${field} is ${v.length} characters long; at most ${max} are allowed`);
  return v;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return `"${clip(v)}"`;
  if (typeof v === 'object') return 'an object';
  return typeof v === 'number' || typeof v === 'boolean' ? String(v) : typeof v;
}

function clip(s: string, n = 40): string {
  const printable = s.replace(/[^\x20-\x7e]/g, '?');
  return printable.length > n ? `${printable.slice(0, n)}…` : printable;
}
