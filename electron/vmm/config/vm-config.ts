// The one VM configuration schema (typed, versioned). CLI flags (cli-args.ts), bench config
// strings (config-string.ts), saved JSON and the service API all map to it and are validated
// here; resolve.ts turns it into the MachineSpec the VMM boots.
import {
  MAX_APPEND_LENGTH, MAX_CPUS, MAX_DISKS, MAX_HALT_POLL_NS, MAX_HOST_CPU, MAX_MEMORY_MIB, MAX_NAME_LENGTH, MAX_PATH_LENGTH,
  MAX_PIN_ENTRIES, MIN_MEMORY_MIB,
} from './limits.ts';
import { FEATURE_NAMES } from '../machine/features.ts';
import { resolveMachineName } from '../machine/machine-types.ts';
import { ConfigError } from './config-error.ts';
import { checkNet, type NetConfig } from './net-config.ts';
import { checkDevices, type DeviceConfig } from './device-config.ts';

export const CONFIG_VERSION = 1;
export const GUESTS = ['probe', 'linux', 'custom'] as const;
export type GuestKind = (typeof GUESTS)[number];

export interface VmConfig {
  version: typeof CONFIG_VERSION;
  name: string;
  guest: GuestKind;
  /** Own kernel (guest "custom"): a PVH ELF, a bzImage or a multiboot kernel. */
  kernel?: string;
  initrd?: string;
  /** Kernel command line; for the probe guest its scenario and parameters. */
  append?: string;
  cpus: number;
  memoryMiB: number;
  /** A concrete machine type version, never the alias. */
  machine: string;
  /** Paravirt features set explicitly (QEMU names); the rest come from the machine type. */
  cpuFeatures: Record<string, boolean>;
  /** -overcommit cpu-pm=on: KVM_CAP_X86_DISABLE_EXITS (HLT, PAUSE, CSTATE, MWAIT where possible). */
  cpuPm: boolean;
  /** -overcommit mem-lock=on: lock guest RAM in host memory. */
  memLock: boolean;
  /** Per-VM maximum halt-polling time (KVM_CAP_HALT_POLL); absent = the host default. */
  haltPollNs?: number;
  /**
   * Guest-side halt polling (a Linux guest's cpuidle-haltpoll driver, forced on, and its governor's
   * guest_halt_poll_ns); absent = the guest kernel idles as it chooses. guestPollArgs says how.
   */
  guestHaltPollNs?: number;
  /** Host CPUs for the vCPU threads: vCPU i runs on pin[i % pin.length]. */
  pin?: number[];
  /** Linux guests on PVM hosts: add the parameters that keep a stock kernel off missing instructions. */
  pvmProfile: boolean;
  /** A virtio-rng device (virtio-pci, fed from the host's getrandom); present only when on. */
  rng?: true;
  /** A virtio-net device and its back end (net-config.ts: the schema and its syntax); absent: no network. */
  net?: NetConfig;
  /** virtio-blk disks (raw image files), in order: the first is the guest's vda; absent = none. */
  disks?: DiskConfig[];
  /** Devices beside the board's own (device-config.ts: an isa-debug-exit); absent = none. */
  devices?: DeviceConfig[];
}

/** One disk: a raw image file, read-write unless readonly or snapshot (diskMode: what the two mean together). */
export interface DiskConfig {
  path: string;
  readonly?: true;
  /** QEMU's snapshot=on: the guest writes, but to a throwaway overlay; the image is never written. */
  snapshot?: true;
}

/** How the guest uses a disk: the one reading of readonly and snapshot, for the device, the exports and the wizard. */
export type DiskMode = 'read-write' | 'read-only' | 'snapshot';

/**
 * readonly=on wins over snapshot=on (as in QEMU, which accepts both and then refuses the guest's
 * writes): a guest that may not write has nothing to throw away, so no overlay is made.
 */
