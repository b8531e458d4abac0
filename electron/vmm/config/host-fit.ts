// What a configuration must fit on this machine whether or not KVM can be opened: no
// contradiction among its knobs, and the memory and CPUs the OS reports (never KVM's word). The
// service checks every configuration it keeps with it; `unhalt run` where KVM is missing too,
// so that a mistake in the configuration is what is said, in the same words, before the KVM error.
import { allowedHostCpus } from '../../../native/kvm/affinity.ts';
import { hostMemoryBytes } from '../host.ts';
import { checkHostFit, checkKnobConflicts } from './rules.ts';
import type { VmConfig } from './vm-config.ts';

/** Throws ConfigError naming what does not fit; maxVcpus is KVM's limit where known. */
export function checkFitsThisHost(c: VmConfig, maxVcpus?: number): void {
  checkKnobConflicts(c);
  checkHostFit(c, { maxVcpus, memoryMiB: Math.floor(hostMemoryBytes() / 1048576), hostCpus: allowedHostCpus() });
}
