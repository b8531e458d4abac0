// The wizard's field checks: what the user typed, judged by the very rules (and words) the API
// and `unhalt run` apply — the schema's field rules (vm-config.ts), the host-fit and cpu-pm rules
// (rules.ts), the pin-list syntax (knob-syntax.ts). Only the boot files need the service: it
// answers for them through checkBootFiles, with the message createVm would give.
import type { HostInfo } from '../../../../electron/service/api.ts';
import { parseCpuList } from '../../../../electron/vmm/config/knob-syntax.ts';
import {
  checkCpusFit, checkKnobConflicts, checkMemoryFit, checkNameFree, checkPinFit, type HostLimits,
} from '../../../../electron/vmm/config/rules.ts';
import { checkBootPath, checkCpus, checkDisks, checkGuestHaltPollNs, checkHaltPollNs, checkMemoryMiB, validateConfig } from '../../../../electron/vmm/config/vm-config.ts';
import { draftDiskToConfig, type Draft } from './draft.ts';
import { netProblems, type NetFieldId } from './net-draft.ts';
import { problem } from './rule-problem.ts';

export type FieldId = 'name' | 'kernel' | 'initrd' | 'cpus' | 'memoryMiB' | 'cpuFeatures' | 'cpuPm' | 'haltPollNs' | 'guestHaltPollNs' | 'pin' | 'disks' | NetFieldId;
export type FieldProblems = Partial<Record<FieldId, string>>;

/** The service's verdict on the boot files as typed: a message per file, or none. */
export interface FileVerdict {
  kernel?: string;
  initrd?: string;
}

export function hostLimits(host: HostInfo | null): HostLimits | null {
  if (!host) return null;
  return { maxVcpus: host.maxVcpus > 0 ? host.maxVcpus : undefined, memoryMiB: host.memoryMiB, hostCpus: host.hostCpus };
}

/** Which boot files the draft names (the service checks these; see FileVerdict). */
export function bootFilesOf(d: Draft): { kernel?: string; initrd?: string } {
  const files: { kernel?: string; initrd?: string } = {};
  if (d.guest === 'custom' && d.kernel.trim().startsWith('/')) files.kernel = d.kernel.trim();
  if (d.guest !== 'probe' && d.initrd.trim().startsWith('/')) files.initrd = d.initrd.trim();
  return files;
}

export function draftProblems(d: Draft, host: HostInfo | null, names: Iterable<string>, files: FileVerdict | null): FieldProblems {
  const limits = hostLimits(host);
  const out: FieldProblems = {};
  const set = (field: FieldId, message: string | undefined) => { if (message && !out[field]) out[field] = message; };

  set('name', problem(() => validateConfig({ name: d.name })) ?? problem(() => checkNameFree(d.name, names)));
  if (d.guest === 'custom') {
    set('kernel', d.kernel.trim() === '' ? problem(() => validateConfig({ guest: 'custom' })) : problem(() => checkBootPath(d.kernel.trim(), 'kernel')));
    set('kernel', files?.kernel);
  }
  if (d.guest !== 'probe' && d.initrd.trim() !== '') {
    set('initrd', problem(() => checkBootPath(d.initrd.trim(), 'initrd')));
    set('initrd', files?.initrd);
  }
  set('cpus', problem(() => checkCpusFit(checkCpus(d.cpus), limits?.maxVcpus)));
  set('memoryMiB', problem(() => {
    const mib = checkMemoryMiB(d.memoryMiB);
    if (limits) checkMemoryFit(mib, limits.memoryMiB);
  }));
  if (d.disks.length) set('disks', problem(() => checkDisks(d.disks.map(draftDiskToConfig))));
  for (const [field, message] of Object.entries(netProblems(d.net))) set(field as NetFieldId, message);
  const conflict = problem(() => checkKnobConflicts(d));
  set('cpuFeatures', conflict);
  set('cpuPm', conflict);
  if (d.haltPollMode === 'custom') set('haltPollNs', problem(() => checkHaltPollNs(d.haltPollNs)));
  if (d.guestPoll && d.guest !== 'probe') set('guestHaltPollNs', problem(() => checkGuestHaltPollNs(d.guestHaltPollNs)));
  if (d.pin.trim() !== '') {
    set('pin', problem(() => {
      const pin = parseCpuList(d.pin);
      if (limits && limits.hostCpus.length) checkPinFit(pin, limits.hostCpus);
    }));
  }
  return out;
}
