// The wizard's working copy of a VM configuration and its conversion to the API's config.
import type { HostInfo, VmConfigDto } from '../../../../electron/service/api.ts';

export interface Draft {
  name: string;
  guest: 'probe' | 'linux' | 'custom';
  probeScenario: string;
  probeArgs: string;
  kernel: string;
  initrd: string;
  append: string;
  pvmProfile: boolean;
  cpus: number;
  memoryMiB: number;
  machine: string;
  cpuFeatures: Record<string, boolean>;
  cpuPm: boolean;
  memLock: boolean;
  haltPollMode: 'default' | 'custom';
  haltPollNs: number;
  /** Host CPUs in order: vCPU i runs on pin[i % pin.length]; empty = not pinned. */
  pin: number[];
}

export const PROBE_SCENARIOS: { name: string; summary: string; args?: string }[] = [
  { name: 'echo', summary: 'a line shell on the console (help, cpus, poweroff); idles in HLT between keystrokes' },
  { name: 'idle', summary: 'LAPIC timer ticks with HLT in between: the halt-polling workload', args: 'ms=60000 period_us=1000' },
  { name: 'pio', summary: 'a loop of port writes: I/O exits', args: 'count=100000' },
  { name: 'ipi', summary: 'IPI ping-pong between vCPU 0 and 1 waiting in HLT; live=1 reports wake-up latency p50/p99 every second (2+ vCPUs)', args: 'live=1' },
  { name: 'timer', summary: 'LAPIC timer wake-up lateness from HLT; live=1 reports p50/p99 every second', args: 'live=1' },
  { name: 'spinlock', summary: 'all vCPUs contend one lock; with kvm-pv-unhalt waiters halt and are kicked (2+ vCPUs)', args: 'ms=60000' },
  { name: 'hello', summary: 'brings up every vCPU, prints the paravirt CPUID leaves, powers off' },
];

export function initialDraft(host: HostInfo | null, guest: 'probe' | 'linux' | undefined, names: Set<string>): Draft {
  const g = guest ?? (host?.defaultGuest.kind === 'linux' && host.guests.find((x) => x.kind === 'linux')?.built ? 'linux' : 'probe');
  const newest = host?.machineTypes.find((m) => m.newest)?.name ?? host?.machineTypes.at(-1)?.name ?? 'unhalt-1.1';
  let name = g === 'linux' ? 'linux' : 'probe';
  if (names.has(name)) {
    let i = 2;
    while (names.has(`${name}-${i}`)) i++;
    name = `${name}-${i}`;
  }
  return {
    name,
    guest: g,
    probeScenario: 'echo',
    probeArgs: '',
    kernel: '',
    initrd: '',
    append: '',
    pvmProfile: true,
    cpus: Math.min(2, host?.maxVcpus ?? 2),
    memoryMiB: g === 'linux' ? 512 : 128,
    machine: newest,
    cpuFeatures: {},
    cpuPm: false,
    memLock: false,
    haltPollMode: 'default',
    haltPollNs: 200_000,
    pin: [],
  };
}

/** The configuration the service validates (and createVm stores). */
export function draftToConfig(d: Draft): Partial<VmConfigDto> & { version: 1 } {
  const c: Partial<VmConfigDto> & { version: 1 } = {
    version: 1,
    name: d.name.trim(),
    guest: d.guest,
    cpus: d.cpus,
    memoryMiB: d.memoryMiB,
    machine: d.machine,
    cpuFeatures: { ...d.cpuFeatures },
    cpuPm: d.cpuPm,
    memLock: d.memLock,
  };
  if (d.guest === 'probe') {
    const args = d.probeArgs.trim();
    if (d.probeScenario !== 'echo' || args) c.append = `scenario=${d.probeScenario}${args ? ` ${args}` : ''}`;
  } else {
    if (d.guest === 'custom') c.kernel = d.kernel.trim();
    if (d.initrd.trim()) c.initrd = d.initrd.trim();
    if (d.append.trim()) c.append = d.append.trim();
    c.pvmProfile = d.pvmProfile;
  }
  if (d.haltPollMode === 'custom') c.haltPollNs = d.haltPollNs;
  if (d.pin.length) c.pin = [...d.pin];
  return c;
}
