// Renderer-side helpers for VM configurations: effective paravirt features (machine defaults +
// explicit choices), the knob line on cards, and config strings for the compare view.
import type { HostInfo, OptionAvailability, VmConfigDto } from '../../../electron/service/api.ts';

export function machineDefaults(host: HostInfo | null, machine: string): Record<string, boolean> {
  return host?.machineTypes.find((m) => m.name === machine)?.defaults ?? {};
}

/** The value a feature will have: the explicit choice, else the machine type's default. */
export function featureValue(host: HostInfo | null, c: Pick<VmConfigDto, 'machine' | 'cpuFeatures'>, name: string): boolean {
  return c.cpuFeatures[name] ?? machineDefaults(host, c.machine)[name] ?? false;
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

/** Knobs worth a glance on a card, as short label/value pairs. */
export function keyKnobs(host: HostInfo | null, c: VmConfigDto): { label: string; value: string; title?: string }[] {
  return [
    { label: 'vCPUs', value: String(c.cpus) },
    { label: 'memory', value: c.memoryMiB >= 1024 && c.memoryMiB % 1024 === 0 ? `${c.memoryMiB / 1024} GiB` : `${c.memoryMiB} MiB` },
    { label: 'cpu-pm', value: c.cpuPm ? 'on' : 'off' },
    { label: 'pv-unhalt', value: featureValue(host, c, 'kvm-pv-unhalt') ? 'on' : 'off',
      title: c.cpuFeatures['kvm-pv-unhalt'] === undefined ? `from ${c.machine}` : 'set explicitly' },
    { label: 'halt-poll', value: c.haltPollNs === undefined ? 'default' : fmtNs(c.haltPollNs).replace(' (off)', '') },
  ];
}

/** Parses "0,1" / "0-3" / "0+1" into CPU numbers; null when malformed. */
export function parseCpuList(s: string): number[] | null {
  const out: number[] = [];
  for (const part of s.split(/[,+\s]+/).filter(Boolean)) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) return null;
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    if (b < a || b - a > 4096) return null;
    for (let i = a; i <= b; i++) out.push(i);
  }
  return out;
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