export function diskMode(d: { readonly?: boolean; snapshot?: boolean }): DiskMode {
  return d.readonly ? 'read-only' : d.snapshot ? 'snapshot' : 'read-write';
}

/** How a list of disks (--dry-run, the wizard's summary, the VM page) marks one: '' for read-write. */
export function diskModeNote(d: { readonly?: boolean; snapshot?: boolean }): string {
  const mode = diskMode(d);
  return mode === 'read-only' ? 'read-only' : mode === 'snapshot' ? "snapshot: the guest's writes are thrown away" : '';
}

export const DEFAULTS = { cpus: 1, name: 'vm' } as const;
/**
 * Guest memory when none is given, per guest: the schema, the wizard (its default and its hint)
 * and `unhalt serve --demo` all take it from here. The probe needs little; Linux wants room.
 */
export const DEFAULT_MEMORY_MIB: Readonly<Record<GuestKind, number>> = { probe: 128, linux: 512, custom: 128 };

// Every caller imports the error with the schema it checks against.
export { ConfigError };

const FIELDS = new Set(['version', 'name', 'guest', 'kernel', 'initrd', 'append', 'cpus', 'memoryMiB', 'machine',
  'cpuFeatures', 'cpuPm', 'memLock', 'haltPollNs', 'guestHaltPollNs', 'pin', 'pvmProfile', 'rng', 'net', 'disks', 'devices']);

// The one number syntax of every option, config string and API field: decimal digits, an optional
// sign (so a negative value gets a range message, not a syntax one), no hex, no exponents —
// `0x10` or `1e3` would mean different things to different readers.
const DECIMAL_INTEGER = /^\s*[-+]?\d{1,16}\s*$/;
const DECIMAL_NUMBER = /^\s*[-+]?\d{1,16}(?:\.\d{1,9})?\s*$/;

