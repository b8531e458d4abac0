// What an experiment spec may be, checked once for every surface: the API (service/experiments.ts),
// `unhalt bench` (cli/bench.ts) and the runner (runner.ts prepareExperiment, which adds what
// depends on this host: the workload, the runnability of each config). Input is untrusted: it may
// come from a WebSocket as any JSON. The limits are plain data (limits.ts) so the renderer can
// show them without importing this file.
import { parseConfigString } from '../vmm/config/config-string.ts';
import type { ExperimentSpec } from './types.ts';
import { CONFIG_NAME, MAX_CONFIGS, MAX_DEADLINE_S, MAX_RUNS, MAX_WORKLOAD_ARGS, FEW_RUNS } from './limits.ts';

export { CONFIG_NAME, MAX_CONFIGS, MAX_DEADLINE_S, MAX_RUNS, MAX_WORKLOAD_ARGS, FEW_RUNS };

/** A spec or an experiment that cannot be run as given; the message is one line for a user. */
export class ExperimentError extends Error {
  override name = 'ExperimentError';
}

const SPEC_FIELDS = new Set(['guest', 'workload', 'workloadArgs', 'configs', 'runs', 'vsQemu', 'bare', 'deadlineS']);

/** Checks the shape, the limits and every config string of a spec; returns a clean copy. */
export function validateSpec(raw: unknown): ExperimentSpec {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ExperimentError('an experiment must be an object');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!SPEC_FIELDS.has(k)) throw new ExperimentError(`unknown experiment field "${clip(k)}"`);
  if (r.guest !== 'probe' && r.guest !== 'linux') throw new ExperimentError(`experiment guest must be probe or linux, got ${describe(r.guest)}`);
  const workload = text(r.workload, 'workload', 64);
  if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(workload)) throw new ExperimentError(`workload "${clip(workload)}" must be a lower-case name (letters, digits, - and _)`);
  const spec: ExperimentSpec = { guest: r.guest, workload, configs: [], runs: 0 };
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
      parseConfigString(configText, { guest: spec.guest });
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
  return spec;
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
