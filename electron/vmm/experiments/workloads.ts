// Workloads an experiment can run, and how to read each one's result from the guest's ttyS1
// events. Probe-guest workloads are scenarios of our own guest (docs/guest-contract.md).
import type { AgentEvent } from '../agent/line-protocol.ts';

export interface Workload {
  name: string;
  guest: 'probe' | 'linux';
  summary: string;
  /** The guest command line (probe) for given extra arguments. */
  cmdline(args: string): string;
  /** The ttyS1 event that carries the result. */
  event: string;
  /** The measured value from the result event (and the boot event for the TSC rate). */
  value(result: AgentEvent, boot?: AgentEvent): number;
  unit: string;
  lowerIsBetter: boolean;
  minCpus: number;
}

const probe = (w: Omit<Workload, 'guest' | 'cmdline'> & { defaults?: string }): Workload => ({
  ...w,
  guest: 'probe',
  cmdline: (args) => `scenario=${w.name} ${w.defaults ?? ''} ${args}`.replace(/\s+/g, ' ').trim(),
});

export const WORKLOADS: readonly Workload[] = [
  probe({
    name: 'ipi', event: 'ipi', unit: 'ns', lowerIsBetter: true, minCpus: 2,
    summary: 'IPI ping-pong between two vCPUs that wait in HLT: wake-up round-trip latency (p50)',
    value: (e) => e.fields.p50_ns!,
  }),
  probe({
    name: 'timer', event: 'timer', unit: 'ns', lowerIsBetter: true, minCpus: 1,
    summary: 'LAPIC timer wake-up lateness from HLT (p50)',
    value: (e) => e.fields.p50_ns!,
  }),
  probe({
    name: 'spinlock', event: 'spinlock', unit: 'handoffs/s', lowerIsBetter: false, minCpus: 2,
    summary: 'all vCPUs contend one lock; PV spinlocks halt and kick when kvm-pv-unhalt is on',
    value: (e) => e.fields.handoffs_per_s!,
  }),
  probe({
    name: 'pio', event: 'pio', unit: 'ns/exit', lowerIsBetter: true, minCpus: 1,
    summary: 'port I/O exit round trip (guest-timed out instructions)',
    value: (e, boot) => (e.fields.tsc_cycles! / e.fields.count!) / (boot?.fields.tsc_khz ?? 1) * 1e6,
  }),
  probe({
    name: 'idle', event: 'idle', unit: 'ticks', lowerIsBetter: false, minCpus: 1,
    summary: '1 ms LAPIC timer ticks with HLT in between (how many arrived)',
    value: (e) => e.fields.ticks!,
  }),
];

export function workload(guest: string, name: string): Workload {
  const w = WORKLOADS.find((x) => x.guest === guest && x.name === name);
  if (!w) {
    const valid = WORKLOADS.filter((x) => x.guest === guest).map((x) => x.name);
    throw new Error(`unknown ${guest} workload "${name.slice(0, 40)}"; valid: ${valid.join(', ') || 'none yet'}`);
  }
  return w;
}
