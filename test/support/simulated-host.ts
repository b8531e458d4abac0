// A fixed simulated host for tests of the real resolution and CPUID code: no KVM needed, and
// golden values stay the same on every machine.
import type { CpuidEntry } from '../../native/kvm/abi.ts';
import type { HostCapabilities } from '../../electron/vmm/machine/host-caps.ts';

const leaf = (fn: number, index = 0, regs: Partial<CpuidEntry> = {}): CpuidEntry =>
  ({ function: fn, index, flags: 0, eax: 0, ebx: 0, ecx: 0, edx: 0, ...regs });

/** KVM 6.x on a recent Intel host: every paravirt feature KVM reports (0x1007efb incl. bit 24, 14, 10). */
export const SIM_KVM_FEATURES = 0x01007efb;

export function simulatedHost(over: Partial<HostCapabilities> = {}): HostCapabilities {
  return {
    kind: 'hardware',
    kvmFeatures: SIM_KVM_FEATURES,
    kvmHints: 0x1,
    disableExits: 0x2 | 0x4 | 0x8, // HLT, PAUSE, CSTATE (no MWAIT)
    haltPoll: true,
    tscDeadline: true,
    binaryStats: true,
    maxVcpus: 710,
    hostCpus: [0, 1, 2, 3],
    memoryBytes: 16 * 1024 ** 3,
    haltPollParams: { halt_poll_ns: 200000 },
    supportedCpuid: [
      leaf(0, 0, { eax: 0x1f, ebx: 0x756e6547, ecx: 0x6c65746e, edx: 0x49656e69 }),
      leaf(1, 0, { eax: 0x806f8, ebx: 0x800, ecx: 0xf7fa3223, edx: 0x078bfbff }),
      leaf(4, 0, { eax: 0x121 }), leaf(4, 1, { eax: 0x122 }), leaf(4, 2, { eax: 0x143 }), leaf(4, 3, { eax: 0 }),
      leaf(0xb, 0), leaf(0xb, 1), leaf(0xb, 2),
      leaf(0x40000000, 0, { eax: 0x40000001 }),
      leaf(0x40000001, 0, { eax: SIM_KVM_FEATURES, edx: 0x1 }),
      leaf(0x80000000, 0, { eax: 0x80000008 }),
      leaf(0x80000008, 0, { eax: 0x3030 }),
    ],
    ...over,
  };
}
