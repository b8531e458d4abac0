// Facts about the host that the VMM, `unhalt doctor` and the wizard all ask the same way.
import { closeSync, existsSync, openSync, readFileSync, readSync } from 'node:fs';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { allowedHostCpus } from '../../native/kvm/affinity.ts';

const PVM_MODULE = '/sys/module/kvm_pvm';

/** PVM (a software nested hypervisor: guest ring 0 is emulated) or hardware-backed KVM. */
export type HostKind = 'pvm' | 'hardware';

export function hostKind(): HostKind {
  return existsSync(process.env.UNHALT_PVM_MODULE_PATH ?? PVM_MODULE) ? 'pvm' : 'hardware';
}

/** The KVM implementation behind /dev/kvm, by its loaded module (built-in ones appear too). */
export type KvmBackend = 'kvm_intel' | 'kvm_amd' | 'kvm_pvm' | 'unknown';

/**
 * kvm_intel and kvm_amd run guests on VMX / SVM: hardware semantics, also when that "hardware" is
 * itself emulated (KVM nested under QEMU TCG). kvm_pvm emulates guest ring 0 instead.
 */
export function kvmBackend(sysModule = process.env.UNHALT_SYS_MODULE_DIR ?? '/sys/module'): KvmBackend {
  if (hostKind() === 'pvm') return 'kvm_pvm';
  for (const m of ['kvm_intel', 'kvm_amd'] as const) if (existsSync(`${sysModule}/${m}`)) return m;
  return 'unknown';
}

/**
 * What the host Unhalt runs on is, underneath its KVM: real hardware, a virtual machine (so this
 * KVM is nested under another hypervisor), or a CPU emulated in software (QEMU TCG: everything
 * works, at 10-50x lower speed). Independent of HostKind: a PVM host is itself a virtual machine.
 */
export type HostPlatform = 'bare-metal' | 'virtual-machine' | 'emulated';

export interface HostVirtualization {
  platform: HostPlatform;
  /** The hypervisor or emulator underneath, when something names it ("KVM", "QEMU TCG", "Microsoft Hyper-V"…). */
  hypervisor?: string;
  /** The raw CPUID 0x40000000 vendor signature, when it could be read. */
  cpuidVendor?: string;
  /** What the classification rests on, one short phrase each. */
  evidence: string[];
}

/** Inputs of the classification, read from the host (or fixtures in tests); every one optional. */
export interface HostVirtualizationSources {
  /** /proc/cpuinfo */
  cpuinfo?: string;
  /** CPUID 0x40000000 EBX ECX EDX as text (/dev/cpu/0/cpuid, readable by root only on most hosts). */
  cpuidVendor?: string;
  /** /sys/hypervisor/type (Xen). */
  sysHypervisorType?: string;
  /** /sys/class/dmi/id/sys_vendor and product_name (firmware tables a hypervisor fills in). */
  dmiVendor?: string;
  dmiProduct?: string;
}

// Signatures of CPUID leaf 0x40000000 (EBX, ECX, EDX), as Linux's and QEMU's sources list them.
const CPUID_VENDORS: Record<string, string> = {
  KVMKVMKVM: 'KVM',
  TCGTCGTCGTCG: 'QEMU TCG',
  'Microsoft Hv': 'Microsoft Hyper-V',
  VMwareVMware: 'VMware',
  XenVMMXenVMM: 'Xen',
  VBoxVBoxVBox: 'VirtualBox',
  'bhyve bhyve': 'bhyve',
  'lrpepyh  vr': 'Parallels',
  ACRNACRNACRN: 'ACRN',
};

// DMI system vendors that only hypervisors use.
const DMI_VENDORS: [RegExp, string][] = [
  [/^QEMU/i, 'QEMU'], [/^VMware/i, 'VMware'], [/^innotek/i, 'VirtualBox'], [/^Xen/i, 'Xen'],
  [/^Amazon EC2/i, 'KVM (Amazon EC2)'], [/^Google/i, 'KVM (Google Compute Engine)'], [/^Parallels/i, 'Parallels'],
];

/** Pure: classifies the host from what it was seen to report (unit-tested from fixture texts). */
export function classifyHostVirtualization(src: HostVirtualizationSources): HostVirtualization {
  const evidence: string[] = [];
  const model = /^model name\s*:\s*(.*)$/m.exec(src.cpuinfo ?? '')?.[1]?.trim();
  const flags = /^flags\s*:\s*(.*)$/m.exec(src.cpuinfo ?? '')?.[1]?.split(/\s+/) ?? [];
  const vendor = src.cpuidVendor?.replace(/\0/g, '').trim();
  const named = vendor ? CPUID_VENDORS[vendor] : undefined;
  let hypervisor = named ?? (vendor ? `unknown ("${vendor}")` : undefined);
  if (vendor) evidence.push(`CPUID 0x40000000 vendor "${vendor}"`);
  const hvFlag = flags.includes('hypervisor');
  if (hvFlag) evidence.push('CPUID hypervisor bit (/proc/cpuinfo flag "hypervisor")');
  // QEMU names its emulated CPU models so: "QEMU TCG CPU version …" (-cpu max under TCG),
  // "QEMU Virtual CPU version …" (qemu64/qemu32, under TCG or KVM).
  const tcgModel = model !== undefined && /QEMU TCG CPU/i.test(model);
  if (model && /QEMU (TCG|Virtual) CPU/i.test(model)) evidence.push(`CPU model "${model}"`);
  const xen = src.sysHypervisorType?.trim();
  if (xen) { evidence.push(`/sys/hypervisor/type "${xen}"`); hypervisor ??= xen === 'xen' ? 'Xen' : xen; }
  const dmi = src.dmiVendor?.trim();
  const dmiMatch = dmi ? DMI_VENDORS.find(([re]) => re.test(dmi)) : undefined;
  const hyperVDmi = dmi === 'Microsoft Corporation' && src.dmiProduct?.trim() === 'Virtual Machine';
  if (dmiMatch || hyperVDmi) {
    evidence.push(`DMI system vendor "${dmi}"${src.dmiProduct ? ` (${src.dmiProduct.trim()})` : ''}`);
    hypervisor ??= hyperVDmi ? 'Microsoft Hyper-V' : dmiMatch![1];
  }
  if (named === 'QEMU TCG' || tcgModel) return { platform: 'emulated', hypervisor: 'QEMU TCG', ...(vendor ? { cpuidVendor: vendor } : {}), evidence };
  if (evidence.length === 0) return { platform: 'bare-metal', evidence: ['no hypervisor bit, vendor leaf or virtual firmware seen'] };
  return { platform: 'virtual-machine', ...(hypervisor ? { hypervisor } : {}), ...(vendor ? { cpuidVendor: vendor } : {}), evidence };
}

