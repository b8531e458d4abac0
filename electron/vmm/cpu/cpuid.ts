// The CPUID a vCPU sees, built the way QEMU builds it for KVM: KVM_GET_SUPPORTED_CPUID is a
// ceiling, not a CPU model. On top of it go what only userspace may set (the TSC-deadline timer
// when KVM_CAP_TSC_DEADLINE_TIMER says the in-kernel LAPIC has it, x2APIC with that LAPIC, the
// hypervisor bit), leaf 0xD recomputed from the XSAVE state actually offered (xsave-leaf.ts), the
// topology leaves from the vCPU count (topology-leaves.ts: one thread per core, one package), and
// the KVM signature leaves with the paravirt features the VM's configuration chose.
import type { CpuidEntry } from '../../../native/kvm/abi.ts';
import { rebuildXsaveLeaf } from './xsave-leaf.ts';
import {
  extendedTopology, isIntel, type Topology, topologyLeaf1, topologyLeaf4, topologyLeaf80000001, topologyLeaf80000008,
  topologyLeaf8000001e,
} from './topology-leaves.ts';

export const KVM_CPUID_SIGNATURE = 0x40000000;
export const KVM_CPUID_FEATURES = 0x40000001;
/** "KVMKVMKVM\0\0\0" as EBX, ECX, EDX. */
export const KVM_SIGNATURE = { ebx: 0x4b4d564b, ecx: 0x564b4d56, edx: 0x4d } as const;

/** CPUID.01H:ECX bits userspace decides. */
export const LEAF1_ECX = { monitor: 1 << 3, x2apic: 1 << 21, tscDeadline: 1 << 24, hypervisor: 1 << 31 } as const;

export interface CpuidOptions {
  vcpuId: number;
  cpus: number;
  /** CPUID 0x40000001 EAX (paravirt features) and EDX (hints). */
  kvmFeatures: number;
  kvmHints: number;
  /** KVM_CHECK_EXTENSION(KVM_CAP_TSC_DEADLINE_TIMER): KVM_GET_SUPPORTED_CPUID never reports the bit itself. */
  tscDeadline: boolean;
  /** Advertise MONITOR/MWAIT (CPUID.1:ECX bit 3): only when the VM runs MWAIT without exits. */
  mwait?: boolean;
}

const setBit = (v: number, mask: number, on: boolean): number => (on ? (v | mask) >>> 0 : (v & ~mask) >>> 0);

export function buildCpuid(supported: readonly CpuidEntry[], o: CpuidOptions): CpuidEntry[] {
  const topo: Topology = { apicId: o.vcpuId, cpus: o.cpus };
  const intel = isIntel(supported);
  const maxBasic = supported.find((e) => e.function === 0)?.eax ?? 0;
  // 0xB and 0x1F are generated whole below: KVM may list only some of their sub-leaves.
  const generated = [0xb, 0x1f].filter((fn) => maxBasic >= fn);
  const out: CpuidEntry[] = [];
  for (const src of supported) {
    if (generated.includes(src.function)) continue;
    const e = { ...src };
    switch (e.function) {
      case 0x1:
        topologyLeaf1(e, topo);
        // The in-kernel LAPIC (always created) emulates x2APIC and, when KVM says so, TSC-deadline.
        e.ecx = setBit(e.ecx, LEAF1_ECX.hypervisor | LEAF1_ECX.x2apic, true);
        e.ecx = setBit(e.ecx, LEAF1_ECX.tscDeadline, o.tscDeadline);
        e.ecx = setBit(e.ecx, LEAF1_ECX.monitor, o.mwait ?? false);
        break;
      case 0x4:
        topologyLeaf4(e, topo);
        break;
      case 0x80000001:
        topologyLeaf80000001(e, topo, intel);
        break;
      case 0x80000008:
        topologyLeaf80000008(e, topo);
        break;
      case 0x8000001e:
        topologyLeaf8000001e(e, topo);
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
  for (const fn of generated) out.push(...extendedTopology(fn, topo));
  rebuildXsaveLeaf(out);
  if (!out.some((e) => e.function === KVM_CPUID_SIGNATURE)) {
    out.push({ function: KVM_CPUID_SIGNATURE, index: 0, flags: 0, eax: KVM_CPUID_FEATURES, ...KVM_SIGNATURE });
    out.push({ function: KVM_CPUID_FEATURES, index: 0, flags: 0, eax: o.kvmFeatures >>> 0, ebx: 0, ecx: 0, edx: o.kvmHints >>> 0 });
  }
  return out.sort((a, b) => a.function - b.function || a.index - b.index);
}

/** The paravirt features and hints this host's KVM can offer (CPUID 0x40000001 EAX, EDX). */
export function hostKvmFeatures(supported: readonly CpuidEntry[]): { features: number; hints: number } {
  const e = supported.find((x) => x.function === KVM_CPUID_FEATURES);
  return { features: e?.eax ?? 0, hints: e?.edx ?? 0 };
}
