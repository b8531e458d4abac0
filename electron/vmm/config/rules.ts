// What a VM configuration may ask of a host, written once. The CLI (resolve.ts), the service
// (config-checks.ts, the live knobs) and the wizard (the renderer) all call these, so a
// configuration one surface refuses is refused by every surface with the same words.
//
// Pure on purpose — no Node, no KVM: the renderer imports this file. Callers pass what they know
// about the host (HostCapabilities in the VMM, HostInfo in the renderer, both fit HostLimits).
import { FEATURE_NAMES } from '../machine/features.ts';
import { ConfigError, sameVmName, type VmConfig } from './vm-config.ts';
import { MAX_CPUS } from './limits.ts';

/** The host cannot run what the configuration asks for (the input itself is well-formed). */
export class RunnabilityError extends ConfigError {
  override name = 'RunnabilityError';
}

export interface HostLimits {
  /** KVM_CAP_MAX_VCPUS; undefined when KVM could not be asked (a start will say why). */
  maxVcpus?: number;
  memoryMiB: number;
  /** Host CPUs this process may run on (its affinity mask). */
  hostCpus: readonly number[];
}

export function formatCpus(cpus: readonly number[]): string {
  return cpus.length > 16 ? `${cpus[0]}-${cpus[cpus.length - 1]}` : cpus.join(',');
}

/**
 * The most vCPUs a VM may have here, and why that number: the host KVM's limit when it is known
 * and lower than the machine's, else the machine's own (MAX_CPUS). Where KVM cannot be asked, the
 * machine's limit applies and the host's is checked at start. The wizard's hint shows `why`; the
 * schema (checkCpus) and checkCpusFit refuse above `max`, in words naming the same number.
 */
export function vcpuLimit(maxVcpus: number | undefined): { max: number; why: string } {
  if (maxVcpus !== undefined && maxVcpus < MAX_CPUS) return { max: maxVcpus, why: `this host's KVM allows up to ${maxVcpus} vCPUs` };
  return maxVcpus !== undefined
    ? { max: MAX_CPUS, why: `a VM has up to ${MAX_CPUS} vCPUs (the machine's limit; this host's KVM allows ${maxVcpus})` }
    : { max: MAX_CPUS, why: `a VM has up to ${MAX_CPUS} vCPUs (the machine's limit); KVM cannot be asked here, so its own limit is checked at start` };
}

export function checkCpusFit(cpus: number, maxVcpus: number | undefined): void {
  if (maxVcpus !== undefined && cpus > maxVcpus) throw new RunnabilityError(`cpus=${cpus} is more than this host's KVM allows (${maxVcpus})`);
}

export function checkMemoryFit(memoryMiB: number, hostMiB: number): void {
  if (memoryMiB > hostMiB) throw new ConfigError(`memory ${memoryMiB} MiB is more than this host has (${hostMiB} MiB)`);
}

/** Every listed CPU must be one this process may run on (saved pins and live re-pins alike). */
export function checkPinFit(pin: readonly number[], hostCpus: readonly number[]): void {
  const missing = pin.find((cpu) => !hostCpus.includes(cpu));
  if (missing !== undefined) {
    throw new ConfigError(`pin: host CPU ${missing} does not exist or is not available to Unhalt (available: ${formatCpus(hostCpus)})`);
  }
}

/** The numbers of a configuration against the host's: vCPUs, memory, pinned CPUs. */
export function checkHostFit(c: Pick<VmConfig, 'cpus' | 'memoryMiB' | 'pin'>, host: HostLimits): void {
  checkMemoryFit(c.memoryMiB, host.memoryMiB);
  checkCpusFit(c.cpus, host.maxVcpus);
  if (c.pin) checkPinFit(c.pin, host.hostCpus);
}

/** A VM's name is unique in its library, whatever its case or spacing (sameVmName). */
export function checkNameFree(name: string, otherNames: Iterable<string>): void {
  for (const other of otherNames) {
    if (sameVmName(other, name)) throw new NameTakenError(`a VM named "${other}" already exists; choose another name`);
  }
}

/** The library already has the name (the API's 'conflict', not 'invalid'). */
export class NameTakenError extends ConfigError {
  override name = 'NameTakenError';
}

// ---- paravirt features and cpu-pm ----

export type FeatureSource = 'machine-type' | 'explicit' | 'cpu-pm';

export interface EffectiveFeature {
  name: string;
  value: boolean;
  source: FeatureSource;
}

export const CPU_PM_PV_UNHALT_CONFLICT = 'kvm-pv-unhalt=on contradicts cpu-pm=on: with HLT exits disabled the host never sees a '
  + 'halted vCPU, so it cannot kick it (KVM itself drops PV_UNHALT then); turn one of them off';

/** What the user asked for contradicts itself (whatever the host): an explicit pv-unhalt with cpu-pm. */
export function checkKnobConflicts(c: Pick<VmConfig, 'cpuPm' | 'cpuFeatures'>): void {
  if (c.cpuPm && c.cpuFeatures['kvm-pv-unhalt'] === true) throw new ConfigError(CPU_PM_PV_UNHALT_CONFLICT);
}

/**
 * The paravirt features the guest gets: explicit settings over the machine type's defaults, and
 * cpu-pm=on turning a *default* kvm-pv-unhalt off (PV spinlocks need HLT exits to be kicked).
 * An explicit kvm-pv-unhalt=on with cpu-pm=on is a contradiction: checkKnobConflicts refuses it
 * (a form still shows it as the user set it, with that message).
 */
export function effectiveFeatures(c: Pick<VmConfig, 'cpuPm' | 'cpuFeatures'>, machineDefaults: Readonly<Record<string, boolean>>): EffectiveFeature[] {
  return FEATURE_NAMES.map((name) => {
    const explicit = c.cpuFeatures[name];
    if (explicit !== undefined) return { name, value: explicit, source: 'explicit' as const };
    const value = machineDefaults[name] ?? false;
    if (name === 'kvm-pv-unhalt' && value && c.cpuPm) return { name, value: false, source: 'cpu-pm' as const };
    return { name, value, source: 'machine-type' as const };
  });
}

/** The line shown where cpu-pm=on turned a default kvm-pv-unhalt off. */
export function cpuPmTurnedOffNote(machine: string): string {
  return `cpu-pm=on turned kvm-pv-unhalt off (the ${machine} default is on; PV spinlocks need HLT exits)`;
}