function readText(path: string): string | undefined {
  try { return readFileSync(path, 'utf8'); } catch { return undefined; }
}

/**
 * CPUID 0x40000000's vendor signature through the cpuid driver (the file offset is the leaf).
 * There is no cpuid instruction in JS; the device is usually root-only, so this is a bonus.
 */
function readCpuidVendor(): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync('/dev/cpu/0/cpuid', 'r');
    const regs = Buffer.alloc(16);
    if (readSync(fd, regs, 0, 16, 0x40000000) !== 16) return undefined;
    if (regs.readUInt32LE(0) < 0x40000000) return undefined; // no hypervisor leaves: the bytes are not a vendor
    return regs.subarray(4, 16).toString('latin1');
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * The host's platform underneath KVM, from what an unprivileged process can read.
 * UNHALT_CPUINFO_PATH stands in for /proc/cpuinfo (tests, like UNHALT_PVM_MODULE_PATH).
 */
export function hostVirtualization(): HostVirtualization {
  const dmi = '/sys/class/dmi/id';
  return classifyHostVirtualization({
    cpuinfo: readText(process.env.UNHALT_CPUINFO_PATH ?? '/proc/cpuinfo'),
    cpuidVendor: readCpuidVendor(),
    sysHypervisorType: readText('/sys/hypervisor/type'),
    dmiVendor: readText(`${dmi}/sys_vendor`),
    dmiProduct: readText(`${dmi}/product_name`),
  });
}

/** What the platform means for timings measured here (doctor prints it). */
export function platformTimingNote(v: HostVirtualization): string {
  if (v.platform === 'emulated') {
    return 'the host CPU is emulated in software: KVM here is nested inside an emulator. Guests behave right, '
      + 'but absolute speed is 10-50x off real hardware (exits, boots and wake-ups); compare only side by side on this host, as ratios';
  }
  if (v.platform === 'virtual-machine') {
    return 'this host is itself a virtual machine: KVM here is nested, so every exit also goes through the outer '
      + 'hypervisor and absolute timings are slower and noisier than on bare metal; compare side by side, as ratios';
  }
  return 'timings here are those of real hardware';
}

const HALT_POLL_DIR = '/sys/module/kvm/parameters';
export const HALT_POLL_PARAMS = ['halt_poll_ns', 'halt_poll_ns_grow', 'halt_poll_ns_grow_start', 'halt_poll_ns_shrink'] as const;

/** The host's halt-polling defaults (read-only information; a VM may override halt_poll_ns). */
export function hostHaltPollParams(): Partial<Record<(typeof HALT_POLL_PARAMS)[number], number>> {
  const out: Partial<Record<(typeof HALT_POLL_PARAMS)[number], number>> = {};
  for (const p of HALT_POLL_PARAMS) {
    try {
      out[p] = Number(readFileSync(`${HALT_POLL_DIR}/${p}`, 'utf8').trim());
    } catch { /* parameter absent on this kernel */ }
  }
  return out;
}

export function hostCpuModel(): string {
  return cpus()[0]?.model ?? 'unknown';
}

export function hostMemoryBytes(): number {
  return totalmem();
}

/** Parses a kernel CPU list such as "0-3,8,10-11" (/sys/devices/system/cpu/online). */
export function parseCpuList(text: string): number[] {
  const out: number[] = [];
  for (const part of text.trim().split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) continue;
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    for (let c = lo; c <= hi && c - lo < 4096; c++) out.push(c);
  }
  return out;
}

/**
 * The host CPUs this process may run its vCPU threads on, from the OS (never from KVM, so a host
 * without KVM still has its CPUs): the affinity mask, else the online CPUs, else
 * os.availableParallelism(). Never empty.
 */
export function hostCpuList(onlinePath = '/sys/devices/system/cpu/online'): number[] {
  try {
    const allowed = allowedHostCpus();
    if (allowed.length) return allowed;
  } catch { /* no sched_getaffinity: the next source */ }
  try {
    const online = parseCpuList(readFileSync(onlinePath, 'utf8'));
    if (online.length) return online;
  } catch { /* no sysfs */ }
  return Array.from({ length: Math.max(1, availableParallelism()) }, (_, i) => i);
}
