// The CPUID a vCPU sees: the host's KVM_GET_SUPPORTED_CPUID, with this vCPU's APIC ID and the
// VM's topology (one thread per core, all cores in one package), the hypervisor bit, and the
// KVM signature leaves with the paravirt features the VM's configuration chose.
import type { CpuidEntry } from '../../../native/kvm/abi.ts';

export const KVM_CPUID_SIGNATURE = 0x40000000;
export const KVM_CPUID_FEATURES = 0x40000001;
/** "KVMKVMKVM\0\0\0" as EBX, ECX, EDX. */
export const KVM_SIGNATURE = { ebx: 0x4b4d564b, ecx: 0x564b4d56, edx: 0x4d } as const;

export interface CpuidOptions {
  vcpuId: number;
  cpus: number;
  /** CPUID 0x40000001 EAX (paravirt features) and EDX (hints). */
  kvmFeatures: number;
  kvmHints: number;
  /** Advertise MONITOR/MWAIT (CPUID.1:ECX bit 3): only when the VM runs MWAIT without exits. */
  mwait?: boolean;
}

const bitsFor = (n: number): number => (n <= 1 ? 0 : Math.ceil(Math.log2(n)));

export function buildCpuid(supported: readonly CpuidEntry[], o: CpuidOptions): CpuidEntry[] {
  const apicId = o.vcpuId;
  const out: CpuidEntry[] = [];
  for (const src of supported) {
    const e = { ...src };
    switch (e.function) {
      case 0x1:
        // EBX[31:24] initial APIC ID, [23:16] logical processors per package, [15:8] CLFLUSH size.
        e.ebx = ((apicId & 0xff) << 24) | ((Math.min(o.cpus, 255) & 0xff) << 16) | (e.ebx & 0xffff);
        e.ecx = (e.ecx | (1 << 31)) >>> 0; // hypervisor present
        e.ecx = o.mwait ? (e.ecx | (1 << 3)) >>> 0 : (e.ecx & ~(1 << 3)) >>> 0;
        e.edx = o.cpus > 1 ? (e.edx | (1 << 28)) >>> 0 : (e.edx & ~(1 << 28)) >>> 0; // HTT
        break;
      case 0x4: // deterministic cache parameters: cores per package - 1 in EAX[31:26], one thread per cache
        if ((e.eax & 0x1f) !== 0) e.eax = ((e.eax & 0x3fff) | (((o.cpus - 1) & 0x3f) << 26)) >>> 0;
        break;
      case 0xb:
      case 0x1f: {
        // Extended topology: level 0 = SMT (1 thread), level 1 = core (all vCPUs), then invalid.
        const level = e.index;
        if (level === 0) { e.eax = 0; e.ebx = 1; e.ecx = (1 << 8) | level; }
        else if (level === 1) { e.eax = bitsFor(o.cpus); e.ebx = o.cpus; e.ecx = (2 << 8) | level; }
        else { e.eax = 0; e.ebx = 0; e.ecx = level; }
        e.edx = apicId;
        break;
      }
      case 0x80000008: // AMD: number of cores - 1 and APIC ID size
        e.ecx = ((e.ecx & ~0xf0ff) | ((o.cpus - 1) & 0xff) | (bitsFor(o.cpus) << 12)) >>> 0;
        break;
      case KVM_CPUID_SIGNATURE:
        e.eax = KVM_CPUID_FEATURES;
        e.ebx = KVM_SIGNATURE.ebx; e.ecx = KVM_SIGNATURE.ecx; e.edx = KVM_SIGNATURE.edx;
        break;
      case KVM_CPUID_FEATURES:
        e.eax = o.kvmFeatures >>> 0;
        e.ebx = 0; e.ecx = 0;
        e.edx = o.kvmHints >>> 0;
        break;
      default:
        break;
    }
    out.push(e);
  }
  if (!out.some((e) => e.function === KVM_CPUID_SIGNATURE)) {
    out.push({ function: KVM_CPUID_SIGNATURE, index: 0, flags: 0, eax: KVM_CPUID_FEATURES, ...KVM_SIGNATURE });
    out.push({ function: KVM_CPUID_FEATURES, index: 0, flags: 0, eax: o.kvmFeatures >>> 0, ebx: 0, ecx: 0, edx: o.kvmHints >>> 0 });
  }
  return out;
}

/** The paravirt features and hints this host's KVM can offer (CPUID 0x40000001 EAX, EDX). */
export function hostKvmFeatures(supported: readonly CpuidEntry[]): { features: number; hints: number } {
  const e = supported.find((x) => x.function === KVM_CPUID_FEATURES);
  return { features: e?.eax ?? 0, hints: e?.edx ?? 0 };
}
