// Workloads an experiment can run, and how to read each one's result from the guest's ttyS1
// events. Probe-guest workloads are scenarios of our own guest (docs/guest-contract.md); Linux
// workloads are commands of our agent (`run NAME key=value ...`, native/guest/linux/workloads/
// workloads.h), the same C code the host build runs for the bare-metal reference.
// Pure (no Node imports): the renderer offers and checks workloads with this very list
// (renderer/src/lib/workloads.ts), so a field accepts exactly what a start accepts.
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
  /**
   * Linux workloads that run a Debian tool from the workloads disk (the agent's tools.c): the
   * runner attaches the disk read-only; there is no host build of them for --bare.
   */
  tool?: 'perf' | 'cyclictest' | 'iperf3' | 'stress-ng' | 'sockperf';
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
export const LINUX_WORKLOAD_IDS = {
  pipe: 1, messaging: 2, ctx: 3, probe: 4,
  // The workloads disk's tools (native/guest/linux/agent/tools.h TOOL_ID_*).
  perfPipe: 10, perfMessaging: 11, cyclictest: 12, iperf3Tcp: 13, stressSwitch: 14, sockperfRr: 15,
} as const;

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
  // Debian's own tools from the workloads disk: the seeds' experiments with the seeds' commands.
  linux({
    name: 'perf-pipe', id: LINUX_WORKLOAD_IDS.perfPipe, event: 'perf_pipe', unit: 'ms', lowerIsBetter: true, tool: 'perf',
    summary: 'perf bench sched pipe -l LOOPS (Debian\'s linux-perf, workloads disk); total time',
    params: { loops: { default: 1_000_000, min: 1, max: 1_000_000_000 } },
    size: { param: 'loops', calibrateFrom: 1000 },
    value: (e) => e.fields.total_ns! / 1e6,
    secondary: { unit: 'µs/op', value: (e) => e.fields.per_op_ns! / 1e3 },
  }),
  linux({
    name: 'perf-messaging', id: LINUX_WORKLOAD_IDS.perfMessaging, event: 'perf_messaging', unit: 'ms', lowerIsBetter: true, tool: 'perf',
    summary: 'perf bench sched messaging -g GROUPS -l LOOPS (Debian\'s linux-perf, workloads disk); total time',
    params: { groups: { default: 10, min: 1, max: 200 }, loops: { default: 100, min: 1, max: 10_000_000 } },
    size: { param: 'loops', calibrateFrom: 1 },
    value: (e) => e.fields.total_ns! / 1e6,
  }),
  linux({
    name: 'cyclictest', id: LINUX_WORKLOAD_IDS.cyclictest, event: 'cyclictest', unit: 'µs', lowerIsBetter: true, tool: 'cyclictest',
    summary: 'cyclictest -q -m -l LOOPS -i INTERVAL_US -t THREADS (Debian\'s rt-tests, workloads disk): timer wake-up latency (p50)',
    params: {
      loops: { default: 10_000, min: 1, max: 100_000_000 },
      interval_us: { default: 1000, min: 50, max: 1_000_000 },
      threads: { default: 1, min: 1, max: 64 },
    },
    size: { param: 'loops', calibrateFrom: 100 },
    value: (e) => e.fields.p50_ns! / 1e3, tail: 'p99_ns',
  }),
  linux({
    name: 'iperf3-tcp', id: LINUX_WORKLOAD_IDS.iperf3Tcp, event: 'iperf3_tcp', unit: 'Gbit/s', lowerIsBetter: false, tool: 'iperf3',
    summary: 'iperf3 server and client over the guest\'s loopback, -n MBYTES -l LEN_KB (Debian\'s iperf3, workloads disk); receiver rate',
    params: { mbytes: { default: 1024, min: 1, max: 1_000_000 }, len_kb: { default: 128, min: 1, max: 1024 } },
    size: { param: 'mbytes', calibrateFrom: 16 },
    value: (e) => e.fields.bits_per_s! / 1e9,
  }),
  linux({
    name: 'stress-ng-switch', id: LINUX_WORKLOAD_IDS.stressSwitch, event: 'stress_switch', unit: 'switches/s', lowerIsBetter: false, tool: 'stress-ng',
    summary: 'stress-ng --switch WORKERS --switch-ops OPS (Debian\'s stress-ng, workloads disk): context switches over pipes per second',
    params: { workers: { default: 2, min: 1, max: 256 }, ops: { default: 1_000_000, min: 1, max: 1_000_000_000 } },
    size: { param: 'ops', calibrateFrom: 1000 },
    value: (e) => e.fields.ops_per_s!,
  }),
  // The request-response latency halt polling is known for (iperf3 has no request-response
  // mode; sockperf's ping-pong is one request in flight at a time, each answered).
  linux({
    name: 'sockperf-tcp-rr', id: LINUX_WORKLOAD_IDS.sockperfRr, event: 'sockperf_rr', unit: 'µs', lowerIsBetter: true, tool: 'sockperf',
    summary: 'sockperf server and ping-pong client over the guest\'s loopback, TCP, -t SECONDS -m MSG_BYTES, MPS requests/s '
      + '(0: back to back) (Debian\'s sockperf, workloads disk): request-response round trip (p50)',
    params: {
      // At 1 s sockperf 3.7 kept 54-2846 observations in runs here (its warm-up and cool-down
      // eat into so short a run); from 2 s, about a second's worth and more.
      seconds: { default: 3, min: 2, max: 3600 },
      msg_bytes: { default: 64, min: 14, max: 65_000 },
      mps: { default: 0, min: 0, max: 1_000_000 },
    },
    size: { param: 'seconds', calibrateFrom: 2 },
    value: (e) => e.fields.p50_ns! / 1e3, tail: 'p99_ns',
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

/** Every workload's name by guest, for a usage message ("probe workloads: ipi, ...; linux workloads: ..."). */
export function workloadNames(): string {
  const names = (ws: readonly Workload[]) => ws.map((w) => w.name).join(', ');
  return `probe workloads: ${names(WORKLOADS)}; linux workloads: ${names(LINUX_WORKLOADS)}`;
}

/** The workloads a guest runs, in the order they are offered. */
export function workloadsOf(guest: string): Workload[] {
  return [...WORKLOADS, ...LINUX_WORKLOADS].filter((x) => x.guest === guest);
}

/** The workload `name` of `guest`, or an error naming the valid ones (every surface's one check). */
export function workload(guest: string, name: string): Workload {
  const valid = workloadsOf(guest);
  const w = valid.find((x) => x.name === name);
  if (!w) throw new Error(`unknown ${guest} workload "${name.slice(0, 40)}"; valid: ${valid.map((x) => x.name).join(', ') || 'none yet'}`);
  return w;
}
