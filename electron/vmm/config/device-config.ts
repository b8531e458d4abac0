// Extra devices a VM may carry on top of its board (`--device NAME[,OPT=V...]`, as QEMU's -device):
// the schema, the one syntax every text surface uses (the CLI, config strings, the exports) and
// the rule a saved or API value must pass. Pure: the renderer imports it. Whether the ports are
// free on the board is judged where the board is known (resolve.ts, devices/board.ts).
import { ConfigError } from './config-error.ts';

/**
 * QEMU's isa-debug-exit: a guest write of V to its ports ends the run with status (V << 1) | 1,
 * which test suites (kvm-unit-tests) use to report pass or fail.
 */
export interface DebugExitConfig {
  type: 'isa-debug-exit';
  iobase: number;
  iosize: 1 | 2 | 4;
}

/**
 * QEMU's pc-testdev, which kvm-unit-tests' own runner always adds: a scratch register at ports
 * 0xe0-0xe3 (and byte-wise at 0xe8-0xeb), a page-flush port at 0xe4, ISA IRQ lines driven by
 * writes to 0x2000+N, and 64 KiB of RAM-like MMIO at 0xff000000 (devices/pc-testdev.ts). No options.
 */
export interface PcTestdevConfig {
  type: 'pc-testdev';
}

export type DeviceConfig = DebugExitConfig | PcTestdevConfig;
export const DEVICE_TYPES = ['isa-debug-exit', 'pc-testdev'] as const;
/** QEMU's defaults for the device's properties (hw/misc/debugexit.c). */
export const DEBUG_EXIT_DEFAULTS = Object.freeze({ iobase: 0x501, iosize: 2 as const });
/** The options after `isa-debug-exit,` (config strings take them as keys right after device=). */
export const DEVICE_OPTIONS = ['iobase', 'iosize'] as const;
const IOSIZES = [1, 2, 4] as const;
const PORTS = 0x10000;

/** What a refusal offers as the fix: every device known, with its options. */
export const DEVICE_SYNTAX = 'isa-debug-exit[,iobase=N][,iosize=1|2|4] (N decimal or 0x hex; QEMU\'s defaults iobase=0x501,iosize=2), pc-testdev';

/**
 * The exit status QEMU gives a guest's write of `value` to isa-debug-exit, as a process's 8-bit
 * status: `unhalt run` exits with it, the app shows it next to the value.
 */
export function debugExitStatus(value: number): number {
  return ((value << 1) | 1) & 0xff;
}

/** Parses the text of `--device` (and a config string's device= with its iobase=/iosize= parts). */
export function parseDeviceOption(text: string): DeviceConfig {
  const [name = '', ...opts] = text.split(',').map((p) => p.trim());
  if (!(DEVICE_TYPES as readonly string[]).includes(name)) {
    throw new ConfigError(`device "${name.slice(0, 40)}" is not known; the devices known: ${DEVICE_SYNTAX}`);
  }
  const raw: Record<string, unknown> = { type: name };
  for (const o of opts) {
    if (o === '') continue;
    if (name === 'pc-testdev') throw new ConfigError(`pc-testdev: option "${o.slice(0, 40)}" is not known; it takes no options`);
    const eq = o.indexOf('=');
    const key = eq < 0 ? o : o.slice(0, eq);
    if (!(DEVICE_OPTIONS as readonly string[]).includes(key)) {
      throw new ConfigError(`${name}: option "${o.slice(0, 40)}" is not known; its options: iobase=N, iosize=1|2|4`);
    }
    if (key in raw) throw new ConfigError(`${name}: ${key}= is given twice; give it once`);
    raw[key] = portNumber(eq < 0 ? '' : o.slice(eq + 1), `${name}: ${key}`);
  }
  return checkDevice(raw);
}

/** A device as --device and config strings write it (parseDeviceOption's inverse). */
export function formatDeviceOption(d: DeviceConfig): string {
  return d.type === 'pc-testdev' ? d.type : `${d.type},iobase=${hex(d.iobase)},iosize=${d.iosize}`;
}

/** QEMU's own -device text for it (its properties in hex, as QEMU's documentation writes them). */
export function qemuDeviceOption(d: DeviceConfig): string {
  return d.type === 'pc-testdev' ? d.type : `${d.type},iobase=${hex(d.iobase)},iosize=${hex(d.iosize)}`;
}

