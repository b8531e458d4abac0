// The network of a VM: its schema, the one syntax every text surface uses
// (`--net user,hostfwd=tcp:127.0.0.1:8080-:80,hostfwd=udp::5353-:53` or `--net tap=NAME`, the
// same text in config strings) and the rule a saved or API value must pass. Pure (the renderer
// imports it through vm-config.ts): whether a port is free or libslirp is installed is the
// VMM's check at start (devices/virtio/net-preflight.ts).
import { ConfigError } from './config-error.ts';

export interface HostForward {
  protocol: 'tcp' | 'udp';
  /** Host address the forward listens on (IPv4, dotted); an empty one in the text means 127.0.0.1. */
  hostAddress: string;
  hostPort: number;
  /** Guest address (in the user network); the text's empty one means the first DHCP address. */
  guestAddress: string;
  guestPort: number;
}

export type NetConfig =
  | { mode: 'user'; hostfwd: HostForward[] }
  | { mode: 'tap'; tap: string };

/** The user network (libslirp's, QEMU's defaults): the guest gets DHCP_START, the host is GATEWAY. */
export const USER_NET = Object.freeze({
  network: '10.0.2.0', netmask: '255.255.255.0', gateway: '10.0.2.2', nameserver: '10.0.2.3', dhcpStart: '10.0.2.15',
});
export const MAX_HOSTFWD = 64;
/** Linux interface names: IFNAMSIZ 16 with the terminating NUL. */
export const MAX_TAP_NAME = 15;
/** The host address of a forward whose text leaves it empty (QEMU's would be every interface). */
export const DEFAULT_HOST_ADDRESS = '127.0.0.1';

const HOSTFWD_SYNTAX = 'hostfwd=[tcp|udp]:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT, e.g. hostfwd=tcp:127.0.0.1:8080-:80';

/** Parses the text of `--net` (and a config string's `net=` with its `hostfwd=` parts). */
export function parseNetOption(text: string): NetConfig {
  const parts = text.split(',').map((p) => p.trim());
  const head = parts[0] ?? '';
  if (head.startsWith('tap=') || head === 'tap') {
    if (parts.length > 1) throw new ConfigError(`--net tap takes no other options, got "${parts.slice(1).join(',').slice(0, 40)}"`);
    return checkNet({ mode: 'tap', tap: head.slice(4) });
  }
  if (head !== 'user') throw new ConfigError(`--net must be user[,hostfwd=...] or tap=NAME, got "${text.slice(0, 40)}"`);
  const hostfwd = parts.slice(1).filter((p) => p !== '').map((p) => {
    if (!p.startsWith('hostfwd=')) throw new ConfigError(`--net user: unknown option "${p.slice(0, 40)}"; the one option is ${HOSTFWD_SYNTAX}`);
    return parseHostForward(p.slice('hostfwd='.length));
  });
  return checkNet({ mode: 'user', hostfwd });
}

/** `[tcp|udp]:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT` (QEMU's hostfwd syntax). */
export function parseHostForward(text: string): HostForward {
  // As QEMU reads it: three fields before the dash, the protocol's possibly empty (tcp).
  const m = /^(tcp|udp|):([^:-]*):([^:-]*)-([^:-]*):([^:-]*)$/.exec(text);
  const bad = (why: string) => new ConfigError(`hostfwd "${text.slice(0, 60)}" ${why}; the syntax is ${HOSTFWD_SYNTAX}`);
  if (!m) throw bad('is malformed');
  const [, protocol, hostAddress, hostPort, guestAddress, guestPort] = m;
  return checkHostForward({
    protocol: protocol || 'tcp',
    hostAddress: hostAddress === '' ? DEFAULT_HOST_ADDRESS : hostAddress,
    hostPort: port(hostPort!, () => bad(`has a bad host port "${hostPort!.slice(0, 10)}" (give 1 to 65535)`)),
    guestAddress: guestAddress === '' ? USER_NET.dhcpStart : guestAddress,
    guestPort: port(guestPort!, () => bad(`has a bad guest port "${guestPort!.slice(0, 10)}" (give 1 to 65535)`)),
  }, text);
}

export function formatHostForward(f: HostForward): string {
  return `${f.protocol}:${f.hostAddress}:${f.hostPort}-${f.guestAddress === USER_NET.dhcpStart ? '' : f.guestAddress}:${f.guestPort}`;
}

/** The `--net` text for a network (parseNetOption's inverse). */
export function formatNetOption(n: NetConfig): string {
  return n.mode === 'tap' ? `tap=${n.tap}` : ['user', ...n.hostfwd.map((f) => `hostfwd=${formatHostForward(f)}`)].join(',');
}

/** The rule a network must pass, from any surface (JSON of the library or the API, or parsed text). */
export function checkNet(raw: unknown): NetConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError('net must be an object: { mode: "user", hostfwd: [...] } or { mode: "tap", tap: NAME }');
  const r = raw as Record<string, unknown>;
  if (r.mode === 'tap') {
    for (const k of Object.keys(r)) if (k !== 'mode' && k !== 'tap') throw new ConfigError(`net: unknown field "${k.slice(0, 40)}" for a tap`);
    return { mode: 'tap', tap: checkTapName(r.tap) };
  }
  if (r.mode !== 'user') throw new ConfigError(`net mode must be user or tap, got ${JSON.stringify(r.mode)?.slice(0, 40)}`);
  for (const k of Object.keys(r)) if (k !== 'mode' && k !== 'hostfwd') throw new ConfigError(`net: unknown field "${k.slice(0, 40)}" for user networking`);
  const list = r.hostfwd ?? [];
  if (!Array.isArray(list)) throw new ConfigError('net hostfwd must be a list of forwards');
  if (list.length > MAX_HOSTFWD) throw new ConfigError(`net has ${list.length} host forwards; at most ${MAX_HOSTFWD} are allowed`);
  const hostfwd = list.map((f) => checkHostForward(f));
  const seen = new Set<string>();
  for (const f of hostfwd) {
    const key = `${f.protocol}:${f.hostAddress}:${f.hostPort}`;
    if (seen.has(key)) throw new ConfigError(`host port ${f.protocol} ${f.hostAddress}:${f.hostPort} is forwarded twice`);
    seen.add(key);
  }
  return { mode: 'user', hostfwd };
}

