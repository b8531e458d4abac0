// The CPUID leaves that describe the VM's topology, filled from the vCPU count the way QEMU fills
// them from `-smp N`: one package, one die, N cores, one thread per core; APIC ID = vCPU index.
// KVM_GET_SUPPORTED_CPUID carries the *host's* topology here (or zeros, or leaves without their
// sub-leaves): a guest that believed it would size its per-package structures wrongly.
import { CPUID_FLAG_SIGNIFICANT_INDEX, type CpuidEntry } from '../../../native/kvm/abi.ts';

export interface Topology { apicId: number; cpus: number }

/** Bits of APIC ID needed to number `n` things (the shift widths of leaves 0xB/0x1F). */
export const bitsFor = (n: number): number => (n <= 1 ? 0 : Math.ceil(Math.log2(n)));

const VENDOR_INTEL_EBX = 0x756e6547; // "Genu"ineIntel
const CMP_LEGACY = 1 << 1; // 0x80000001 ECX: "core multi-processing legacy mode" (AMD)
const HTT = 1 << 28; // 01H EDX: more than one logical processor per package

export function isIntel(entries: readonly CpuidEntry[]): boolean {
  return entries.find((e) => e.function === 0)?.ebx === VENDOR_INTEL_EBX;
}

/** 01H EBX[31:24] initial APIC ID, [23:16] logical processors per package (0 with one, as QEMU), EDX HTT. */
export function topologyLeaf1(e: CpuidEntry, t: Topology): void {
  const count = t.cpus > 1 ? Math.min(t.cpus, 255) : 0;
  e.ebx = (((t.apicId & 0xff) << 24) | (count << 16) | (e.ebx & 0xffff)) >>> 0;
  e.edx = t.cpus > 1 ? (e.edx | HTT) >>> 0 : (e.edx & ~HTT) >>> 0;
}

/**
 * 04H (Intel deterministic cache parameters), per cache level: EAX[31:26] cores per package - 1,
 * EAX[25:14] logical processors sharing the cache - 1: one for L1/L2 (one thread per core), the
 * whole package's APIC-ID space for L3 (as QEMU). The cache geometry itself stays the host's.
 */
export function topologyLeaf4(e: CpuidEntry, t: Topology): void {
  if ((e.eax & 0x1f) === 0) return; // the "no more caches" sub-leaf
  const level = (e.eax >>> 5) & 0x7;
  const sharing = level >= 3 ? (1 << bitsFor(t.cpus)) - 1 : 0;
  e.eax = ((e.eax & 0x3fff) | ((sharing & 0xfff) << 14) | (((t.cpus - 1) & 0x3f) << 26)) >>> 0;
}

/**
 * 0BH / 1FH extended topology, every sub-leaf generated: level 0 = SMT (1 thread per core),
 * level 1 = core (all vCPUs), level 2 = invalid (ends the enumeration). EDX = x2APIC ID in each.
 */
export function extendedTopology(fn: number, t: Topology): CpuidEntry[] {
  const sub = (index: number, eax: number, ebx: number, type: number): CpuidEntry =>
    ({ function: fn, index, flags: CPUID_FLAG_SIGNIFICANT_INDEX, eax, ebx, ecx: ((type << 8) | index) >>> 0, edx: t.apicId });
  return [sub(0, 0, 1, 1), sub(1, bitsFor(t.cpus), t.cpus, 2), sub(2, 0, 0, 0)];
}

/** 80000001H ECX CmpLegacy: set on AMD-style vendors with more than one core, never on Intel (QEMU: Linux misreads it there). */
export function topologyLeaf80000001(e: CpuidEntry, t: Topology, intel: boolean): void {
  e.ecx = !intel && t.cpus > 1 ? (e.ecx | CMP_LEGACY) >>> 0 : (e.ecx & ~CMP_LEGACY) >>> 0;
}

/** 80000008H ECX: [15:12] APIC-ID bits for the package's threads, [7:0] threads per package - 1 (all zero with one). */
export function topologyLeaf80000008(e: CpuidEntry, t: Topology): void {
  e.ecx = t.cpus > 1 ? ((bitsFor(t.cpus) << 12) | ((t.cpus - 1) & 0xff)) >>> 0 : 0;
}

/** 8000001EH (AMD TOPOEXT): EAX extended APIC ID, EBX core ID (threads per core - 1 = 0), ECX node 0 of 1, EDX 0. */
export function topologyLeaf8000001e(e: CpuidEntry, t: Topology): void {
  e.eax = t.apicId >>> 0;
  e.ebx = t.apicId & 0xff;
  e.ecx = 0;
  e.edx = 0;
}
