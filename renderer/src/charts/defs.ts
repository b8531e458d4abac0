// The live charts of a VM: which telemetry columns each one plots.
import type { ChartDef, SeriesDef } from './stream-chart.ts';
import type { VmTelemetry } from './telemetry-store.ts';
import { latencyLabel } from './labels.ts';
import { deviceByteSeries, deviceNotifySeries, deviceRequestSeries } from './device-series.ts';
import { guestIdleSeries, stealSeries } from './guest-idle.ts';

function perVcpu(field: string, ratio?: [string, string]): (t: VmTelemetry) => SeriesDef[] {
  return (t) => Array.from({ length: t.vcpuSeries() }, (_, v) => ({
    key: `${field}#${v}`, label: `vCPU ${v}`, ...(ratio ? { ratio: { num: `${ratio[0]}#${v}`, den: `${ratio[1]}#${v}` } } : {}),
  }));
}

/** What every chart draws, said once under the charts' heading (ChartsPanel) and in docs/charts. */
export const DRAWING_NOTE = 'Each line is the mean over a bin of at least a second; the faint band around it spans the bin\'s lowest to highest 100 ms sample, so a burst shows as a band, not as the level.';

export const HALT_CHART: ChartDef = {
  id: 'halt-exits',
  title: 'Halt exits per second',
  help: 'KVM halt_exits per vCPU: how often a vCPU ran HLT and returned to the host',
  source: 'samples',
  kind: 'rate',
  series: perVcpu('halt_exits_per_s'),
  empty: 'waiting for samples',
};

