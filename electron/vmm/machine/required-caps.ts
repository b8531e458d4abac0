// The KVM capabilities without which Unhalt cannot build a VM at all, named once: the VMM refuses
// to start without them (builder/vm-shells.ts) and `unhalt doctor` reports them as required (doctor.ts).
import { CAP } from '../../../native/kvm/abi.ts';

export const REQUIRED_CAPS: readonly { cap: keyof typeof CAP; what: string }[] = [
  { cap: 'IRQCHIP', what: 'in-kernel irqchip' },
  { cap: 'USER_MEMORY', what: 'user memory' },
  { cap: 'SET_TSS_ADDR', what: 'TSS address' },
  { cap: 'PIT2', what: 'in-kernel PIT' },
  { cap: 'IMMEDIATE_EXIT', what: 'immediate exit' },
  { cap: 'EXT_CPUID', what: 'CPUID setup (KVM_GET_SUPPORTED_CPUID)' },
];

/** The message for the first required capability the host lacks, or undefined. */
export function missingCapability(checkExtension: (cap: number) => number): string | undefined {
  const gap = REQUIRED_CAPS.find((c) => !checkExtension(CAP[c.cap]));
  return gap && `this host's KVM lacks a capability Unhalt needs: ${gap.what} (KVM_CAP_${gap.cap} ${CAP[gap.cap]})`;
}
