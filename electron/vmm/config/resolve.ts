// From a VmConfig and the host's capabilities to what the VMM boots: the machine type's defaults
// with explicit overrides, overcommit rules, and the runnability check. Anything the host cannot
// give is one specific error naming the feature, why, and the way out; the guest ABI is never
// changed silently.
import { existsSync } from 'node:fs';
import { statBootFile } from '../boot/boot-file-checks.ts';
import { PROBE_KERNEL } from '../guests.ts';
import { linuxGuestFiles } from '../guests-select.ts';
import { DISABLE_EXITS, type HostCapabilities } from '../machine/host-caps.ts';
import { encodeFeatures, feature } from '../machine/features.ts';
import { cpuPmUnavailable, featureOnButUnavailable, featureUnavailable, haltPollUnavailable } from './host-rules.ts';
import { machineType } from '../machine/machine-types.ts';
import type { MachineSpec } from '../machine-spec.ts';
import { hostKind } from '../host.ts';
import { RunnabilityError, checkHostFit, checkKnobConflicts, cpuPmTurnedOffNote, effectiveFeatures, type EffectiveFeature } from './rules.ts';
import { macForVm } from './net-config.ts';
import { debugExitOf, hasPcTestdev } from './device-config.ts';
import { boardPortUser } from '../devices/board.ts';
import { ConfigError, diskMode, guestPollArgs, type VmConfig } from './vm-config.ts';

export { RunnabilityError };
export type { FeatureSource } from './rules.ts';
export type ResolvedFeature = EffectiveFeature;

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
  // The cpu-pm / pv-unhalt rule and explicit-over-default live in rules.ts (the wizard uses them too).
  checkKnobConflicts(c);
  const features: ResolvedFeature[] = effectiveFeatures(c, mt.defaults);
  if (features.some((f) => f.source === 'cpu-pm')) notes.push(cpuPmTurnedOffNote(c.machine));
  return { machine: mt.name, features, notes };
}

/** Machine type defaults + explicit settings + overcommit rules, checked against the host. */
export function resolveKnobs(c: VmConfig, host: HostCapabilities): Resolution {
  const { machine, features, notes } = machineFeatures(c);
  const warnings: string[] = [];

  let disableExits = 0;
  if (c.cpuPm) {
    const wanted = DISABLE_EXITS.hlt | DISABLE_EXITS.pause | DISABLE_EXITS.cstate | DISABLE_EXITS.mwait;
    const noCpuPm = cpuPmUnavailable(host);
    if (noCpuPm) throw new RunnabilityError(noCpuPm);
    disableExits = host.disableExits & wanted;
    if (host.kind === 'pvm') {
      warnings.push('cpu-pm=on on this PVM host: the emulated guest kernel still exits on HLT, so halt exits do not go away here');
    }
  }

  for (const f of features) {
    if (!f.value) continue;
    const def = feature(f.name)!;
    const missing = featureUnavailable(def, host);
    if (missing) throw new RunnabilityError(featureOnButUnavailable(def, missing, f.source === 'explicit', c.machine));
  }
  const hypercallers = features.filter((f) => f.value && feature(f.name)!.usesHypercalls).map((f) => f.name);
  if (hypercallers.length && host.kind === 'pvm') {
    const line = `${hypercallers.join(', ')} ${hypercallers.length > 1 ? 'are' : 'is'} on: the guest side uses KVM hypercalls, which hang a vCPU on this PVM host`;
    // The probe guest is told it runs on PVM and uses IPIs instead; other guests are at risk.
    if (c.guest === 'probe') notes.push(`${line} (the probe guest avoids them here)`);
    else warnings.push(line);
  }

  const noHaltPoll = c.haltPollNs === undefined ? undefined : haltPollUnavailable(host);
  if (noHaltPoll) throw new RunnabilityError(noHaltPoll);
  checkHostFit(c, { maxVcpus: host.maxVcpus, memoryMiB: Math.floor(host.memoryBytes / 1048576), hostCpus: host.hostCpus });
  if (c.memLock && host.kind === 'pvm') notes.push('mem-lock=on locks guest RAM in host memory');

  const values = Object.fromEntries(features.map((f) => [f.name, f.value]));
  const { eax, edx } = encodeFeatures(values, { features: host.kvmFeatures, hints: host.kvmHints });
  return {
    machine, features, kvmFeatures: eax, kvmHints: edx, disableExits,
    mwait: (disableExits & DISABLE_EXITS.mwait) !== 0, notes, warnings,
  };
}

