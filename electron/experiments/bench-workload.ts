// The user's own benchmark as a Workload (workloads.ts's shape), so the summary, the verdicts and
// the tables treat its figure like any workload's: its unit and its direction are the user's.
import type { GuestKind } from '../vmm/config/vm-config.ts';
import { benchCommandOf, type UserBenchmark } from './user-bench.ts';
import type { Workload } from './workloads.ts';

export function benchWorkload(name: string, b: UserBenchmark, guest: GuestKind): Workload {
  return {
    name,
    // The guest kind is only a label here: the user's command measures, whatever the guest runs.
    guest: guest === 'linux' ? 'linux' : 'probe',
    summary: `${benchCommandOf(b).where} command ${benchCommandOf(b).argv[0]} (metric /${b.metric}/)`,
    event: '',
    value: () => Number.NaN, // the figure comes from the command's output (user-bench.ts readMetric)
    unit: b.unit ?? '',
    lowerIsBetter: b.higherIsBetter !== true,
    minCpus: 1,
  };
}
