// The tuning advisor's goals and budget rule as plain data and one pure function: the advisor
// (advisor.ts), `unhalt tune`, the API (tune.ts) and the app's form (through
// electron/service/api.ts) read a budget with the same rule and the same words.
import type { ExperimentSpec } from './types.ts';

export const GOAL_KINDS = ['latency-p50', 'latency-p99', 'throughput', 'host-cpu'] as const;
export type GoalKind = (typeof GOAL_KINDS)[number];

export const GOAL_LABELS: Readonly<Record<GoalKind, string>> = {
  'latency-p50': 'lowest latency (p50)',
  'latency-p99': 'lowest tail latency (p99)',
  throughput: 'highest throughput',
  'host-cpu': 'least host CPU within a latency bound',
};

/** A tune request, checked (tune.ts validateTuneSpec): what `unhalt tune` and the API run. */
export interface TuneSpec {
  /** probe or linux; custom only on a library VM with the user's own benchmark. */
  guest: 'probe' | 'linux' | 'custom';
  workload: string;
  workloadArgs?: string;
  /** The current configuration, as a config string (config-string.ts). */
  config: string;
  /** The library VM it is, when it is one (for the record and Apply). */
  vmId?: string;
  vmName?: string;
  goal: GoalKind;
  /** host-cpu: the workload's figure every recommendation must meet, in its unit. */
  latencyBound?: number;
  budgetS: number;
  /**
   * A library VM tuned with the user's saved benchmark (`unhalt tune VM --workload SAVED`):
   * `config` is then the knobs changed on top of the VM (empty: the VM as it is), and every run
   * attaches its writable disks snapshot=on (experiments' vm-base.ts).
   */
  vm?: ExperimentSpec['vm'];
  bench?: ExperimentSpec['bench'];
}

/** A budget below this cannot hold two rounds of probe runs anywhere. */
export const MIN_BUDGET_S = 10;
/** A day: past that a search is a different tool. */
export const MAX_BUDGET_S = 86_400;

/**
 * A wall-clock budget as typed: `90`, `90s`, `5m`, `1.5m`, `1h` (decimal, one unit at most);
 * seconds. Throws an Error whose message is one line for the user.
 */
export function parseBudget(text: string): number {
  const t = text.trim();
  const m = /^([0-9]{1,6}(?:\.[0-9]{1,3})?)\s*(s|m|min|h)?$/.exec(t);
  if (!m) throw new Error(`the budget must be a time such as 90s, 5m or 1h, got "${t.slice(0, 20)}"`);
  const s = Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' || m[2] === 'min' ? 60 : 1);
  if (s < MIN_BUDGET_S || s > MAX_BUDGET_S) throw new Error(`the budget must be from ${MIN_BUDGET_S} s to ${MAX_BUDGET_S / 3600} h, got ${t}`);
  return s;
}
