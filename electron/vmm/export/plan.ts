// What an export writes out, whatever the target: the configuration's knobs as they mean on any
// host (machine type defaults, explicit features, the cpu-pm rule: machineFeatures), the files
// the guest boots, and the advice for the knobs other VMMs have no option for. Pure: no files
// are read here, so a tuning advisor's recommended configuration exports the same way a saved
// VM does. The three writers (qemu.ts, libvirt.ts, kubevirt.ts) take an ExportPlan.
import { type BootFiles, machineFeatures, type ResolvedFeature, vcpuPins } from '../config/resolve.ts';
import type { VmConfig } from '../config/vm-config.ts';
import type { HostKind } from '../host.ts';
import { feature } from '../machine/features.ts';
import { EXPORT_HOST_LABELS } from './types.ts';

export interface ExportInput {
  config: VmConfig;
  /** What the guest boots (resolveBoot: the built probe or Linux kit, or the VM's own kernel). */
  boot: BootFiles;
  /**
   * The kind of host the export is for. 'pvm' adds what QEMU needs there: `-cpu host` aborts
   * on PVM ("failed to set MSR 0x10a") unless arch-capabilities is off.
   */
  hostKind: HostKind;
  /** Where ttyS1 (the guest's agent / results channel) is written; each format has a default. */
  agentLog?: string;
  /** libvirt: also copy ttyS0 into this file (QEMU's chardev log), next to the pty `virsh console` uses. */
  consoleLog?: string;
}

export interface ExportPlan {
  config: VmConfig;
  boot: BootFiles;
  hostKind: HostKind;
  agentLog?: string;
  consoleLog?: string;
  /** The concrete Unhalt machine type (unhalt-1.0, ...). */
  machine: string;
  /** Every paravirt feature with its value and where the value came from. */
  features: ResolvedFeature[];
  /** The host CPU of each vCPU, when pinned. */
  pins?: number[];
  /** What the rules changed (cpu-pm=on turning a default pv-unhalt off). */
  notes: string[];
  /** The VM's name as a file name / DNS label: lower case, [a-z0-9-]. */
  slug: string;
}

/** Throws ConfigError for a configuration that contradicts itself (kvm-pv-unhalt=on with cpu-pm=on). */
export function exportPlan(input: ExportInput): ExportPlan {
  const { machine, features, notes } = machineFeatures(input.config);
  const plan: ExportPlan = {
    config: input.config, boot: input.boot, hostKind: input.hostKind, machine, features, notes, slug: slugOf(input.config.name),
  };
  const pins = vcpuPins(input.config);
  if (pins) plan.pins = pins;
  if (input.agentLog !== undefined) plan.agentLog = input.agentLog;
  if (input.consoleLog !== undefined) plan.consoleLog = input.consoleLog;
  return plan;
}

export function featureValue(plan: ExportPlan, name: string): boolean {
  const f = plan.features.find((x) => x.name === name);
  if (!f) throw new Error(`no paravirt feature ${name}`);
  return f.value;
}

/** A DNS-1123 label (KubeVirt's metadata.name, file names): VM names allow space, dot, underscore and upper case. */
export function slugOf(name: string): string {
  const s = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63).replace(/-+$/, '');
  return s || 'vm';
}

/** `0,1 -> vCPU0 on CPU 0, vCPU1 on CPU 1` in one line, for comments. */
export function describePins(pins: number[]): string {
  return pins.map((cpu, i) => `vCPU ${i} on host CPU ${cpu}`).join(', ');
}

/**
 * Per-VM halt polling (KVM_CAP_HALT_POLL) is a knob no other VMM exposes: the kvm module
 * parameter is the fleet-wide one. Every format says so in the same words.
 */
export function haltPollAdvice(ns: number): string[] {
  return [
    `halt-poll-ns=${ns}: no per-VM halt polling option exists here (Unhalt sets KVM_CAP_HALT_POLL on the VM).`,
    `  The fleet-wide knob is the host's kvm module parameter: echo ${ns} > /sys/module/kvm/parameters/halt_poll_ns`,
    `  (every VM on that host; keep it across boots with "options kvm halt_poll_ns=${ns}" in /etc/modprobe.d/).`,
  ];
}

/** The one line on the machine type, shared by every format. */
export function machineTypeNote(plan: ExportPlan, board: string): string[] {
  return [
    `Machine type ${plan.machine}: Unhalt's machine types version the paravirt feature defaults (the guest ABI).`,
    `  This export sets every feature to its value in this VM (how, feature by feature, is said here), so the guest`,
    `  does not depend on the target's defaults. The board maps to ${board}.`,
  ];
}

/**
 * How `-cpu host` (libvirt's and KubeVirt's host-passthrough) sets a feature nobody names: on
 * where the host offers it, except the hints, which QEMU leaves off (features.ts, vmmHint), and
 * what needs a board Unhalt does not have (features.ts, unavailable: kvm-msi-ext-dest-id, which
 * QEMU leaves off with the in-kernel irqchip every export uses).
 */
export function passthroughDefault(name: string): boolean {
  const f = feature(name);
  return !f?.vmmHint && !f?.unavailable;
}

/**
 * The header line that says which kind of host the export was made for (chosen: `--for-host`,
 * the API's forHost, the Export panel), and what that changed.
 */
export function madeForLine(plan: Pick<ExportPlan, 'hostKind'>): string {
  return plan.hostKind === 'pvm'
    ? `Made for a ${EXPORT_HOST_LABELS.pvm}: arch-capabilities is off, or -cpu host aborts there (harmless elsewhere).`
    : `Made for a ${EXPORT_HOST_LABELS.hardware}: on a PVM host -cpu host aborts (MSR 0x10a); export for a PVM host to run it there.`;
}

/** One shell word: as is when it is plain, else in single quotes. */
/**
 * One comment line of an export, whatever strings of the user's it quotes (a path, a name): line
 * breaks of any kind (\n, \r, U+0085, U+2028/9) would end the comment and make the rest code or
 * YAML, other control characters and bidi overrides would hide what follows. Each is written as
 * a visible escape (\xNN, \uNNNN); the file itself stays one comment line.
 */
export function commentLine(s: string): string {
  // Also U+FFFE/U+FFFF and lone surrogates: no YAML (or UTF-8 file) may hold them.
  return s.replace(/[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, (ch) => {
    const n = ch.charCodeAt(0);
    return n < 0x100 ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=,+@%-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
