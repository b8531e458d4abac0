// The wizard's edit mode starts from a saved configuration: the inverse of draftToConfig, so that
// saving an untouched draft stores an equivalent configuration (a probe's default `scenario=echo`
// may come back as no command line at all, which means the same).
import type { HostInfo, VmConfigDto } from '../../../../electron/service/api.ts';
import { initialDraft, PROBE_SCENARIOS, type Draft } from './draft.ts';
import { configToDraftNet } from './net-draft.ts';

export function configToDraft(c: VmConfigDto, host: HostInfo | null, names: Set<string>): Draft {
  const base = initialDraft(host, c.guest === 'linux' ? 'linux' : 'probe', names);
  const probe = c.guest === 'probe' ? splitProbeAppend(c.append) : undefined;
  return {
    ...base,
    name: c.name,
    guest: c.guest,
    probeScenario: probe?.scenario ?? base.probeScenario,
    probeArgs: probe?.args ?? '',
    kernel: c.kernel ?? '',
    initrd: c.initrd ?? '',
    append: c.guest === 'probe' ? '' : c.append ?? '',
    pvmProfile: c.pvmProfile,
    cpus: asDrafted(base.cpus, c.cpus),
    memoryMiB: asDrafted(base.memoryMiB, c.memoryMiB),
    machine: c.machine,
    cpuFeatures: { ...c.cpuFeatures },
    cpuPm: c.cpuPm,
    memLock: c.memLock,
    haltPollMode: c.haltPollNs === undefined ? 'default' : 'custom',
    haltPollNs: c.haltPollNs === undefined ? base.haltPollNs : asDrafted(base.haltPollNs, c.haltPollNs),
    guestPoll: c.guestHaltPollNs !== undefined,
    guestHaltPollNs: c.guestHaltPollNs === undefined ? base.guestHaltPollNs : asDrafted(base.guestHaltPollNs, c.guestHaltPollNs),
    pin: pinAsDrafted(base.pin, c.pin ?? []),
    rng: c.rng === true,
    net: configToDraftNet(c.net),
    disks: (c.disks ?? []).map((d) => ({ path: d.path, readonly: d.readonly === true, snapshot: d.snapshot === true })),
    devices: (c.devices ?? []).map((d) => ({ ...d })),
  };
}

/** "scenario=timer live=1" -> timer + "live=1"; a command line without a known scenario keeps all of it as parameters of echo. */
function splitProbeAppend(append: string | undefined): { scenario: string; args: string } {
  const text = (append ?? '').trim();
  const m = /^scenario=(\S+)\s*(.*)$/.exec(text);
  if (m && PROBE_SCENARIOS.some((s) => s.name === m[1])) return { scenario: m[1]!, args: m[2]! };
  return { scenario: 'echo', args: text };
}

/**
 * A stored number in the draft's own form for that field, taken from a fresh draft: a number, or
 * the text a user would have typed (a wizard whose fields keep what was typed).
 */
function asDrafted<T>(sample: T, n: number): T {
  return (typeof sample === 'string' ? String(n) : n) as T;
}

/** Pinned host CPUs as the draft keeps them: a list, or the text "0,1". */
function pinAsDrafted<T>(sample: T, pin: readonly number[]): T {
  return (typeof sample === 'string' ? pin.join(',') : [...pin]) as T;
}
