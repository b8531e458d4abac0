// HostInfo for the wizard and the host page: what this host is, which machine types, features,
// overcommit knobs and guests it can run — each option with a reason when it cannot (or a
// warning worth showing when it can) — and the doctor's checks.
import { readFileSync } from 'node:fs';
import type { HostInfo, OptionAvailability } from './api.ts';
import { runDoctor } from '../vmm/doctor.ts';
import { probeBuilt } from '../vmm/guests.ts';
import { linuxKitBuilt, LINUX_KIT_BUILD_HINT } from '../vmm/guests-linux.ts';
import { defaultGuest } from '../vmm/guests-select.ts';
import { hostCpuList, hostCpuModel, hostKind, hostMemoryBytes } from '../vmm/host.ts';
import { kvmDevicePath } from '../../native/kvm/kvm.ts';
import { kvmAccess, KvmUnavailableError, type KvmAccess } from '../vmm/kvm-access.ts';
import { PV_FEATURES, hostOffers, type PvFeature } from '../vmm/machine/features.ts';
import { DISABLE_EXITS, probeHost, type HostCapabilities } from '../vmm/machine/host-caps.ts';
import { MACHINE_TYPES, NEWEST_MACHINE } from '../vmm/machine/machine-types.ts';
import { cpuPmUnavailable, featureUnavailable, haltPollUnavailable, machineUnavailable } from '../vmm/config/host-rules.ts';
import { kvmProblem } from './kvm-problem.ts';

