// Workloads an experiment can run, and how to read each one's result from the guest's ttyS1
// events. Probe-guest workloads are scenarios of our own guest (docs/guest-contract.md); Linux
// workloads are commands of our agent (`run NAME key=value ...`, native/guest/linux/workloads/
// workloads.h), the same C code the host build runs for the bare-metal reference.
import type { AgentEvent } from '../vmm/agent/line-protocol.ts';

export interface WorkloadParam {
  default: number;
  min: number;
  max: number;
}

export interface Workload {
  name: string;
  guest: 'probe' | 'linux';
  summary: string;
  /** The guest command line (probe workloads) for given extra arguments. */
  cmdline?(args: string): string;
  /** Linux workloads: their `key=value` arguments, with the C side's defaults and limits. */
  params?: Readonly<Record<string, WorkloadParam>>;
  /** Linux workloads: a check across arguments (the C side makes the same one). */
  check?(values: Readonly<Record<string, number>>): string | undefined;
  /** Linux workloads: the id in the agent's `@u1 done workload=ID` line. */
  id?: number;
  /** The ttyS1 event that carries the result. */
  event: string;
  /** The measured value from the result event (and the boot event for the TSC rate). */
  value(result: AgentEvent, boot?: AgentEvent): number;
  unit: string;
  lowerIsBetter: boolean;
  minCpus: number;
  /** A second figure reported beside the main one (pipe: µs per round trip, as perf prints). */
  secondary?: { unit: string; value(result: AgentEvent): number };
  /**
   * Linux workloads: the parameter that sets how long a run takes (its default is the standard
   * size and the largest calibration picks), and the size calibration starts from (pacing.ts).
   */
  size?: { param: string; calibrateFrom: number };
  /** Latency workloads: the result field with the tail (p99) beside the main figure (p50). */
  tail?: string;
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
    value: (e) => e.fields.p50_ns!, tail: 'p99_ns',
  }),
  probe({
    name: 'timer', event: 'timer', unit: 'ns', lowerIsBetter: true, minCpus: 1,
    summary: 'LAPIC timer wake-up lateness from HLT (p50)',
    value: (e) => e.fields.p50_ns!, tail: 'p99_ns',
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

const linux = (w: Omit<Workload, 'guest' | 'minCpus'>): Workload => ({ ...w, guest: 'linux', minCpus: 1 });

/** The `@u1 done workload=ID` ids (workloads.h WL_ID_*). */
export const LINUX_WORKLOAD_IDS = { pipe: 1, messaging: 2, ctx: 3, probe: 4 } as const;

export const LINUX_WORKLOADS: readonly Workload[] = [
  linux({
    name: 'pipe', id: LINUX_WORKLOAD_IDS.pipe, event: 'pipe', unit: 'ms', lowerIsBetter: true,
    summary: 'like perf bench sched pipe: two processes ping-pong over two pipes; total time (perf\'s "Total time")',
    params: { loops: { default: 1_000_000, min: 1, max: 1_000_000_000 } },
    size: { param: 'loops', calibrateFrom: 1000 },
    value: (e) => e.fields.total_ns! / 1e6,
    secondary: { unit: 'µs/op', value: (e) => e.fields.per_op_ns! / 1e3 },
  }),
  linux({
    name: 'messaging', id: LINUX_WORKLOAD_IDS.messaging, event: 'messaging', unit: 'ms', lowerIsBetter: true,
    summary: 'like perf bench sched messaging: groups of 20 senders and 20 receivers over socketpairs; total time',
    params: {
      groups: { default: 10, min: 1, max: 200 },
      fds: { default: 20, min: 1, max: 64 },
      loops: { default: 100, min: 1, max: 10_000_000 },
    },
    // One loop of the default 10 groups x 20 fds is 4000 messages.
    size: { param: 'loops', calibrateFrom: 1 },
    check: (v) => (v.groups! * v.fds! * 2 > 8192 ? `groups x fds x 2 = ${v.groups! * v.fds! * 2} processes, more than 8192` : undefined),
    value: (e) => e.fields.total_ns! / 1e6,
  }),
  linux({
    name: 'ctx', id: LINUX_WORKLOAD_IDS.ctx, event: 'ctx', unit: 'µs', lowerIsBetter: true,
    summary: 'like lmbench lat_ctx: a token ring of processes each summing size_kb KiB; per context switch',
    params: {
      procs: { default: 2, min: 2, max: 1024 },
      size_kb: { default: 0, min: 0, max: 65536 },
      loops: { default: 10_000, min: 1, max: 100_000_000 },
    },
    size: { param: 'loops', calibrateFrom: 100 },
    check: (v) => (v.procs! * v.size_kb! > 1024 * 1024 ? `procs x size_kb = ${v.procs! * v.size_kb!} KiB, more than 1 GiB` : undefined),
    value: (e) => e.fields.per_switch_ns! / 1e3,
  }),
];

/**
 * A Linux workload's arguments ("loops=1000 ..."), checked against its parameters, as the
 * complete list of `key=value` tokens (defaults filled in) for the agent and the host command.
 */
export function linuxWorkloadArgs(w: Workload, args: string): string[] {
  const params = w.params ?? {};
  const values: Record<string, number> = {};
  for (const [k, p] of Object.entries(params)) values[k] = p.default;
  for (const tok of args.split(/\s+/).filter(Boolean)) {
    const m = /^([a-z_]{1,32})=(-?[0-9]{1,20})$/.exec(tok);
    if (!m) throw new Error(`${w.name}: workload argument "${tok.slice(0, 40)}" must be key=integer`);
    const key = m[1]!;
    const p = Object.hasOwn(params, key) ? params[key] : undefined;
    if (!p) throw new Error(`${w.name}: unknown argument "${key}"; valid: ${Object.keys(params).join(', ')}`);
    const n = Number(m[2]);
    if (!Number.isSafeInteger(n) || n < p.min || n > p.max) throw new Error(`${w.name}: ${key} must be from ${p.min} to ${p.max}, got ${m[2]}`);
    values[key] = n;
  }
  const problem = w.check?.(values);
  if (problem) throw new Error(`${w.name}: ${problem}`);
  return Object.entries(values).map(([k, v]) => `${k}=${v}`);
}

/** The keys a user's argument string sets (already checked by linuxWorkloadArgs). */
export function givenKeys(args: string): string[] {
  return args.split(/\s+/).filter(Boolean).map((tok) => tok.slice(0, tok.indexOf('=')));
}

/** Complete `key=value` arguments with `param` set to `size`. */
export function withSize(args: readonly string[], param: string, size: number): string[] {
  return args.map((a) => (a.startsWith(`${param}=`) ? `${param}=${size}` : a));
}

export function workload(guest: string, name: string): Workload {
  const all = [...WORKLOADS, ...LINUX_WORKLOADS];
  const w = all.find((x) => x.guest === guest && x.name === name);
  if (!w) {
    const valid = all.filter((x) => x.guest === guest).map((x) => x.name);
    throw new Error(`unknown ${guest} workload "${name.slice(0, 40)}"; valid: ${valid.join(', ') || 'none yet'}`);
  }
  return w;
}