export const CHARTS: ChartDef[] = [
  HALT_CHART,
  {
    id: 'poll-hit-rate',
    title: 'Halt-poll hit rate',
    help: 'halt_successful_poll / halt_attempted_poll: wake-ups caught while the host was still polling; a mean is all successful polls over all attempted ones',
    source: 'samples',
    kind: 'fraction',
    series: perVcpu('poll_hit_rate', ['poll_hits', 'poll_attempts']),
    empty: 'no polls attempted',
  },
  {
    id: 'poll-cpu',
    title: 'Host CPU spent polling',
    help: '(halt_poll_success_ns + halt_poll_fail_ns) as a share of each vCPU\'s time: the price of halt polling',
    source: 'samples',
    kind: 'fraction',
    series: perVcpu('poll_cpu_fraction'),
    empty: 'no polling',
  },
  // Next to the host's polling, so the two sides' polling read together.
  {
    id: 'guest-idle',
    title: 'Guest idle: polling vs halted',
    help: 'the guest\'s own idle per vCPU, from its cpuidle states (the agent reads them each second): polling is time in the POLL state, the guest spinning by itself before it halts (cpuidle-haltpoll); halted is every other state, the halts the host sees as halt exits and may poll on in turn. With kvm-poll-control the haltpoll driver turns host polling off while it polls. A state\'s time counts when it ends; it is spread back over the intervals it covered',
    source: 'guest',
    kind: 'fraction',
    // Polling and halted shares do not average into anything: the header reads the first series.
    total: 'first',
    series: guestIdleSeries,
    empty: 'waiting for the guest agent\'s idle states',
  },
  {
    id: 'halt-wait',
    title: 'Halt wait',
    help: 'share of each vCPU\'s time spent halted (0–100 %). KVM counts a halt from HLT until the vCPU runs again, so halt wait includes the wait for a host CPU after the wake-up: with vCPUs sharing a host CPU, halt wait + run-queue wait + host CPU can pass 100 %. KVM adds a halt\'s wait when it ends, so each halt is spread back over the intervals it covered, and a vCPU still inside one (KVM\'s blocking) is drawn halted',
    source: 'samples',
    kind: 'fraction',
    series: perVcpu('halt_wait_fraction'),
    empty: 'waiting for samples',
  },
  {
    id: 'host-cpu',
    title: 'Host CPU per vCPU thread',
    help: 'share of time the host ran each vCPU thread (schedstat run time, else utime+stime): 100 % is one host CPU busy. Run time read late is spread back over the intervals it covers, so no share exceeds 100 %',
    source: 'samples',
    kind: 'fraction',
    series: perVcpu('host_cpu_fraction'),
    empty: 'waiting for samples',
  },
  {
    id: 'runqueue-wait',
    title: 'Run-queue wait per vCPU',
    help: 'share of time each vCPU thread was ready to run but waited for a host CPU (schedstat): what an overcommitted or badly pinned vCPU loses. The kernel adds a wait when it ends; it is spread back over the intervals it covered',
    source: 'samples',
    kind: 'fraction',
    series: perVcpu('runqueue_wait_fraction'),
    empty: 'no run-queue data yet (it needs the host kernel\'s schedstat, CONFIG_SCHED_INFO)',
  },
  {
    id: 'steal',
    title: 'Steal time (guest)',
    help: 'share of time each vCPU was runnable but the host ran something else, as the guest counts it (kvm-steal-time, /proc/stat, in ticks): the guest\'s view of what run-queue wait measures on the host. Steal counted late is spread back over the intervals it covered',
    source: 'guest',
    kind: 'fraction',
    series: stealSeries,
    empty: 'waiting for the guest agent\'s steal time',
  },
  {
    id: 'exits-by-kind',
    title: 'Exits by kind (all vCPUs)',
    help: 'exits per second summed over vCPUs, by reason; "other" is every exit of no named kind (MSR writes, the TSC deadline timer, EPT faults...), so the kinds add up to all',
    source: 'samples',
    kind: 'rate',
    total: 'first',
    legendByValue: true,
    series: (t) => {
      const all: SeriesDef[] = [
        { key: 'exits_per_s#sum', label: 'all exits' },
        { key: 'halt_exits_per_s#sum', label: 'halt' },
        { key: 'io_exits_per_s#sum', label: 'I/O' },
        { key: 'mmio_exits_per_s#sum', label: 'MMIO' },
        { key: 'irq_exits_per_s#sum', label: 'IRQ' },
        { key: 'signal_exits_per_s#sum', label: 'signal' },
        { key: 'hypercalls_per_s#sum', label: 'hypercall' },
        { key: 'other_exits_per_s#sum', label: 'other' },
      ];
      const present = all.filter((s) => t.samples.cols.has(s.key));
      return present.length ? present : all.slice(0, 2);
    },
    empty: 'waiting for samples',
  },
  {
    id: 'latency',
    title: 'Guest latency',
    help: 'reported by the guest over ttyS1 (IPI wake-up, context switch, pipe ping-pong): p50 / p99',
    source: 'latency',
    kind: 'us',
    legendByValue: true,
    series: (t) => t.latencyKeys.map((k) => ({ key: k, label: latencyLabel(k, t.latencyCounts[k.split(' ')[0]!]) })),
    empty: 'no latency reported yet: run a guest workload that measures it (the probe\'s ipi or timer scenario with live=1)',
  },
];

/** The Devices panel: each virtio device's requests, bytes per direction, notifications against interrupts. */
export const DEVICE_CHARTS: ChartDef[] = [
  {
    id: 'device-requests',
    title: 'Requests per second',
    help: 'requests each virtio device served (disk reads, writes and flushes; frames received and sent; entropy requests)',
    source: 'devices',
    kind: 'rate',
    legendByValue: true,
    series: deviceRequestSeries,
    empty: 'no device requests yet',
  },
  {
    id: 'device-bytes',
    title: 'Bytes per second',
    help: 'data each device moved, per direction where it has two: a disk\'s reads and writes, the network\'s received and sent frames',
    source: 'devices',
    kind: 'bytes',
    legendByValue: true,
    series: deviceByteSeries,
    empty: 'no device bytes yet',
  },
  {
    id: 'device-notify',
    title: 'Notifications and interrupts',
    help: 'per device: notifications from the guest (by ioeventfd, or as MMIO exits to the VMM where KVM has none) against the MSIs sent back',
    source: 'devices',
    kind: 'rate',
    total: 'max',
    series: deviceNotifySeries,
    empty: 'no notifications yet',
  },
];