/**
 * What a configuration gives its guest where KVM cannot be opened: the machine type's features and
 * the rules' notes, nothing judged against a host (a start does that; host-rules.ts judgedAtStart
 * says what waits). CPUID bits are those asked for. Throws ConfigError on a contradiction.
 */
export function resolveWithoutKvm(c: VmConfig): Resolution {
  const { machine, features, notes } = machineFeatures(c);
  const values = Object.fromEntries(features.map((f) => [f.name, f.value]));
  const { eax, edx } = encodeFeatures(values, { features: 0xffffffff, hints: 0xffffffff });
  return { machine, features, kvmFeatures: eax, kvmHints: edx, disableExits: 0, mwait: false, notes, warnings: [] };
}

/** The same file rule as every other surface (the schema made the path absolute already). */
function checkFile(path: string, what: 'kernel' | 'initrd'): string {
  statBootFile(path, what);
  return path;
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
  // After the user's own append: for a module parameter given twice the kernel keeps the last.
  if (c.guestHaltPollNs !== undefined && c.guest !== 'probe') cmdline = `${cmdline} ${guestPollArgs(c.guestHaltPollNs)}`.trim();
  return initrdPath ? { kernelPath, initrdPath, cmdline } : { kernelPath, cmdline };
}

/** Everything a start needs, checked: files, knobs, host. Throws ConfigError / RunnabilityError. */
export function resolveMachine(c: VmConfig, host: HostCapabilities): ResolvedMachine {
  return machineOf(c, resolveKnobs(c, host), host.kind);
}

/**
 * The same where KVM cannot be opened (`unhalt run --dry-run` there): the knobs as resolveWithoutKvm
 * gives them, the boot files for this kind of host; what only KVM tells waits for a start.
 */
export function resolveMachineWithoutKvm(c: VmConfig): ResolvedMachine {
  return machineOf(c, resolveWithoutKvm(c), hostKind());
}

function machineOf(c: VmConfig, resolution: Resolution, kind: HostCapabilities['kind']): ResolvedMachine {
  const { kernelPath, initrdPath, cmdline } = resolveBoot(c, kind);
  const spec: MachineSpec = {
    name: c.name, cpus: c.cpus, memoryMiB: c.memoryMiB, kernelPath, cmdline,
    kvmFeatures: resolution.kvmFeatures, kvmHints: resolution.kvmHints,
    disableExits: resolution.disableExits, mwait: resolution.mwait, memLock: c.memLock,
  };
  if (initrdPath) spec.initrdPath = initrdPath;
  // Only a version that adds devices says so: an older one's spec stays as it always was.
  const board = machineType(resolution.machine)!.board;
  if (board.fwCfg || board.pmTimer) spec.board = { ...board };
  if (c.rng) spec.virtio = ['rng'];
  if (c.net) {
    spec.virtio = [...(spec.virtio ?? []), 'net'];
    spec.net = { mac: macForVm(c.name), backEnd: c.net };
  }
  // Checked with the boot files (checkBootFiles), opened and locked at build time (disk-image.ts).
  // diskMode reads readonly and snapshot together (readonly wins): the spec carries its answer.
  if (c.disks) spec.disks = c.disks.map((d) => ({ path: d.path, readonly: diskMode(d) === 'read-only', snapshot: diskMode(d) === 'snapshot' }));
  if (hasPcTestdev(c)) spec.pcTestdev = true;
  const debugExit = debugExitOf(c);
  if (debugExit) {
    // The schema knows no board; here the board's own ports are known, so a clash is said before any vCPU maps them.
    const user = boardPortUser(debugExit.iobase, debugExit.iosize, spec.board, spec.pcTestdev);
    if (user) {
      throw new ConfigError(`isa-debug-exit at 0x${debugExit.iobase.toString(16)} (iosize ${debugExit.iosize}) overlaps the board's ${user}; `
        + 'give another iobase, e.g. iobase=0xf4 (kvm-unit-tests\') or QEMU\'s default 0x501');
    }
    spec.debugExit = { iobase: debugExit.iobase, iosize: debugExit.iosize };
  }
  if (c.haltPollNs !== undefined) spec.haltPollNs = c.haltPollNs;
  const pins = vcpuPins(c);
  if (pins) spec.pin = pins;
  return { spec, resolution };
}

/** The host CPU of each vCPU thread (vCPU i on pin[i % pin.length]), or undefined when unpinned. */
export function vcpuPins(c: VmConfig): number[] | undefined {
  return c.pin && Array.from({ length: c.cpus }, (_, i) => c.pin![i % c.pin!.length]!);
}