export function integer(value: unknown, field: string, min: number, max: number): number {
  // An emptied field or `--cpus ''`: say what belongs there rather than quoting nothing back.
  if (typeof value === 'string' && value.trim() === '') throw new ConfigError(`${field} is empty: give a whole number from ${min} to ${max}`);
  const n = typeof value === 'string' && DECIMAL_INTEGER.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) {
    throw new ConfigError(`${field} must be a whole number, got ${JSON.stringify(value)?.slice(0, 40)}`);
  }
  if (n < min || n > max) throw new ConfigError(`${field} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/** Like integer(), with a decimal fraction allowed (seconds). */
export function decimal(value: string, field: string, min: number, max: number): number {
  const n = DECIMAL_NUMBER.test(value) ? Number(value) : NaN;
  if (!Number.isFinite(n)) throw new ConfigError(`${field} must be a number, got ${JSON.stringify(value).slice(0, 40)}`);
  if (n < min || n > max) throw new ConfigError(`${field} must be between ${min} and ${max}, got ${n}`);
  return n;
}

/**
 * VM names as the library compares and stores them: surrounding space dropped and inner runs of
 * space made one, so "dup" and "dup " can never be two VMs that look the same in a list.
 */
export function normalizeVmName(name: string): string {
  return name.trim().replace(/\s+/g, ' ');
}

/** A VM's name as stored (normalised), or one line saying what is wrong with it. */
export function checkVmName(raw: unknown): string {
  const name = normalizeVmName(text(raw, 'name', Number.MAX_SAFE_INTEGER));
  if (name.length > MAX_NAME_LENGTH) throw new ConfigError(`name is ${name.length} characters long; at most ${MAX_NAME_LENGTH} are allowed`);
  if (!/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/.test(name)) {
    // Shown without its control characters: the name is the user's text, echoed to a terminal.
    throw new ConfigError(`name "${name.slice(0, 40).replace(/[\x00-\x1f\x7f-\x9f]/g, '?')}" may use letters, digits, space, dot, dash and underscore, and must start with a letter or digit`);
  }
  return name;
}

/** Whether two names denote the same VM (case does not make a different name). */
export function sameVmName(a: string, b: string): boolean {
  return normalizeVmName(a).toLowerCase() === normalizeVmName(b).toLowerCase();
}

function text(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string') throw new ConfigError(`${field} must be text, got ${value === null ? 'null' : typeof value}`);
  if (value.length > max) throw new ConfigError(`${field} is ${value.length} characters long; at most ${max} are allowed`);
  if (value.includes('\0')) throw new ConfigError(`${field} contains a NUL character`);
  // Half of a UTF-16 pair (only JSON can send one): no file name or command line is made of it,
  // and no export could write it (UTF-8 has no such character).
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value)) throw new ConfigError(`${field} contains half of a UTF-16 surrogate pair, which is no character`);
  return value;
}

function bool(value: unknown, field: string): boolean {
  if (typeof value === 'boolean') return value;
  if (value === 'on' || value === 'true') return true;
  if (value === 'off' || value === 'false') return false;
  throw new ConfigError(`${field} must be on or off, got ${JSON.stringify(value)?.slice(0, 40)}`);
}

function path(value: unknown, field: string): string {
  const p = text(value, field, MAX_PATH_LENGTH);
  if (p.trim() === '') throw new ConfigError(`${field} is an empty path`);
  return p;
}

// The field rules that validateConfig applies, exported so that a form (the wizard) checks what
// the user typed with the very same rule and words before anything is sent.

export function checkCpus(value: unknown): number {
  return integer(value, 'cpus', 1, MAX_CPUS);
}

export function checkMemoryMiB(value: unknown): number {
  return integer(value, 'memory (MiB)', MIN_MEMORY_MIB, MAX_MEMORY_MIB);
}

export function checkHaltPollNs(value: unknown): number {
  return integer(value, 'halt-poll-ns', 0, MAX_HALT_POLL_NS);
}

export function checkGuestHaltPollNs(value: unknown): number {
  return integer(value, 'guest-halt-poll-ns', 0, MAX_HALT_POLL_NS);
}

/** The probe guest has no cpuidle driver to force: said where the knob is refused for it. */
export const GUEST_POLL_NEEDS_LINUX = 'guest-halt-poll-ns sets a Linux guest kernel\'s cpuidle-haltpoll; the probe guest has none: '
  + 'drop it, or choose the linux or a custom guest';

/**
 * The kernel parameters of guest-side halt polling: the cpuidle-haltpoll driver forced on (without
 * the host's realtime hint it stays off) and the poll maximum of its governor. With kvm-poll-control
 * the driver also turns host polling off for that vCPU (MSR_KVM_POLL_CONTROL). A kernel without the
 * haltpoll governor (Debian's cloud kernel) ignores the second: its menu governor picks the poll state.
 */
export function guestPollArgs(ns: number): string {
  return `cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=${ns}`;
}

/**
 * A kernel or initrd path as a configuration stores it: absolute. A stored relative path would
 * mean something different depending on where the app or `unhalt serve` was started, so the
 * command line resolves one against its own working directory first (run.ts) and every other
 * surface asks for the full path.
 */
export function checkBootPath(value: unknown, field: 'kernel' | 'initrd'): string {
  const p = path(value, field);
  if (!p.startsWith('/')) {
    throw new ConfigError(`${field} must be an absolute path (its full path on the host, starting with /), got "${p.slice(0, 200)}"`);
  }
  return p;
}

/**
 * One disk's rule, for every surface: an absolute path (as checkBootPath, for the same reason) to
 * a file checked when the VM starts (devices/virtio/disk-image.ts), with no comma in it (the
 * `FILE,readonly=on` text of --disk and config strings splits at commas), readonly on/off and
 * snapshot on/off (both on: read-only, see diskMode; both kept as given, so turning readonly off
 * later leaves the snapshot the user asked for).
 */
export function checkDisk(value: unknown): DiskConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ConfigError('a disk must be an object { path, readonly, snapshot }');
  const r = value as Record<string, unknown>;
  for (const key of Object.keys(r)) if (!DISK_FIELDS.includes(key)) throw new ConfigError(`unknown disk field "${key.slice(0, 40)}"; valid: ${DISK_FIELDS.join(', ')}`);
  const p = path(r.path, 'disk');
  if (!p.startsWith('/')) throw new ConfigError(`disk must be an absolute path (its full path on the host, starting with /), got "${p.slice(0, 200)}"`);
  if (p.includes(',')) throw new ConfigError(`disk path "${p.slice(0, 200)}" contains a comma, which separates disk options; rename the file or link to it`);
  const disk: DiskConfig = { path: p };
  if (r.readonly !== undefined && bool(r.readonly, 'disk readonly')) disk.readonly = true;
  if (r.snapshot !== undefined && bool(r.snapshot, 'disk snapshot')) disk.snapshot = true;
  return disk;
}

const DISK_FIELDS = ['path', 'readonly', 'snapshot'];
/** The on/off options after `FILE,` in --disk and config strings: DiskConfig's flags, by their QEMU names. */
export const DISK_OPTIONS = ['readonly', 'snapshot'] as const;

export function checkDisks(value: unknown): DiskConfig[] {
  if (!Array.isArray(value)) throw new ConfigError('disks must be a list of { path, readonly, snapshot }');
  if (value.length > MAX_DISKS) throw new ConfigError(`${value.length} disks given; at most ${MAX_DISKS} are allowed`);
  return value.map(checkDisk);
}

/** `FILE[,readonly=on|off][,snapshot=on|off]` (--disk, and a config string's disk=...) as the raw fields checkDisk takes. */
export function parseDiskOption(text: string): Record<string, unknown> {
  const [file, ...opts] = text.split(',');
  const raw: Record<string, unknown> = { path: file };
  for (const o of opts) {
    const eq = o.indexOf('=');
    const key = eq < 0 ? o : o.slice(0, eq);
    if (!(DISK_OPTIONS as readonly string[]).includes(key)) {
      throw new ConfigError(`disk option "${o.slice(0, 40)}" is not known; valid: ${DISK_OPTIONS.map((k) => `${k}=on|off`).join(', ')}${eq < 0 ? ' (a disk path may not contain a comma)' : ''}`);
    }
    if (key in raw) throw new ConfigError(`disk option ${key}= is given twice`);
    raw[key] = eq < 0 ? '' : o.slice(eq + 1);
  }
  return raw;
}

/** A disk as --disk and config strings write it. */
export function formatDiskOption(d: DiskConfig): string {
  return `${d.path}${d.readonly ? ',readonly=on' : ''}${d.snapshot ? ',snapshot=on' : ''}`;
}

/** Validates untrusted input (CLI, JSON, API, config strings) into a VmConfig; throws ConfigError. */
export function validateConfig(raw: unknown): VmConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError('a VM configuration must be an object');
  const r = raw as Record<string, unknown>;
  for (const key of Object.keys(r)) {
    if (!FIELDS.has(key)) throw new ConfigError(`unknown configuration field "${key.slice(0, 40)}"`);
  }
  if (r.version !== undefined && r.version !== CONFIG_VERSION) {
    throw new ConfigError(`configuration version ${JSON.stringify(r.version)?.slice(0, 20)} is not supported (this Unhalt reads version ${CONFIG_VERSION})`);
  }
  // The limit applies to the name as stored, after normalising; the raw text only has to be sane.
  const name = r.name === undefined ? DEFAULTS.name : checkVmName(r.name);
  const kernel = r.kernel === undefined ? undefined : checkBootPath(r.kernel, 'kernel');
  const guest = r.guest === undefined ? (kernel ? 'custom' : 'probe') : r.guest;
  if (!GUESTS.includes(guest as GuestKind)) throw new ConfigError(`guest must be one of ${GUESTS.join(', ')}, got ${JSON.stringify(guest)?.slice(0, 40)}`);
  if (guest === 'custom' && !kernel) throw new ConfigError('a custom guest needs a kernel (--kernel FILE)');
  if (guest !== 'custom' && kernel) throw new ConfigError(`the ${guest} guest brings its own kernel: drop --kernel, or use --guest custom`);

  let machine: string;
  try {
    machine = resolveMachineName(r.machine === undefined ? 'unhalt' : text(r.machine, 'machine', 64));
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
  const cpuFeatures: Record<string, boolean> = {};
  if (r.cpuFeatures !== undefined) {
    if (typeof r.cpuFeatures !== 'object' || r.cpuFeatures === null || Array.isArray(r.cpuFeatures)) {
      throw new ConfigError('cpuFeatures must be an object of feature names to on/off');
    }
    for (const [k, v] of Object.entries(r.cpuFeatures)) {
      if (!FEATURE_NAMES.includes(k)) throw new ConfigError(unknownFeature(k));
      cpuFeatures[k] = bool(v, k);
    }
  }
  const config: VmConfig = {
    version: CONFIG_VERSION,
    name,
    guest: guest as GuestKind,
    cpus: r.cpus === undefined ? DEFAULTS.cpus : checkCpus(r.cpus),
    memoryMiB: r.memoryMiB === undefined ? DEFAULT_MEMORY_MIB[guest as GuestKind] : checkMemoryMiB(r.memoryMiB),
    machine,
    cpuFeatures,
    cpuPm: r.cpuPm === undefined ? false : bool(r.cpuPm, 'cpu-pm'),
    memLock: r.memLock === undefined ? false : bool(r.memLock, 'mem-lock'),
    pvmProfile: r.pvmProfile === undefined ? true : bool(r.pvmProfile, 'pvm-profile'),
  };
  if (kernel !== undefined) config.kernel = kernel;
  if (r.initrd !== undefined) config.initrd = checkBootPath(r.initrd, 'initrd');
  if (r.append !== undefined) {
    // A kernel command line is one line of text: tabs and line breaks are the white space the
    // kernel reads them as (spaces, also in VMs saved before); another control character is a
    // paste gone wrong.
    config.append = text(r.append, 'append', MAX_APPEND_LENGTH).replace(/[\t\n\r]/g, ' ');
    const ctl = /[\x01-\x1f\x7f]/.exec(config.append);
    if (ctl) throw new ConfigError(`append contains the control character U+${ctl[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}: the kernel's command line is one line of printable text`);
  }
  if (r.haltPollNs !== undefined) config.haltPollNs = checkHaltPollNs(r.haltPollNs);
  if (r.guestHaltPollNs !== undefined) {
    config.guestHaltPollNs = checkGuestHaltPollNs(r.guestHaltPollNs);
    if (config.guest === 'probe') throw new ConfigError(GUEST_POLL_NEEDS_LINUX);
  }
  if (r.rng !== undefined && bool(r.rng, 'rng')) config.rng = true;
  if (r.net !== undefined) config.net = checkNet(r.net);
  if (r.disks !== undefined) {
    const disks = checkDisks(r.disks);
    if (disks.length) config.disks = disks;
  }
  if (r.devices !== undefined) {
    const devices = checkDevices(r.devices);
    if (devices.length) config.devices = devices;
  }
  if (r.pin !== undefined) {
    if (!Array.isArray(r.pin) || r.pin.length === 0) throw new ConfigError('pin must be a non-empty list of host CPU numbers');
    if (r.pin.length > MAX_PIN_ENTRIES) throw new ConfigError(`pin lists ${r.pin.length} host CPUs; at most ${MAX_PIN_ENTRIES} are allowed`);
    config.pin = r.pin.map((c) => integer(c, 'pin', 0, MAX_HOST_CPU));
  }
  return config;
}

export function unknownFeature(name: string): string {
  return `unknown CPU feature "${name.slice(0, 40)}"; valid: ${FEATURE_NAMES.join(', ')}`;
}