function checkHostForward(raw: unknown, text?: string): HostForward {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError('a host forward must be an object { protocol, hostAddress, hostPort, guestAddress, guestPort }');
  const r = raw as Record<string, unknown>;
  const what = text !== undefined ? `hostfwd "${text.slice(0, 60)}"` : 'a host forward';
  for (const k of Object.keys(r)) if (!['protocol', 'hostAddress', 'hostPort', 'guestAddress', 'guestPort'].includes(k)) throw new ConfigError(`${what}: unknown field "${k.slice(0, 40)}"`);
  // In this order, so a forward with several bad fields is refused for the same one as ever.
  const protocol = checkForwardProtocol(r.protocol, what);
  const hostAddress = checkForwardHostAddress(r.hostAddress, what);
  const guestAddress = checkForwardGuestAddress(r.guestAddress, what);
  return { protocol, hostAddress, hostPort: checkForwardPort(r.hostPort, 'host', what), guestAddress, guestPort: checkForwardPort(r.guestPort, 'guest', what) };
}

// A host forward's field rules, one field each (the wizard judges each of its fields by these as
// it is left; `what` names the forward in the message).
export function checkForwardProtocol(v: unknown, what = 'a host forward'): 'tcp' | 'udp' {
  if (v !== 'tcp' && v !== 'udp') throw new ConfigError(`${what}: the protocol must be tcp or udp, got ${JSON.stringify(v)?.slice(0, 20)}`);
  return v;
}

export function checkForwardHostAddress(v: unknown, what = 'a host forward'): string {
  const a = ipv4(v);
  if (a === undefined) throw new ConfigError(`${what}: the host address must be an IPv4 address such as 127.0.0.1, got ${JSON.stringify(v)?.slice(0, 40)}`);
  return a;
}

export function checkForwardGuestAddress(v: unknown, what = 'a host forward'): string {
  const a = ipv4(v);
  if (a === undefined || !inUserNetwork(a) || a === USER_NET.gateway || a === USER_NET.nameserver) {
    throw new ConfigError(`${what}: the guest address must be a guest's address in ${USER_NET.network}/24 (by default ${USER_NET.dhcpStart}), got ${JSON.stringify(v)?.slice(0, 40)}`);
  }
  return a;
}

export function checkForwardPort(v: unknown, which: 'host' | 'guest', what = 'a host forward'): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 65535) throw new ConfigError(`${what}: the ${which} port must be 1 to 65535, got ${JSON.stringify(v)?.slice(0, 20)}`);
  return v;
}

/** The rule for a tap's name (an existing interface's: whether it is there is the start's check). */
export function checkTapName(tap: unknown): string {
  if (typeof tap !== 'string' || tap === '') throw new ConfigError('net tap needs the name of a tap interface (tap=NAME)');
  if (tap.length > MAX_TAP_NAME || !/^[A-Za-z0-9_.-]+$/.test(tap) || tap === '.' || tap === '..') {
    throw new ConfigError(`tap "${tap.slice(0, 40)}" is not an interface name (at most ${MAX_TAP_NAME} letters, digits, dot, dash or underscore)`);
  }
  return tap;
}

/**
 * The MAC of a VM's network card: locally administered and unicast (first byte xxxxxx10), the
 * same for the same VM name on every run and in every export, different for different names
 * (two mixed FNV-1a hashes of the name; no crypto needed, the renderer may call it too).
 */
export function macForVm(name: string): string {
  const bytes = new TextEncoder().encode(name);
  const fnv = (seed: number) => {
    let h = seed >>> 0;
    for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
    // A final mix (MurmurHash3's), so names that differ in one character differ in every byte.
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return (h ^ (h >>> 16)) >>> 0;
  };
  const a = fnv(0x811c9dc5);
  const b = fnv(0x050c5d1f);
  const m = [(a >>> 24) & 0xfc | 0x02, (a >>> 16) & 0xff, (a >>> 8) & 0xff, a & 0xff, (b >>> 24) & 0xff, (b >>> 16) & 0xff];
  return m.map((x) => x.toString(16).padStart(2, '0')).join(':');
}

function port(text: string, bad: () => ConfigError): number {
  if (!/^\d{1,5}$/.test(text)) throw bad();
  const n = Number(text);
  if (n < 1 || n > 65535) throw bad();
  return n;
}

/** A dotted IPv4 address in its canonical form (no leading zeros), or undefined. */
function ipv4(v: unknown): string | undefined {
  if (typeof v !== 'string' || !/^\d{1,3}(\.\d{1,3}){3}$/.test(v)) return undefined;
  const p = v.split('.').map(Number);
  if (p.some((x) => x > 255)) return undefined;
  return p.join('.');
}

function inUserNetwork(a: string): boolean {
  const p = a.split('.');
  const last = Number(p[3]);
  return `${p[0]}.${p[1]}.${p[2]}.0` === USER_NET.network && last > 0 && last < 255;
}
