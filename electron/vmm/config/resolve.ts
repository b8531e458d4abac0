// From a VmConfig and the host's capabilities to what the VMM boots: the machine type's defaults
// with explicit overrides, overcommit rules, and the runnability check. Anything the host cannot
// give is one specific error naming the feature, why, and the way out; the guest ABI is never
// changed silently.
import { existsSync, statSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import { PROBE_KERNEL } from '../guests.ts';
import { linuxGuestFiles } from '../guests-select.ts';
import { DISABLE_EXITS, disableExitNames, type HostCapabilities } from '../machine/host-caps.ts';
import { PV_FEATURES, encodeFeatures, feature, hostOffers } from '../machine/features.ts';
import { machineType } from '../machine/machine-types.ts';
import type { MachineSpec } from '../vm.ts';
import { ConfigError, type VmConfig } from './vm-config.ts';

/** The host cannot run what the configuration asks for. */
export class RunnabilityError extends ConfigError {
  override name = 'RunnabilityError';
}

export type FeatureSource = 'machine-type' | 'explicit' | 'cpu-pm';

export interface ResolvedFeature {
  name: string;
  value: boolean;
  source: FeatureSource;
}

export interface Resolution {
  machine: string;
  features: ResolvedFeature[];
  /** CPUID 0x40000001 EAX / EDX the guest will see. */
  kvmFeatures: number;
  kvmHints: number;
  /** KVM_X86_DISABLE_EXITS mask enabled before any vCPU exists (0 = none). */
  disableExits: number;
  /** MWAIT/MONITOR advertised in CPUID (only where the host lets the guest run it without exits). */
  mwait: boolean;
  notes: string[];
  warnings: string[];
}

/** The paravirt features a configuration gives its guest on any host, and what the rules changed. */
export interface MachineFeatures {
  machine: string;
  features: ResolvedFeature[];
  notes: string[];
}

/**
 * Machine type defaults + explicit settings + the cpu-pm rule, before any host is asked: what the
 * configuration means wherever it runs (resolveKnobs checks it against this host; the exports
 * in ../export/ write it out for other VMMs). Throws ConfigError on a contradiction.
 */
export function machineFeatures(c: VmConfig): MachineFeatures {
  const mt = machineType(c.machine);
  if (!mt) throw new ConfigError(`unknown machine type "${c.machine}"`);
  const notes: string[] = [];
  const features: ResolvedFeature[] = PV_FEATURES.map((f) => {
    const explicit = c.cpuFeatures[f.name];
    return explicit === undefined
      ? { name: f.name, value: mt.defaults[f.name] ?? false, source: 'machine-type' as const }
      : { name: f.name, value: explicit, source: 'explicit' as const };
  });
  if (c.cpuPm) {
    const unhalt = features.find((f) => f.name === 'kvm-pv-unhalt')!;
    if (unhalt.value && unhalt.source === 'explicit') {
      throw new ConfigError('kvm-pv-unhalt=on contradicts cpu-pm=on: with HLT exits disabled the host never sees a '
        + 'halted vCPU, so it cannot kick it (KVM itself drops PV_UNHALT then); turn one of them off');
    }
    if (unhalt.value) {
      unhalt.value = false;
      unhalt.source = 'cpu-pm';
      notes.push(`cpu-pm=on turned kvm-pv-unhalt off (the ${c.machine} default is on; PV spinlocks need HLT exits)`);
    }
  }
  return { machine: mt.name, features, notes };
}

/** Machine type defaults + explicit settings + overcommit rules, checked against the host. */
export function resolveKnobs(c: VmConfig, host: HostCapabilities): Resolution {
  const { machine, features, notes } = machineFeatures(c);
  const warnings: string[] = [];

  let disableExits = 0;
  if (c.cpuPm) {
  const wanted = DISABLE_EXITS.hlt | DISABLE_EXITS.pause | DISABLE_EXITS.cstate | DISABLE_EXITS.mwait;
    if (!(host.disableExits & DISABLE_EXITS.hlt)) {
      throw new RunnabilityError('cpu-pm=on needs KVM_CAP_X86_DISABLE_EXITS with HLT, which this host\'s KVM does not offer '
        + `(offered: ${disableExitNames(host.disableExits).join(', ') || 'none'}); use cpu-pm=off`);
    }
    disableExits = host.disableExits & wanted;
    if (host.kind === 'pvm') {
      warnings.push('cpu-pm=on on this PVM host: the emulated guest kernel still exits on HLT, so halt exits do not go away here');
    }
  }

  for (const f of features) {
    if (!f.value) continue;
    const def = feature(f.name)!;
    if (!hostOffers(def, { features: host.kvmFeatures, hints: host.kvmHints })) {
      const where = def.unavailable ?? `CPUID 0x40000001 ${def.register.toUpperCase()} bit ${def.bits.join('/')}`;
      throw new RunnabilityError(f.source === 'explicit'
        ? `${f.name}=on was asked for, but this host's KVM does not offer it (${where}); turn it off`
        : `machine type ${c.machine} turns ${f.name} on by default, but this host's KVM does not offer it (${where}); `
          + `use an older machine type or --cpu host,${f.name}=off`);
    }
  }
  const hypercallers = features.filter((f) => f.value && feature(f.name)!.usesHypercalls).map((f) => f.name);
  if (hypercallers.length && host.kind === 'pvm') {
    const line = `${hypercallers.join(', ')} ${hypercallers.length > 1 ? 'are' : 'is'} on: the guest side uses KVM hypercalls, which hang a vCPU on this PVM host`;
    // The probe guest is told it runs on PVM and uses IPIs instead; other guests are at risk.
    if (c.guest === 'probe') notes.push(`${line} (the probe guest avoids them here)`);
    else warnings.push(line);
  }

  if (c.haltPollNs !== undefined && !host.haltPoll) {
    throw new RunnabilityError('halt-poll-ns needs KVM_CAP_HALT_POLL (Linux 5.15+), which this host\'s KVM lacks; leave halt-poll-ns unset');
  }
  if (c.pin) {
    for (const cpu of c.pin) {
      if (!host.hostCpus.includes(cpu)) {
        throw new ConfigError(`pin: host CPU ${cpu} does not exist or is not available to Unhalt (available: ${formatCpus(host.hostCpus)})`);
      }
    }
  }
  if (c.cpus > host.maxVcpus) throw new RunnabilityError(`cpus=${c.cpus} is more than this host's KVM allows (${host.maxVcpus})`);
  const hostMiB = Math.floor(host.memoryBytes / 1048576);
  if (c.memoryMiB > hostMiB) throw new ConfigError(`memory ${c.memoryMiB} MiB is more than this host has (${hostMiB} MiB)`);
  if (c.memLock && host.kind === 'pvm') notes.push('mem-lock=on locks guest RAM in host memory');

  const values = Object.fromEntries(features.map((f) => [f.name, f.value]));
  const { eax, edx } = encodeFeatures(values, { features: host.kvmFeatures, hints: host.kvmHints });
  return {
    machine, features, kvmFeatures: eax, kvmHints: edx, disableExits,
    mwait: (disableExits & DISABLE_EXITS.mwait) !== 0, notes, warnings,
  };
}

function formatCpus(cpus: number[]): string {
  return cpus.length > 16 ? `${cpus[0]}-${cpus[cpus.length - 1]}` : cpus.join(',');
}

function checkFile(path: string, what: string): string {
  const full = resolvePath(path);
  if (!existsSync(full)) throw new ConfigError(`${what} not found: ${path}`);
  const st = statSync(full);
  if (!st.isFile()) throw new ConfigError(`${what} is not a regular file: ${path}`);
  if (st.size === 0) throw new ConfigError(`${what} is empty: ${path}`);
  return full;
}

export interface ResolvedMachine {
  spec: MachineSpec;
  resolution: Resolution;
}

/** What the guest boots: the kernel, initrd and command line (the probe's and Linux's come from the built kits). */
export interface BootFiles {
  kernelPath: string;
  initrdPath?: string;
  cmdline: string;
}

/**
 * The files and command line a configuration boots on a host of this kind, checked to exist.
 * The kind matters: on PVM the probe guest is told to avoid hypercalls, and Linux gets its PVM
 * profile and the PVH vmlinux.
 */
export function resolveBoot(c: VmConfig, hostKind: HostCapabilities['kind']): BootFiles {
  let kernelPath: string;
  let initrdPath: string | undefined;
  let cmdline = c.append ?? '';
  if (c.guest === 'probe') {
    if (!existsSync(PROBE_KERNEL)) {
      throw new ConfigError(`the probe guest is not built (${PROBE_KERNEL}): run "npm run build:guests" (needs gcc)`);
    }
    kernelPath = PROBE_KERNEL;
    if (c.initrd !== undefined) initrdPath = checkFile(c.initrd, 'initrd');
    // The probe guest kicks halted waiters with IPIs instead of hypercalls on PVM, where those hang.
    if (hostKind === 'pvm' && !/(^|\s)unhalt\.pvm=/.test(cmdline)) cmdline = `${cmdline} unhalt.pvm=1`.trim();
  } else if (c.guest === 'linux') {
    const files = linuxGuestFiles(c, hostKind);
    kernelPath = files.kernel;
    initrdPath = c.initrd !== undefined ? checkFile(c.initrd, 'initrd') : files.initrd;
    cmdline = files.cmdline;
  } else {
    kernelPath = checkFile(c.kernel!, 'kernel');
    if (c.initrd !== undefined) initrdPath = checkFile(c.initrd, 'initrd');
  }
  return initrdPath ? { kernelPath, initrdPath, cmdline } : { kernelPath, cmdline };
}

/** Everything a start needs, checked: files, knobs, host. Throws ConfigError / RunnabilityError. */
export function resolveMachine(c: VmConfig, host: HostCapabilities): ResolvedMachine {
  const resolution = resolveKnobs(c, host);
  const { kernelPath, initrdPath, cmdline } = resolveBoot(c, host.kind);
  const spec: MachineSpec = {
    name: c.name, cpus: c.cpus, memoryMiB: c.memoryMiB, kernelPath, cmdline,
    kvmFeatures: resolution.kvmFeatures, kvmHints: resolution.kvmHints,
    disableExits: resolution.disableExits, mwait: resolution.mwait, memLock: c.memLock,
  };
  if (initrdPath) spec.initrdPath = initrdPath;
  if (c.haltPollNs !== undefined) spec.haltPollNs = c.haltPollNs;
  const pins = vcpuPins(c);
  if (pins) spec.pin = pins;
  return { spec, resolution };
}

/** The host CPU of each vCPU thread (vCPU i on pin[i % pin.length]), or undefined when unpinned. */
export function vcpuPins(c: VmConfig): number[] | undefined {
  return c.pin && Array.from({ length: c.cpus }, (_, i) => c.pin![i % c.pin!.length]!);
}
