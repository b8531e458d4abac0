// What this host's KVM can give, as one sentence per rule: the runnability check (resolve.ts)
// throws these sentences, and the wizard's availability (HostInfo.options, host-info.ts) shows
// the very same ones as the reason an option is off — so "not available" in the app and the
// error of `unhalt run` or the API never disagree.
import { DISABLE_EXITS, disableExitNames, type HostCapabilities } from '../machine/host-caps.ts';
import { PV_FEATURES, hostOffers, type PvFeature } from '../machine/features.ts';
import type { MachineType } from '../machine/machine-types.ts';
import type { VmConfig } from './vm-config.ts';

type Host = Pick<HostCapabilities, 'disableExits' | 'haltPoll' | 'kvmFeatures' | 'kvmHints'>;

export function cpuPmUnavailable(host: Host): string | undefined {
  if (host.disableExits & DISABLE_EXITS.hlt) return undefined;
  return 'cpu-pm=on needs KVM_CAP_X86_DISABLE_EXITS with HLT, which this host\'s KVM does not offer '
    + `(offered: ${disableExitNames(host.disableExits).join(', ') || 'none'}); use cpu-pm=off`;
}

export function haltPollUnavailable(host: Host): string | undefined {
  return host.haltPoll ? undefined : 'halt-poll-ns needs KVM_CAP_HALT_POLL (Linux 5.15+), which this host\'s KVM lacks; leave halt-poll-ns unset';
}

/** Why the host cannot give a feature (undefined: it can): its own limitation or the CPUID bit KVM lacks. */
export function featureUnavailable(f: PvFeature, host: Host): string | undefined {
  if (hostOffers(f, { features: host.kvmFeatures, hints: host.kvmHints })) return undefined;
  return f.unavailable ?? `this host's KVM does not offer it (CPUID 0x40000001 ${f.register.toUpperCase()} bit ${f.bits.join('/')})`;
}

/** The first feature a machine type turns on by default that the host cannot give, and why. */
export function machineUnavailable(mt: MachineType, host: Host): { feature: string; reason: string } | undefined {
  for (const f of PV_FEATURES) {
    const reason = mt.defaults[f.name] ? featureUnavailable(f, host) : undefined;
    if (reason) return { feature: f.name, reason };
  }
  return undefined;
}

/** The runnability error for a feature that is on (explicitly, or by the machine type's default). */
export function featureOnButUnavailable(f: PvFeature, reason: string, explicit: boolean, machine: string): string {
  return explicit
    ? `${f.name}=on was asked for, but ${reason}; turn it off`
    : `machine type ${machine} turns ${f.name} on by default, but ${reason}; use an older machine type or --cpu host,${f.name}=off`;
}

/**
 * Where KVM cannot be opened: a configuration is still kept, and what only KVM can tell is judged
 * when the VM starts. The summary's warning names what this host lacks and what waits for it.
 */
export function judgedAtStart(c: Pick<VmConfig, 'cpus' | 'cpuPm' | 'haltPollNs'>, features: readonly { name: string; value: boolean }[]): string {
  const featuresOn = features.filter((f) => f.value).map((f) => f.name);
  const waits = [`${c.cpus} vCPU${c.cpus === 1 ? '' : 's'} against KVM's vCPU limit`];
  if (featuresOn.length) waits.push(`the paravirt features on (${featuresOn.join(', ')})`);
  if (c.cpuPm) waits.push('cpu-pm=on (KVM_CAP_X86_DISABLE_EXITS)');
  if (c.haltPollNs !== undefined) waits.push('halt-poll-ns (KVM_CAP_HALT_POLL)');
  return `this host lacks a usable KVM: the VM can be saved and exported, but not started here; what only KVM can tell is checked when it starts: ${waits.join(', ')}`;
}
