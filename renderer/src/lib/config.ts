// Renderer-side helpers for VM configurations: effective paravirt features (machine defaults +
// explicit choices), the knob line on cards, and config strings for the compare view.
import type { HostInfo, OptionAvailability, VmConfigDto, VmStatus } from '../../../electron/service/api.ts';
import { effectiveFeatures } from '../../../electron/vmm/config/rules.ts';

export function machineDefaults(host: HostInfo | null, machine: string): Record<string, boolean> {
  return host?.machineTypes.find((m) => m.name === machine)?.defaults ?? {};
}

/** The value a feature will have and why, by the VMM's own rule (rules.ts: cpu-pm=on turns a default pv-unhalt off). */
export function featureState(host: HostInfo | null, c: Pick<VmConfigDto, 'machine' | 'cpuFeatures' | 'cpuPm'>, name: string) {
  return effectiveFeatures(c, machineDefaults(host, c.machine)).find((f) => f.name === name)
    ?? { name, value: false, source: 'machine-type' as const };
}

export function option(host: HostInfo | null, name: string): OptionAvailability | undefined {
  return host?.options.find((o) => o.option === name);
}

/** Whether the host can give an option; unknown options count as available. */
export function available(host: HostInfo | null, name: string): { ok: boolean; reason?: string } {
  const o = option(host, name);
  return o ? { ok: o.available, reason: o.reason } : { ok: true };
}

export function haltPollLabel(ns: number | undefined, host?: HostInfo | null): string {
  if (ns === undefined) {
    const d = host?.haltPollParams?.halt_poll_ns;
    return d === undefined ? 'host default' : `host default (${fmtNs(d)})`;
  }
  return fmtNs(ns);
}

export function fmtNs(ns: number): string {
  if (ns === 0) return '0 (off)';
  if (ns >= 1e6 && ns % 1e3 === 0) return `${ns / 1e6} ms`;
  if (ns >= 1e3 && ns % 1 === 0) return `${ns / 1e3} µs`;
  return `${ns} ns`;
}

/** A live change that differs from the saved configuration (VmStatus.live), or undefined. */
export function liveHaltPoll(c: VmConfigDto, status?: VmStatus): number | undefined {
  const ns = status?.live?.haltPollNs;
  return ns !== undefined && ns !== c.haltPollNs ? ns : undefined;
}

export function livePin(c: VmConfigDto, status?: VmStatus): number[] | undefined {
  const pin = status?.live?.pin;
  return pin !== undefined && pin.join(',') !== (c.pin ?? []).join(',') ? pin : undefined;
}

/** Halt polling as it is now: a live change of this run says so, next to what is saved. */
export function haltPollNow(c: VmConfigDto, status: VmStatus | undefined, host?: HostInfo | null): string {
  const live = liveHaltPoll(c, status);
  return live === undefined ? haltPollLabel(c.haltPollNs, host) : `${fmtNs(live)} (this run only; saved: ${haltPollLabel(c.haltPollNs, host)})`;
}

/** Pinning as it is now, likewise. */
export function pinNow(c: VmConfigDto, status: VmStatus | undefined): string {
  const show = (pin: readonly number[] | undefined) => (pin?.length ? `host CPU ${pin.join(', ')}` : 'not pinned');
  const live = livePin(c, status);
  return live === undefined ? show(c.pin) : `${show(live)} (this run only; saved: ${show(c.pin)})`;
}

const shortNs = (ns: number | undefined) => (ns === undefined ? 'default' : fmtNs(ns).replace(' (off)', ''));

/**
 * Knobs worth a glance on a card, as short label/value pairs: what the guest gets (resolved by
 * the VMM's rules) and, while the VM runs, a live change marked "this run only".
 */
export function keyKnobs(host: HostInfo | null, c: VmConfigDto, status?: VmStatus): { label: string; value: string; title?: string; live?: boolean }[] {
  const pv = featureState(host, c, 'kvm-pv-unhalt');
  const poll = liveHaltPoll(c, status);
  const pin = livePin(c, status);
  const knobs: { label: string; value: string; title?: string; live?: boolean }[] = [
    { label: 'vCPUs', value: String(c.cpus) },
    { label: 'memory', value: c.memoryMiB >= 1024 && c.memoryMiB % 1024 === 0 ? `${c.memoryMiB / 1024} GiB` : `${c.memoryMiB} MiB` },
    { label: 'cpu-pm', value: c.cpuPm ? 'on' : 'off' },
    { label: 'pv-unhalt', value: pv.value ? 'on' : 'off',
      title: pv.source === 'explicit' ? 'set explicitly' : pv.source === 'cpu-pm' ? `off because cpu-pm=on (the ${c.machine} default is on)` : `from ${c.machine}` },
    poll === undefined
      ? { label: 'halt-poll', value: shortNs(c.haltPollNs) }
      : { label: 'halt-poll', value: `${shortNs(poll)} (this run only)`, title: `changed live; saved: ${shortNs(c.haltPollNs)}`, live: true },
  ];
  if (c.guestHaltPollNs !== undefined) knobs.push({ label: 'guest-poll', value: shortNs(c.guestHaltPollNs), title: "the guest's cpuidle-haltpoll, forced on" });
  if (pin !== undefined) knobs.push({ label: 'pin', value: `${pin.length ? pin.join(',') : 'none'} (this run only)`, title: `changed live; saved: ${c.pin?.join(',') ?? 'none'}`, live: true });
  return knobs;
}

/** The probe guest's scenario from its command line ("scenario=idle ms=500" -> "idle"). */
export function probeScenario(append: string | undefined): string {
  return /(?:^|\s)scenario=(\S+)/.exec(append ?? '')?.[1] ?? 'echo';
}

export function guestLabel(host: HostInfo | null, c: VmConfigDto): string {
  if (c.guest === 'custom') return `own kernel${c.kernel ? `: ${c.kernel.split('/').pop()}` : ''}`;
  const g = host?.guests.find((x) => x.kind === c.guest);
  const base = g?.label ?? (c.guest === 'probe' ? 'Probe (diagnostic guest)' : 'Linux');
  return c.guest === 'probe' ? `${base} · ${probeScenario(c.append)}` : base;
}
