// The workloads Compare and the advisor offer and accept: the server's own list and check
// (electron/experiments/workloads.ts, which imports nothing of Node), so a field accepts exactly
// what a start accepts, refuses the rest in the server's words, and offers the same names.
import { workload, workloadsOf } from '../../../electron/experiments/workloads.ts';
import type { UserBenchmark } from '../../../electron/experiments/user-bench.ts';

export type BenchGuest = 'probe' | 'linux';

export interface WorkloadChoice {
  name: string;
  /** One line for the list and the hint under the field (with the vCPUs it needs, beyond one). */
  summary: string;
  /** Its `key=value` parameters with their defaults (Linux workloads), for the parameters field. */
  params?: string;
}

export function workloadChoices(guest: BenchGuest): WorkloadChoice[] {
  return workloadsOf(guest).map((w) => {
    const c: WorkloadChoice = { name: w.name, summary: w.minCpus > 1 ? `${w.summary}; needs ${w.minCpus} vCPUs` : w.summary };
    if (w.params) c.params = Object.entries(w.params).map(([k, p]) => `${k}=${p.default}`).join(' ');
    return c;
  });
}

/** The server's refusal of a workload name (as typed, trimmed as it is sent), or undefined. */
export function workloadProblem(guest: BenchGuest, name: string): string | undefined {
  try {
    workload(guest, name.trim());
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** A saved benchmark in a list of workloads: where its command runs and what it runs. */
export function savedWorkloadSummary(bench: Pick<UserBenchmark, 'guestCmd' | 'hostCmd'>): string {
  return `your benchmark: ${bench.guestCmd ? 'guest' : 'host'} command ${(bench.guestCmd ?? bench.hostCmd ?? [''])[0]}`;
}
