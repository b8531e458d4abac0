// The KVM paravirt CPU features Unhalt exposes, with QEMU's property names, their CPUID
// 0x40000001 bits (EAX for features, EDX for hints) and one line on what each does.

export interface PvFeature {
  name: string;
  /** 'eax' = KVM_CPUID_FEATURES, 'edx' = hints. */
  register: 'eax' | 'edx';
  /** Bits set when on (kvmclock owns two: the old and the new MSR interface). */
  bits: readonly number[];
  summary: string;
  /** Its guest side issues KVM hypercalls (vmcall/vmmcall), which hang a vCPU on PVM hosts. */
  usesHypercalls?: boolean;
  /** Set when Unhalt can never offer it, whatever the host (the reason is shown). */
  unavailable?: string;
  /** A hint the VMM gives on its own authority: KVM does not list hints in its supported CPUID. */
  vmmHint?: boolean;
}

export const PV_FEATURES: readonly PvFeature[] = [
  // Bit 24 (clocksource stable) goes with kvmclock, as QEMU's kvmclock-stable-bit does by default.
  { name: 'kvmclock', register: 'eax', bits: [0, 3, 24], summary: 'paravirtual clock source (stable time without TSC calibration)' },
  { name: 'kvm-nopiodelay', register: 'eax', bits: [1], summary: 'skip the legacy I/O-port delay writes (port 0x80)' },
  { name: 'kvm-asyncpf', register: 'eax', bits: [4], summary: 'asynchronous page faults: run another task while the host swaps in a page' },
  { name: 'kvm-asyncpf-int', register: 'eax', bits: [14], summary: 'deliver async page fault completions as interrupts (what current Linux guests need)' },
  { name: 'kvm-steal-time', register: 'eax', bits: [5], summary: 'report time stolen by the host to the guest scheduler' },
  { name: 'kvm-pv-eoi', register: 'eax', bits: [6], summary: 'paravirtual end-of-interrupt: fewer APIC exits' },
  { name: 'kvm-pv-unhalt', register: 'eax', bits: [7], summary: 'paravirtual spinlocks: waiters halt and the holder kicks them (KVM_HC_KICK_CPU)', usesHypercalls: true },
  { name: 'kvm-pv-tlb-flush', register: 'eax', bits: [9], summary: 'skip TLB-flush IPIs to preempted vCPUs' },
  { name: 'kvm-pv-ipi', register: 'eax', bits: [11], summary: 'send IPIs to many vCPUs with one hypercall', usesHypercalls: true },
  { name: 'kvm-poll-control', register: 'eax', bits: [12], summary: 'let the guest turn host-side halt polling off while it polls itself' },
  { name: 'kvm-pv-sched-yield', register: 'eax', bits: [13], summary: 'yield to a preempted vCPU the guest is waiting on (hypercall)', usesHypercalls: true },
  { name: 'kvm-msi-ext-dest-id', register: 'eax', bits: [15], summary: 'extended MSI destination IDs (more than 255 vCPUs without an IOMMU)',
    unavailable: 'needs a userspace I/O APIC (split irqchip); Unhalt uses the in-kernel one' },
  { name: 'kvm-hint-dedicated', register: 'edx', bits: [0], summary: 'KVM_HINTS_REALTIME: vCPUs never preempted; the guest then prefers plain spinning and halt polling',
    vmmHint: true },
];

export const FEATURE_NAMES = PV_FEATURES.map((f) => f.name);

export function feature(name: string): PvFeature | undefined {
  return PV_FEATURES.find((f) => f.name === name);
}

export function featureMask(f: PvFeature): number {
  return f.bits.reduce((m, b) => (m | (1 << b)) >>> 0, 0);
}

/** Whether the host's supported CPUID (0x40000001 EAX/EDX) offers a feature (all its bits). */
export function hostOffers(f: PvFeature, host: { features: number; hints: number }): boolean {
  if (f.unavailable) return false;
  if (f.vmmHint) return true;
  const reg = f.register === 'eax' ? host.features : host.hints;
  // kvmclock: either interface is enough; the guest picks the newer one when both are there.
  if (f.name === 'kvmclock') return (reg & featureMask(f)) !== 0;
  return (reg & featureMask(f)) === featureMask(f);
}

/** CPUID 0x40000001 EAX and EDX for a set of feature values. */
export function encodeFeatures(values: Record<string, boolean>, host: { features: number; hints: number }): { eax: number; edx: number } {
  let eax = 0;
  let edx = 0;
  for (const f of PV_FEATURES) {
    if (!values[f.name]) continue;
    // kvmclock's bits: only those the host has (old hosts lack the newer MSR interface, or the stable bit).
    const bits = f.name === 'kvmclock' ? featureMask(f) & host.features : featureMask(f);
    if (f.register === 'eax') eax = (eax | bits) >>> 0;
    else edx = (edx | bits) >>> 0;
  }
  return { eax, edx };
}