/** The rule a device must pass, from any surface (JSON of the library or the API, or parsed text). */
export function checkDevice(value: unknown): DeviceConfig {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`a device must be an object { type: "isa-debug-exit", iobase, iosize } or { type: "pc-testdev" }; the devices known: ${DEVICE_SYNTAX}`);
  }
  const r = value as Record<string, unknown>;
  if (!(DEVICE_TYPES as readonly unknown[]).includes(r.type)) {
    throw new ConfigError(`device ${JSON.stringify(r.type)?.slice(0, 40)} is not known; the devices known: ${DEVICE_SYNTAX}`);
  }
  if (r.type === 'pc-testdev') {
    const extra = Object.keys(r).find((k) => k !== 'type');
    if (extra !== undefined) throw new ConfigError(`pc-testdev: unknown field "${extra.slice(0, 40)}"; it has only type`);
    return { type: 'pc-testdev' };
  }
  for (const k of Object.keys(r)) {
    if (k !== 'type' && !(DEVICE_OPTIONS as readonly string[]).includes(k)) throw new ConfigError(`isa-debug-exit: unknown field "${k.slice(0, 40)}"; its fields: type, iobase, iosize`);
  }
  const iobase = r.iobase === undefined ? DEBUG_EXIT_DEFAULTS.iobase : r.iobase;
  const iosize = r.iosize === undefined ? DEBUG_EXIT_DEFAULTS.iosize : r.iosize;
  if (typeof iobase !== 'number' || !Number.isInteger(iobase) || iobase < 0 || iobase >= PORTS) {
    throw new ConfigError(`isa-debug-exit: iobase must be a port from 0 to 0xffff, got ${JSON.stringify(iobase)?.slice(0, 20)}`);
  }
  if (!(IOSIZES as readonly unknown[]).includes(iosize)) {
    throw new ConfigError(`isa-debug-exit: iosize must be 1, 2 or 4, got ${JSON.stringify(iosize)?.slice(0, 20)}`);
  }
  const size = iosize as DebugExitConfig['iosize'];
  if (iobase + size > PORTS) {
    throw new ConfigError(`isa-debug-exit: iobase ${hex(iobase)} with iosize ${size} runs past port 0xffff; give a lower iobase`);
  }
  return { type: 'isa-debug-exit', iobase, iosize: size };
}

/** A VM's devices: each checked, and at most one of each kind (a board has one isa-debug-exit). */
export function checkDevices(value: unknown): DeviceConfig[] {
  if (!Array.isArray(value)) throw new ConfigError(`devices must be a list of { type, ... }; the devices known: ${DEVICE_SYNTAX}`);
  // A longer list than there are kinds repeats one within its first kinds + 1 entries.
  const devices = value.slice(0, DEVICE_TYPES.length + 1).map(checkDevice);
  const seen = new Set<string>();
  for (const d of devices) {
    if (seen.has(d.type)) throw new ConfigError(`${d.type} is given twice: a VM has at most one; give it once`);
    seen.add(d.type);
  }
  return devices;
}

/** The VM's isa-debug-exit, if it has one. */
export function debugExitOf(c: { devices?: readonly DeviceConfig[] }): DebugExitConfig | undefined {
  return c.devices?.find((d): d is DebugExitConfig => d.type === 'isa-debug-exit');
}

/** Whether the VM has a pc-testdev. */
export function hasPcTestdev(c: { devices?: readonly DeviceConfig[] }): boolean {
  return c.devices?.some((d) => d.type === 'pc-testdev') ?? false;
}

/** A port number as QEMU's properties take it: decimal, or hex with 0x. */
function portNumber(text: string, field: string): number {
  const t = text.trim();
  const n = /^0x[0-9a-f]{1,8}$/i.test(t) ? parseInt(t.slice(2), 16) : /^\d{1,10}$/.test(t) ? Number(t) : NaN;
  if (Number.isNaN(n)) throw new ConfigError(`${field} must be a number (decimal, or hex with 0x), got "${t.slice(0, 20)}"`);
  return n;
}

function hex(n: number): string {
  return `0x${n.toString(16)}`;
}
