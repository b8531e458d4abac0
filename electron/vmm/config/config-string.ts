// Bench config strings: `cpus=4,memory=512,machine=unhalt-1.0,cpu-pm=on,kvm-pv-unhalt=off,
// halt-poll-ns=0,pin=0+1`. Keys are the CLI long options without dashes; every paravirt feature
// is a key of its own; lists join with `+`.
import { FEATURE_NAMES } from '../machine/features.ts';
import { parseCpuList } from './knob-syntax.ts';
import { formatNetOption, parseNetOption } from './net-config.ts';
import { DEVICE_OPTIONS, formatDeviceOption, parseDeviceOption } from './device-config.ts';
import { ConfigError, DISK_OPTIONS, formatDiskOption, parseDiskOption, validateConfig, type VmConfig } from './vm-config.ts';

/** Keys that may appear more than once: each disk=, each forward, each device=, a disk's or device's own options. */
const REPEATABLE = new Set(['disk', 'hostfwd', 'readonly', 'snapshot', 'device', ...DEVICE_OPTIONS]);

const SIMPLE: Record<string, string> = {
  cpus: 'cpus', memory: 'memoryMiB', machine: 'machine', 'cpu-pm': 'cpuPm', 'mem-lock': 'memLock',
  'halt-poll-ns': 'haltPollNs', 'guest-halt-poll-ns': 'guestHaltPollNs', guest: 'guest', name: 'name', 'pvm-profile': 'pvmProfile', rng: 'rng',
};

/**
 * Every key a config string accepts: the one list the parser checks against, its message names
 * and the forms show as their hint (readonly= and snapshot= only right after a disk=FILE).
 */
export const CONFIG_STRING_KEYS: readonly string[] = [...Object.keys(SIMPLE), 'pin', 'net', 'hostfwd', 'disk', ...DISK_OPTIONS, 'device', ...DEVICE_OPTIONS, ...FEATURE_NAMES];
/** The keys besides the paravirt features: what a refusal lists in full, as the forms' hint does. */
export const KNOB_KEYS: readonly string[] = CONFIG_STRING_KEYS.filter((k) => !FEATURE_NAMES.includes(k));

/**
 * The valid keys a refusal names: the paravirt features for a mistyped one (they all start with
 * kvm), else the other keys and where the features are listed (all of them would not fit a line).
 */
function validKeysText(unknown: readonly string[]): string {
  return unknown.every((k) => k.startsWith('kvm'))
    ? `valid paravirt features: ${FEATURE_NAMES.join(', ')}`
    : `valid: ${KNOB_KEYS.join(', ')}, and the paravirt features (kvm-pv-unhalt=on, ...: unhalt machines lists them)`;
}

/** The keys of a config string that are none of CONFIG_STRING_KEYS, each once, in the order written. */
export function unknownConfigKeys(spec: string): string[] {
  const unknown: string[] = [];
  for (const part of spec.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const key = part.slice(0, eq).trim();
    if (!CONFIG_STRING_KEYS.includes(key) && !unknown.includes(key)) unknown.push(key);
  }
  return unknown;
}

/** `unknown key "a"`, `unknown keys "a", "b", "c"`; past five, the rest are counted (a message never echoes a whole input back). */
function unknownKeysText(unknown: string[]): string {
  const named = unknown.slice(0, 5).map((k) => `"${k.length > 40 ? `${k.slice(0, 40)}…` : k}"`).join(', ');
  const more = unknown.length > 5 ? ` and ${unknown.length - 5} more` : '';
  return `unknown key${unknown.length > 1 ? 's' : ''} ${named}${more}`;
}

