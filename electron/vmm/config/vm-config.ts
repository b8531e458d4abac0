// The one VM configuration schema (versioned). The CLI flags, saved JSON and the service API all
// map to it; `resolveMachine` turns it into the MachineSpec the VMM boots.
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { hostKind, hostMemoryBytes, type HostKind } from '../host.ts';
import { PROBE_KERNEL } from '../guests.ts';
import { MIN_MEMORY_MIB, type MachineSpec } from '../vm.ts';

export const CONFIG_VERSION = 1;
export const GUESTS = ['probe', 'custom'] as const;
export type GuestKind = (typeof GUESTS)[number];

export interface VmConfig {
  version: typeof CONFIG_VERSION;
  name: string;
  guest: GuestKind;
  /** Own kernel (guest "custom"): a PVH ELF. */
  kernel?: string;
  initrd?: string;
  /** Kernel command line; for the probe guest its scenario and parameters. */
  append?: string;
  cpus: number;
  memoryMiB: number;
}

export const DEFAULTS = { cpus: 1, memoryMiB: 128, name: 'vm' } as const;
/** APIC IDs of xAPIC MADT entries stop at 254; the I/O APIC takes the next ID. */
export const MAX_CPUS = 254;
export const MAX_NAME_LENGTH = 64;
export const MAX_APPEND_LENGTH = 4095;

/** A user-caused configuration error: one line, names the field and what would work. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

function integer(value: unknown, field: string, min: number, max: number, hint = ''): number {
  const n = typeof value === 'string' && /^\s*-?\d+\s*$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n)) throw new ConfigError(`${field} must be a whole number, got ${JSON.stringify(value)}`);
  if (n < min || n > max) throw new ConfigError(`${field} must be between ${min} and ${max}, got ${n}${hint}`);
  return n;
}

function text(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string') throw new ConfigError(`${field} must be text, got ${typeof value}`);
  if (value.length > max) throw new ConfigError(`${field} is ${value.length} characters long; at most ${max} are allowed`);
  if (value.includes('\0')) throw new ConfigError(`${field} contains a NUL character`);
  return value;
}

/** Validates untrusted input (CLI, JSON, API) into a VmConfig; throws ConfigError. */
export function validateConfig(raw: unknown): VmConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError('a VM configuration must be an object');
  const r = raw as Record<string, unknown>;
  const known = new Set(['version', 'name', 'guest', 'kernel', 'initrd', 'append', 'cpus', 'memoryMiB']);
  for (const key of Object.keys(r)) if (!known.has(key)) throw new ConfigError(`unknown configuration field "${key.slice(0, 40)}"`);
  if (r.version !== undefined && r.version !== CONFIG_VERSION) {
    throw new ConfigError(`configuration version ${JSON.stringify(r.version)} is not supported (this Unhalt reads version ${CONFIG_VERSION})`);
  }
  const name = r.name === undefined ? DEFAULTS.name : text(r.name, 'name', MAX_NAME_LENGTH);
  if (!/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/.test(name)) {
    throw new ConfigError(`name "${name}" may use letters, digits, space, dot, dash and underscore, and must start with a letter or digit`);
  }
  const kernel = r.kernel === undefined ? undefined : text(r.kernel, 'kernel', 4096);
  const guest = r.guest === undefined ? (kernel ? 'custom' : 'probe') : r.guest;
  if (!GUESTS.includes(guest as GuestKind)) throw new ConfigError(`guest must be one of ${GUESTS.join(', ')}, got ${JSON.stringify(guest)}`);
  if (guest === 'custom' && !kernel) throw new ConfigError('a custom guest needs a kernel (--kernel FILE)');
  if (guest === 'probe' && kernel) throw new ConfigError('the probe guest brings its own kernel: drop --kernel, or use --guest custom');
  const config: VmConfig = {
    version: CONFIG_VERSION,
    name,
    guest: guest as GuestKind,
    cpus: r.cpus === undefined ? DEFAULTS.cpus : integer(r.cpus, 'cpus', 1, MAX_CPUS),
    memoryMiB: r.memoryMiB === undefined ? DEFAULTS.memoryMiB
      : integer(r.memoryMiB, 'memory (MiB)', MIN_MEMORY_MIB, 1024 * 1024),
  };
  if (kernel !== undefined) config.kernel = kernel;
  if (r.initrd !== undefined) config.initrd = text(r.initrd, 'initrd', 4096);
  if (r.append !== undefined) config.append = text(r.append, 'append', MAX_APPEND_LENGTH);
  return config;
}

export interface ResolveContext {
  hostKind: HostKind;
  hostMemoryBytes: number;
}

export function currentHost(): ResolveContext {
  return { hostKind: hostKind(), hostMemoryBytes: hostMemoryBytes() };
}

function checkFile(path: string, what: string): string {
  const full = resolve(path);
  if (!existsSync(full)) throw new ConfigError(`${what} not found: ${path}`);
  const st = statSync(full);
  if (!st.isFile()) throw new ConfigError(`${what} is not a regular file: ${path}`);
  if (st.size === 0) throw new ConfigError(`${what} is empty: ${path}`);
  return full;
}

/** Turns a validated config into what the VMM boots, checking it against the host. */
export function resolveMachine(config: VmConfig, host: ResolveContext = currentHost()): MachineSpec {
  const hostMiB = Math.floor(host.hostMemoryBytes / 1048576);
  if (config.memoryMiB > hostMiB) {
    throw new ConfigError(`memory ${config.memoryMiB} MiB is more than this host has (${hostMiB} MiB)`);
  }
  let kernelPath: string;
  if (config.guest === 'probe') {
    if (!existsSync(PROBE_KERNEL)) {
      throw new ConfigError(`the probe guest is not built (${PROBE_KERNEL}): run "npm run build:guests" (needs gcc)`);
    }
    kernelPath = PROBE_KERNEL;
  } else {
    kernelPath = checkFile(config.kernel!, 'kernel');
  }
  const initrdPath = config.initrd === undefined ? undefined : checkFile(config.initrd, 'initrd');
  let cmdline = config.append ?? '';
  if (config.guest === 'probe' && host.hostKind === 'pvm' && !/(^|\s)unhalt\.pvm=/.test(cmdline)) {
    cmdline = `${cmdline} unhalt.pvm=1`.trim(); // the probe guest avoids hypercalls, which hang on PVM
  }
  const spec: MachineSpec = { name: config.name, cpus: config.cpus, memoryMiB: config.memoryMiB, kernelPath, cmdline };
  if (initrdPath) spec.initrdPath = initrdPath;
  return spec;
}
