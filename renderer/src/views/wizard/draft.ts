// The wizard's working copy of a VM configuration and its conversion to the API's config.
import type { HostInfo } from '../../../../electron/service/api.ts';
import { DEFAULT_MEMORY_MIB, type DiskConfig } from '../../../../electron/vmm/config/vm-config.ts';
import type { DeviceConfig } from '../../../../electron/vmm/config/device-config.ts';
import { NEWEST_MACHINE } from '../../../../electron/vmm/machine/machine-types.ts';
import { NO_NET, draftNetToConfig, type DraftNet } from './net-draft.ts';
import { typedPin } from './typed-text.ts';

export interface Draft {
  name: string;
  guest: 'probe' | 'linux' | 'custom';
  probeScenario: string;
  probeArgs: string;
  kernel: string;
  initrd: string;
  append: string;
  pvmProfile: boolean;
  /** Numbers as the user typed them: kept as text, never snapped to a limit (validate.ts judges them). */
  cpus: string;
  memoryMiB: string;
  machine: string;
  cpuFeatures: Record<string, boolean>;
  cpuPm: boolean;
  memLock: boolean;
  haltPollMode: 'default' | 'custom';
  haltPollNs: string;
  /** Guest-side polling (a Linux guest's cpuidle-haltpoll) and its maximum, as typed; not offered for the probe. */
  guestPoll: boolean;
  guestHaltPollNs: string;
  /** Host CPUs in order, as typed ("0,1", "0-3"): vCPU i runs on the i-th; empty = not pinned. */
  pin: string;
  /** A virtio-rng device on the PCI bus (rng=on). */
  rng: boolean;
  /** The network card: none, user networking with host port forwards, or a tap (net-draft.ts). */
  net: DraftNet;
  /** virtio-blk disks, in order (paths as typed). */
  disks: DraftDisk[];
  /** Devices such as isa-debug-exit (--device): no field edits them, so an edit keeps them as saved. */
  devices: DeviceConfig[];
}

export interface DraftDisk {
  path: string;
  readonly: boolean;
  /** snapshot=on: kept as ticked even while read-only wins over it (diskMode), as the config keeps both. */
  snapshot: boolean;
}

export const PROBE_SCENARIOS: { name: string; summary: string; args?: string }[] = [
  { name: 'echo', summary: 'a line shell on the console (help, cpus, poweroff); idles in HLT between keystrokes' },
  { name: 'idle', summary: 'LAPIC timer ticks with HLT in between: the halt-polling workload', args: 'ms=60000 period_us=1000' },
  { name: 'pio', summary: 'a loop of port writes: I/O exits', args: 'count=100000' },
  { name: 'ipi', summary: 'IPI ping-pong between vCPU 0 and 1 waiting in HLT; live=1 reports wake-up latency p50/p99 every second (2+ vCPUs)', args: 'live=1' },
  { name: 'timer', summary: 'LAPIC timer wake-up lateness from HLT; live=1 reports p50/p99 every second', args: 'live=1' },
  { name: 'spinlock', summary: 'all vCPUs contend one lock; with kvm-pv-unhalt waiters halt and are kicked (2+ vCPUs)', args: 'ms=60000' },
  { name: 'hello', summary: 'brings up every vCPU, prints the paravirt CPUID leaves, powers off' },
  { name: 'virtio-rng', summary: 'scans the PCI bus and reads random bytes from the virtio-rng device (turn virtio-rng on in step 3, Storage & network), powers off', args: 'bytes=64 rounds=4' },
  { name: 'net-dhcp', summary: 'asks the network card for an address by DHCP (choose user networking under Network), prints the offer, powers off' },
  { name: 'net-listen', summary: 'gets an address by DHCP, then waits for a TCP connection to its port (forward a host port to it under Network), powers off', args: 'port=8080 wait_ms=60000' },
  { name: 'virtio-blk', summary: 'reads, writes, flushes and reads back sectors of the first disk (add one under Storage), powers off', args: 'sector=8 sectors=8' },
];

export function initialDraft(host: HostInfo | null, guest: 'probe' | 'linux' | undefined, names: Set<string>): Draft {
  const g = guest ?? (host?.defaultGuest.kind === 'linux' && host.guests.find((x) => x.kind === 'linux')?.built ? 'linux' : 'probe');
  const newest = host?.machineTypes.find((m) => m.newest)?.name ?? host?.machineTypes.at(-1)?.name ?? NEWEST_MACHINE;
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
    cpus: String(Math.min(2, host?.maxVcpus || 2)),
    memoryMiB: String(DEFAULT_MEMORY_MIB[g]),
    machine: newest,
    cpuFeatures: {},
    cpuPm: false,
    memLock: false,
    haltPollMode: 'default',
    haltPollNs: '200000',
    guestPoll: false,
    guestHaltPollNs: '200000',
    pin: '',
    rng: false,
    net: { ...NO_NET, forwards: [] },
    disks: [],
    devices: [],
  };
}

/** A number field's text as a number when it is one; otherwise the text, for the service to refuse in its words. */
function numberOrText(text: string): number | string {
  return /^\s*\d{1,16}\s*$/.test(text) ? Number(text) : text;
}

/** The configuration the service validates (and createVm stores). */
/**
 * The draft once host info arrives after the wizard opened (the newest machine type, the vCPUs it
 * allows, the default guest): on a slow host that happens while the user types, so the host's
 * defaults go only to fields the user has not touched, and once anything is touched the guest on
 * screen is theirs (its fields are being filled in) and the defaults follow it.
 */
export function withLateHost(draft: Draft, host: HostInfo, guest: 'probe' | 'linux' | undefined, names: Set<string>, touched: ReadonlySet<keyof Draft>): Draft {
  const shown = touched.size > 0 && (draft.guest === 'probe' || draft.guest === 'linux') ? draft.guest : guest;
  const defaults = initialDraft(host, shown, names);
  const next = { ...draft };
  for (const k of Object.keys(defaults) as (keyof Draft)[]) if (!touched.has(k)) (next as Record<string, unknown>)[k] = defaults[k];
  return next;
}

export function draftToConfig(d: Draft): Record<string, unknown> & { version: 1 } {
  const c: Record<string, unknown> & { version: 1 } = {
    version: 1,
    name: d.name.trim(),
    guest: d.guest,
    cpus: numberOrText(d.cpus),
    memoryMiB: numberOrText(d.memoryMiB),
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
  if (d.haltPollMode === 'custom') c.haltPollNs = numberOrText(d.haltPollNs);
  if (d.guestPoll && d.guest !== 'probe') c.guestHaltPollNs = numberOrText(d.guestHaltPollNs);
  if (d.rng) c.rng = true;
  const net = draftNetToConfig(d.net);
  if (net) c.net = net;
  if (d.disks.length) c.disks = d.disks.map(draftDiskToConfig);
  if (d.devices.length) c.devices = d.devices.map((x) => ({ ...x }));
  const pin = typedPin(d.pin);
  if (pin === undefined) c.pin = d.pin;
  else if (pin.length) c.pin = pin;
  return c;
}

/** A drafted disk as the config has it (the service's checks and the summary take the same). */
export function draftDiskToConfig(x: DraftDisk): DiskConfig {
  return { path: x.path.trim(), ...(x.readonly ? { readonly: true as const } : {}), ...(x.snapshot ? { snapshot: true as const } : {}) };
}
