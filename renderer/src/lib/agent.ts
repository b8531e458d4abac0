// Whether a VM's guest runs our agent on ttyS1 (the guest commands, the live context-switch probe):
// the Linux guest always; a VM that boots its own kernel when the tools disk is attached (an
// import attaches it, and the seed starts the agent from it: docs/guest-contract.md).
import type { VmConfig } from '../../../electron/vmm/config/vm-config.ts';

export function hasAgent(config: Pick<VmConfig, 'guest' | 'disks'>): boolean {
  return config.guest === 'linux' || (config.disks ?? []).some((d) => /(^|\/)workloads\.ext4$/.test(d.path));
}
