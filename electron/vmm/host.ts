// Facts about the host that the VMM, `unhalt doctor` and the wizard all ask the same way.
import { existsSync, readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';

const PVM_MODULE = '/sys/module/kvm_pvm';

/** PVM (a software nested hypervisor: guest ring 0 is emulated) or hardware-backed KVM. */
export type HostKind = 'pvm' | 'hardware';

export function hostKind(): HostKind {
  return existsSync(process.env.UNHALT_PVM_MODULE_PATH ?? PVM_MODULE) ? 'pvm' : 'hardware';
}

/** The KVM implementation behind /dev/kvm, by its loaded module (built-in ones appear too). */
export type KvmBackend = 'kvm_intel' | 'kvm_amd' | 'kvm_pvm' | 'unknown';

/**
 * kvm_intel and kvm_amd run guests on VMX / SVM: hardware semantics, also when that "hardware" is
 * itself emulated (KVM nested under QEMU TCG). kvm_pvm emulates guest ring 0 instead.
 */
export function kvmBackend(sysModule = process.env.UNHALT_SYS_MODULE_DIR ?? '/sys/module'): KvmBackend {
  if (hostKind() === 'pvm') return 'kvm_pvm';
  for (const m of ['kvm_intel', 'kvm_amd'] as const) if (existsSync(`${sysModule}/${m}`)) return m;
  return 'unknown';
}

const HALT_POLL_DIR = '/sys/module/kvm/parameters';
export const HALT_POLL_PARAMS = ['halt_poll_ns', 'halt_poll_ns_grow', 'halt_poll_ns_grow_start', 'halt_poll_ns_shrink'] as const;

/** The host's halt-polling defaults (read-only information; a VM may override halt_poll_ns). */
export function hostHaltPollParams(): Partial<Record<(typeof HALT_POLL_PARAMS)[number], number>> {
  const out: Partial<Record<(typeof HALT_POLL_PARAMS)[number], number>> = {};
  for (const p of HALT_POLL_PARAMS) {
    try {
      out[p] = Number(readFileSync(`${HALT_POLL_DIR}/${p}`, 'utf8').trim());
    } catch { /* parameter absent on this kernel */ }
  }
  return out;
}

export function hostCpuModel(): string {
  return cpus()[0]?.model ?? 'unknown';
}

export function hostMemoryBytes(): number {
  return totalmem();
}
