// Which KVM the tests run on, asked positively: hardware semantics (kvm_intel / kvm_amd, also
// nested under QEMU TCG) or PVM. A check that needs hardware semantics runs where they are and
// skips elsewhere with a reason naming the nested lane, which runs it (docs/nested.md). Inside
// that lane (UNHALT_NESTED_LANE=1, set by L1's init) nothing may skip for want of them: asking
// there without hardware semantics throws, so the lane fails instead of passing on skips.
import { kvmBackend } from '../../electron/vmm/host.ts';
import { kvmAvailable } from './probe.ts';

export const inNestedLane = process.env.UNHALT_NESTED_LANE === '1';
const backend = kvmAvailable ? kvmBackend() : 'unknown';
export const onPvm = kvmAvailable && backend === 'kvm_pvm';
const hardware = kvmAvailable && (backend === 'kvm_intel' || backend === 'kvm_amd');

export const NEEDS_HARDWARE = 'needs a KVM with hardware semantics: runs in the nested lane (npm test -- nested)';

/** True where /dev/kvm has hardware semantics; in the nested lane anything else is an error. */
export function hardwareKvm(): boolean {
  if (inNestedLane && !hardware) {
    throw new Error(`the nested lane runs on a KVM without hardware semantics (/dev/kvm ${kvmAvailable ? `is ${backend}` : 'is missing'})`);
  }
  return hardware;
}
