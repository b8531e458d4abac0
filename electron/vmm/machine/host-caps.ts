// One probe of what this host's KVM can give a VM. It feeds the runnability check before every
// start, `unhalt doctor`, and the wizard's list of options (available or not, and why).
import { CAP, type CpuidEntry } from '../../../native/kvm/abi.ts';
import { Kvm } from '../../../native/kvm/kvm.ts';
import { OsError } from '../../../native/kvm/libc.ts';
import { KvmUnavailableError, kvmAccess } from '../kvm-access.ts';
import { hostKvmFeatures } from '../cpu/cpuid.ts';
import { hostCpuList, hostHaltPollParams, hostKind, hostMemoryBytes, type HostKind } from '../host.ts';

/** KVM_X86_DISABLE_EXITS_* bits (KVM_CAP_X86_DISABLE_EXITS). */
export const DISABLE_EXITS = { mwait: 1, hlt: 2, pause: 4, cstate: 8 } as const;

export interface HostCapabilities {
  kind: HostKind;
  /** CPUID 0x40000001 EAX / EDX that KVM_GET_SUPPORTED_CPUID offers. */
  kvmFeatures: number;
  kvmHints: number;
  /** Mask of exits KVM lets a VM disable (0: capability absent). */
  disableExits: number;
  haltPoll: boolean;
  /** KVM_CAP_TSC_DEADLINE_TIMER: the guest may be offered CPUID.01H:ECX[24]. */
  tscDeadline: boolean;
  binaryStats: boolean;
  maxVcpus: number;
  hostCpus: number[];
  memoryBytes: number;
  haltPollParams: Record<string, number>;
  supportedCpuid: CpuidEntry[];
}

let cached: HostCapabilities | undefined;

/**
 * Probes /dev/kvm (UNHALT_KVM_DEVICE) once per process. Where it cannot be opened, throws a
 * KvmUnavailableError naming the cause found and its fix (kvm-access.ts).
 */
export function probeHost(): HostCapabilities {
  if (cached && cached.kind === hostKind()) return cached;
  let kvm: Kvm;
  try {
    kvm = Kvm.open();
  } catch (e) {
    if (!(e instanceof OsError) || !e.call.startsWith('open ')) throw e;
    const access = kvmAccess();
    if (access.ok) throw e;
    throw new KvmUnavailableError(access);
  }
  try {
    const supportedCpuid = kvm.supportedCpuid();
    const { features, hints } = hostKvmFeatures(supportedCpuid);
    cached = {
      kind: hostKind(),
      kvmFeatures: features,
      kvmHints: hints,
      disableExits: kvm.checkExtension(CAP.X86_DISABLE_EXITS),
      haltPoll: kvm.checkExtension(CAP.HALT_POLL) > 0,
      tscDeadline: kvm.checkExtension(CAP.TSC_DEADLINE_TIMER) > 0,
      binaryStats: kvm.checkExtension(CAP.BINARY_STATS_FD) > 0,
      maxVcpus: kvm.maxVcpus(),
      hostCpus: hostCpuList(),
      memoryBytes: hostMemoryBytes(),
      haltPollParams: hostHaltPollParams(),
      supportedCpuid,
    };
    return cached;
  } finally {
    kvm.close();
  }
}

export function disableExitNames(mask: number): string[] {
  return Object.entries(DISABLE_EXITS).filter(([, bit]) => mask & bit).map(([name]) => name.toUpperCase());
}