export interface ExtraCheck {
  name: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

/** `probe` is the real host probe; tests pass simulated hosts. */
/** Everything but the library, which the service adds (it owns the store). */
export type HostFacts = Omit<HostInfo, 'library'>;

export function buildHostInfo(extraChecks: ExtraCheck[] = [], probe: () => HostCapabilities = probeHost): HostFacts {
  let host: HostCapabilities | undefined;
  let problem: string | undefined;
  let probeError = '';
  let access: KvmAccess | undefined;
  try {
    host = probe();
  } catch (e) {
    problem = kvmProblem(e);
    probeError = (e as Error).message;
    if (e instanceof KvmUnavailableError) access = e.access;
  }
  // Opened: fine. Not opened: the cause (from the probe's own verdict, or asked for now).
  access ??= host ? { ok: true, cause: 'ok', device: kvmDevicePath(), problem: '', fix: '', evidence: [] } : kvmAccess();
  // The device opens but KVM answered wrong (not a KVM device, an old API): that is the cause.
  if (!host && access.ok) access = { ...access, ok: false, cause: 'other', problem: probeError, fix: 'run `unhalt doctor` for the details' };
  const kind = host?.kind ?? hostKind();
  const doctor = runDoctor();
  const offered = { features: host?.kvmFeatures ?? 0, hints: host?.kvmHints ?? 0 };
  const linuxBuilt = linuxKitBuilt();

  const info: HostFacts = {
    kind,
    kvm: access,
    cpuModel: hostCpuModel(),
    // What the OS tells (CPUs, memory) is known without KVM; what only KVM tells is not.
    hostCpus: host?.hostCpus ?? hostCpuList(),
    memoryMiB: Math.floor((host?.memoryBytes ?? hostMemoryBytes()) / 1048576),
    maxVcpus: host?.maxVcpus ?? 0,
    haltPollParams: definedOnly(host?.haltPollParams ?? doctor.haltPoll),
    machineTypes: MACHINE_TYPES.map((m) => ({
      name: m.name, summary: m.summary, changes: m.changes, defaults: { ...m.defaults }, newest: m.name === NEWEST_MACHINE,
    })),
    features: PV_FEATURES.map((f) => ({
      name: f.name, summary: f.summary, hostOffers: host ? hostOffers(f, offered) : false, usesHypercalls: f.usesHypercalls ?? false,
    })),
    options: hostOptions(host, kind, linuxBuilt),
    guests: [
      {
        kind: 'probe', built: probeBuilt(), label: 'Probe (diagnostic guest)',
        note: probeBuilt() ? 'boots in milliseconds; exercises halt, IPI, timer and spinlock paths' : 'not built: run "npm run build:guests" (needs gcc)',
      },
      {
        kind: 'linux', built: linuxBuilt, label: 'Linux (Debian cloud kernel + busybox)',
        note: !linuxBuilt ? `not built: ${LINUX_KIT_BUILD_HINT}`
          : kind === 'pvm' ? 'built, but a stock Linux kernel does not finish booting on this PVM host (guest kernel mode is emulated)' : 'built',
      },
    ],
    defaultGuest: defaultGuest(kind, linuxBuilt),
    telemetry: host?.binaryStats
      ? { binaryStats: true }
      : host ? { binaryStats: false, note: 'this host\'s KVM has no binary stats (KVM_CAP_BINARY_STATS_FD, Linux 5.14+): charts show the VMM\'s own exit counters only' } : { binaryStats: false },
    doctor: [...doctor.checks, ...extraChecks].map((c) => ({ name: c.name, ok: c.ok, detail: c.detail, ...(c.fix ? { fix: c.fix } : {}) })),
  };
  if (problem) info.kvmProblem = problem;
  return info;
}

/**
 * Each option with whether this host can give it. Without KVM (`host` undefined) nothing that only
 * KVM can tell is judged here: such options stay open, unremarked (HostInfo.kvmProblem says why
 * once, and a start judges them); what Unhalt never offers, and what the OS tells, still count.
 */
function hostOptions(host: HostCapabilities | undefined, kind: HostCapabilities['kind'], linuxBuilt: boolean): OptionAvailability[] {
  const out: OptionAvailability[] = [];
  for (const m of MACHINE_TYPES) {
    const missing = host && machineUnavailable(m, host);
    out.push(missing
      ? { option: `machine:${m.name}`, available: false, reason: `turns ${missing.feature} on by default, but ${missing.reason}` }
      : { option: `machine:${m.name}`, available: true });
  }
  for (const f of PV_FEATURES) {
    out.push(host ? featureOption(f, host) : f.unavailable ? { option: `feature:${f.name}`, available: false, reason: f.unavailable } : { option: `feature:${f.name}`, available: true });
  }
  const hostCpus = host?.hostCpus ?? hostCpuList();
  if (!host) {
    out.push({ option: 'cpu-pm', available: true }, { option: 'mem-lock', available: true, ...memLockNote() }, { option: 'halt-poll-ns', available: true });
  } else {
    out.push(...kvmKnobOptions(host));
  }
  out.push(pinOption(hostCpus));
  out.push(probeBuilt()
    ? { option: 'guest:probe', available: true }
    : { option: 'guest:probe', available: false, reason: 'the probe guest is not built: run "npm run build:guests" (needs gcc)' });
  out.push(!linuxBuilt
    ? { option: 'guest:linux', available: false, reason: `the Linux guest kit is not built: ${LINUX_KIT_BUILD_HINT}` }
    : kind === 'pvm'
      ? { option: 'guest:linux', available: true, reason: 'a stock Linux kernel does not finish booting on this PVM host (guest kernel mode is emulated at ~1 µs per instruction)' }
      : { option: 'guest:linux', available: true });
  return out;
}

/** cpu-pm, mem-lock and halt polling as this host's KVM gives them. */
function kvmKnobOptions(host: HostCapabilities): OptionAvailability[] {
  const out: OptionAvailability[] = [];
  const noCpuPm = cpuPmUnavailable(host);
  const noHaltPoll = haltPollUnavailable(host);
  out.push(noCpuPm
    ? { option: 'cpu-pm', available: false, reason: noCpuPm }
    : host.kind === 'pvm'
      ? { option: 'cpu-pm', available: true, reason: 'on this PVM host the emulated guest kernel still exits on HLT, so halt exits do not go away' }
      : { option: 'cpu-pm', available: true, reason: 'halt exits flatline with cpu-pm=on (the guest halts without leaving guest mode); turns kvm-pv-unhalt off' });
  out.push({ option: 'mem-lock', available: true, ...memLockNote() });
  out.push(noHaltPoll
    ? { option: 'halt-poll-ns', available: false, reason: noHaltPoll }
    : { option: 'halt-poll-ns', available: true, reason: `host default halt_poll_ns=${host.haltPollParams.halt_poll_ns ?? 'unknown'}` });
  return out;
}

function pinOption(hostCpus: number[]): OptionAvailability {
  return { option: 'pin', available: hostCpus.length > 0, reason: `host CPUs available: ${hostCpus.join(',')}` };
}

function featureOption(f: PvFeature, host: HostCapabilities): OptionAvailability {
  const option = `feature:${f.name}`;
  const missing = featureUnavailable(f, host);
  if (missing) return { option, available: false, reason: missing };
  const notes: string[] = [];
  if (f.usesHypercalls && host.kind === 'pvm') notes.push('its guest side uses KVM hypercalls, which hang a vCPU on this PVM host (the probe guest avoids them)');
  if (f.name === 'kvm-pv-unhalt' && (host.disableExits & DISABLE_EXITS.hlt)) notes.push('not together with cpu-pm=on (no HLT exits, no kick)');
  return notes.length ? { option, available: true, reason: notes.join('; ') } : { option, available: true };
}

/** RLIMIT_MEMLOCK, which mem-lock=on runs into unless the process may lock without limit. */
function memLockNote(): { reason?: string } {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max locked memory'));
    const soft = line?.slice('Max locked memory'.length).trim().split(/\s+/)[0];
    if (!soft || soft === 'unlimited' || process.getuid?.() === 0) return {};
    return { reason: `this process may lock ${Math.floor(Number(soft) / 1048576)} MiB (RLIMIT_MEMLOCK); a larger VM with mem-lock=on fails to start` };
  } catch {
    return {};
  }
}

function definedOnly(r: Record<string, number | undefined>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(r)) if (typeof v === 'number' && Number.isFinite(v)) out[k] = v;
  return out;
}