/** Parses a config string on top of `base` (raw fields, e.g. the guest), validating the result. */
export function parseConfigString(spec: string, base: Record<string, unknown> = {}): VmConfig {
  if (spec.length > 4096) throw new ConfigError('config string is too long');
  // Every unknown key at once (a typo rarely comes alone), before any value is judged.
  const unknown = unknownConfigKeys(spec);
  if (unknown.length) throw new ConfigError(`config string: ${unknownKeysText(unknown)}; ${validKeysText(unknown)}`);
  const raw: Record<string, unknown> = { ...base };
  const features: Record<string, unknown> = { ...(base.cpuFeatures as Record<string, unknown> | undefined) };
  // `net=user,hostfwd=...,hostfwd=...`: the same text as `--net`, its parts being keys here too.
  let net: string | undefined;
  const hostfwd: string[] = [];
  // disk=FILE, repeatable; readonly= and snapshot= right after it are that disk's (as in --disk
  // FILE,readonly=on,snapshot=on): parsed as that text, so both surfaces keep one reading.
  const disks: string[] = [];
  let inDisk = false;
  // device=NAME, likewise with iobase= and iosize= right after it (as --device NAME,iobase=N,iosize=N).
  const devices: string[] = [];
  let inDevice = false;
  // A key given twice is refused, as the CLI refuses a repeated option (the last one silently
  // winning hides a typo); disk=, hostfwd= and a disk's own options repeat by design.
  const given = new Map<string, string>();
  for (const part of spec.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) throw new ConfigError(`config string: "${part.slice(0, 40)}" is not key=value`);
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (!REPEATABLE.has(key)) {
      const before = given.get(key);
      if (before !== undefined) throw new ConfigError(`config string: ${key}= is given twice (${before.slice(0, 20)} and ${value.slice(0, 20)}): give it once`);
      given.set(key, value);
    }
    const afterDisk: boolean = inDisk;
    inDisk = key === 'disk' || ((DISK_OPTIONS as readonly string[]).includes(key) && afterDisk);
    const afterDevice: boolean = inDevice;
    inDevice = key === 'device' || ((DEVICE_OPTIONS as readonly string[]).includes(key) && afterDevice);
    if (key === 'pin') raw.pin = parseCpuList(value);
    else if (key === 'net') net = value;
    else if (key === 'hostfwd') hostfwd.push(`hostfwd=${value}`);
    else if (key === 'disk') disks.push(value);
    else if ((DISK_OPTIONS as readonly string[]).includes(key)) {
      if (!afterDisk) throw new ConfigError(`config string: ${key}= belongs right after a disk=FILE`);
      disks[disks.length - 1] += `,${key}=${value}`;
    } else if (key === 'device') devices.push(value);
    else if ((DEVICE_OPTIONS as readonly string[]).includes(key)) {
      if (!afterDevice) throw new ConfigError(`config string: ${key}= belongs right after a device=NAME`);
      devices[devices.length - 1] += `,${key}=${value}`;
    } else if (key in SIMPLE) raw[SIMPLE[key]!] = value;
    else if (FEATURE_NAMES.includes(key)) features[key] = value;
    else throw new ConfigError(`config string: unknown key "${key.slice(0, 40)}"`); // unknownConfigKeys has refused it
  }
  if (Object.keys(features).length) raw.cpuFeatures = features;
  if (hostfwd.length && net !== 'user') throw new ConfigError('config string: hostfwd= needs net=user before it');
  if (net !== undefined) raw.net = parseNetOption([net, ...hostfwd].join(','));
  if (disks.length) raw.disks = disks.map(parseDiskOption);
  if (devices.length) raw.devices = devices.map(parseDeviceOption);
  return validateConfig(raw);
}

/**
 * `base` with `extra`'s keys in place of its own (a knob changed, not given twice): the parts of
 * `base` whose key `extra` sets are dropped, then `extra` follows. Disks and forwards add up.
 */
export function withKnobs(base: string, extra: string): string {
  const keyOf = (part: string) => part.slice(0, Math.max(0, part.indexOf('='))).trim();
  const changed = new Set(extra.split(',').map(keyOf).filter((k) => k && !REPEATABLE.has(k)));
  const kept = base.split(',').filter((p) => p.trim() !== '' && !changed.has(keyOf(p)));
  return [...kept, ...extra.split(',').filter((p) => p.trim() !== '')].join(',');
}

/** The config string for the knobs of a config (the guest's kernel, initrd and append are not knobs). */
export function formatConfigString(c: VmConfig): string {
  const parts = [`cpus=${c.cpus}`, `memory=${c.memoryMiB}`, `machine=${c.machine}`];
  if (c.cpuPm) parts.push('cpu-pm=on');
  if (c.memLock) parts.push('mem-lock=on');
  if (c.haltPollNs !== undefined) parts.push(`halt-poll-ns=${c.haltPollNs}`);
  if (c.guestHaltPollNs !== undefined) parts.push(`guest-halt-poll-ns=${c.guestHaltPollNs}`);
  if (c.pin) parts.push(`pin=${c.pin.join('+')}`);
  if (!c.pvmProfile) parts.push('pvm-profile=off');
  if (c.rng) parts.push('rng=on');
  if (c.net) parts.push(`net=${formatNetOption(c.net)}`);
  for (const d of c.disks ?? []) parts.push(`disk=${formatDiskOption(d)}`);
  for (const d of c.devices ?? []) parts.push(`device=${formatDeviceOption(d)}`);
  for (const [k, v] of Object.entries(c.cpuFeatures)) parts.push(`${k}=${v ? 'on' : 'off'}`);
  return parts.join(',');
}
