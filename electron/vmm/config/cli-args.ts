// `unhalt run` options <-> VmConfig, both ways: the wizard shows the equivalent command line, and
// a round-trip test keeps the two in step.
import { formatCpuOption, parseCpuList, parseCpuOption, parseOvercommit } from './knob-syntax.ts';
import { formatNetOption, parseNetOption } from './net-config.ts';
import { formatDeviceOption, parseDeviceOption } from './device-config.ts';
import { formatDiskOption, parseDiskOption, validateConfig, type VmConfig } from './vm-config.ts';

/** node:util parseArgs options that describe a VM (run-only options like --timeout live in the CLI). */
export const VM_OPTIONS = {
  guest: { type: 'string' },
  kernel: { type: 'string' },
  initrd: { type: 'string' },
  append: { type: 'string' },
  cpus: { type: 'string' },
  memory: { type: 'string' },
  name: { type: 'string' },
  machine: { type: 'string' },
  cpu: { type: 'string' },
  overcommit: { type: 'string' },
  'halt-poll-ns': { type: 'string' },
  'guest-halt-poll-ns': { type: 'string' },
  pin: { type: 'string' },
  'pvm-profile': { type: 'string' },
  rng: { type: 'string' },
  net: { type: 'string' },
  /** FILE[,readonly=on][,snapshot=on], repeatable: one virtio-blk disk each. */
  disk: { type: 'string', multiple: true },
  /** NAME[,OPT=V...] as QEMU's -device (device-config.ts); repeatable by syntax, one of each kind. */
  device: { type: 'string', multiple: true },
} as const;

export type VmOptionValues = Partial<Record<Exclude<keyof typeof VM_OPTIONS, 'disk' | 'device'>, string>> & { disk?: string[]; device?: string[] };

export function configFromOptions(v: VmOptionValues): VmConfig {
  const over = v.overcommit === undefined ? {} : parseOvercommit(v.overcommit);
  return validateConfig({
    guest: v.guest, kernel: v.kernel, initrd: v.initrd, append: v.append, cpus: v.cpus, memoryMiB: v.memory,
    name: v.name, machine: v.machine,
    cpuFeatures: v.cpu === undefined ? undefined : parseCpuOption(v.cpu),
    cpuPm: over.cpuPm, memLock: over.memLock,
    haltPollNs: v['halt-poll-ns'],
    guestHaltPollNs: v['guest-halt-poll-ns'],
    pin: v.pin === undefined ? undefined : parseCpuList(v.pin),
    pvmProfile: v['pvm-profile'],
    rng: v.rng,
    net: v.net === undefined ? undefined : parseNetOption(v.net),
    disks: v.disk?.map(parseDiskOption),
    devices: v.device?.map(parseDeviceOption),
  });
}

/** The `unhalt run` arguments that reproduce a config. */
export function optionsFromConfig(c: VmConfig): string[] {
  const a: string[] = ['--guest', c.guest];
  if (c.kernel !== undefined) a.push('--kernel', c.kernel);
  if (c.initrd !== undefined) a.push('--initrd', c.initrd);
  if (c.append !== undefined) a.push('--append', c.append);
  a.push('--cpus', String(c.cpus), '--memory', String(c.memoryMiB), '--name', c.name, '--machine', c.machine);
  if (Object.keys(c.cpuFeatures).length) a.push('--cpu', formatCpuOption(c.cpuFeatures));
  if (c.cpuPm || c.memLock) a.push('--overcommit', `cpu-pm=${c.cpuPm ? 'on' : 'off'},mem-lock=${c.memLock ? 'on' : 'off'}`);
  if (c.haltPollNs !== undefined) a.push('--halt-poll-ns', String(c.haltPollNs));
  if (c.guestHaltPollNs !== undefined) a.push('--guest-halt-poll-ns', String(c.guestHaltPollNs));
  if (c.pin) a.push('--pin', c.pin.join(','));
  if (!c.pvmProfile) a.push('--pvm-profile', 'off');
  if (c.rng) a.push('--rng', 'on');
  if (c.net) a.push('--net', formatNetOption(c.net));
  for (const d of c.disks ?? []) a.push('--disk', formatDiskOption(d));
  for (const d of c.devices ?? []) a.push('--device', formatDeviceOption(d));
  return a;
}

/** A shell-quoted `unhalt run ...` line. */
export function commandLine(c: VmConfig): string {
  const quote = (s: string) => (/^[A-Za-z0-9_./=,:+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  return ['unhalt', 'run', ...optionsFromConfig(c).map(quote)].join(' ');
}
