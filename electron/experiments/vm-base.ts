// An experiment on a library VM: each configuration is the VM's own configuration with the named
// knobs changed (the config-string parser on top of it: one syntax, one rule), and every disk
// the guest could write is attached snapshot=on, so the runs never change the user's images:
// the guest's writes land in a throwaway overlay that vanishes with the run (virtio-blk's
// disk-overlay.ts). Read-only disks stay read-only.
import { parseConfigString } from '../vmm/config/config-string.ts';
import { diskMode, type DiskConfig, type VmConfig } from '../vmm/config/vm-config.ts';

/** The VM's configuration with `knobs` (a config string) changed; `append` replaces its command line (a probe workload's). */
export function configOnVm(base: VmConfig, knobs: string, append?: string): VmConfig {
  const c = parseConfigString(knobs, { ...base, ...(append !== undefined ? { append } : {}) });
  return c.disks ? { ...c, disks: throwawayDisks(c.disks) } : c;
}

/** Every writable disk as snapshot=on; read-only and snapshot disks as they were. */
export function throwawayDisks(disks: readonly DiskConfig[]): DiskConfig[] {
  return disks.map((d) => (diskMode(d) === 'read-write' ? { ...d, snapshot: true as const } : { ...d }));
}

/** The image a report names for a VM: its first disk's path, if it has one. */
export function vmImage(c: VmConfig): string | undefined {
  return c.disks?.[0]?.path;
}
