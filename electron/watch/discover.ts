// Discovery for `unhalt watch --list`: the QEMU processes running on this host, their QMP sockets
// and whether this user can watch each. Read from /proc only (command lines, /proc/net/unix):
// listing never connects to a socket, since a QMP socket serves one client and a connection,
// even a short one, would take the turn of whoever else uses it.
import { accessSync, constants, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';

/** A QMP server socket a QEMU command line asks for. */
export interface QmpEndpoint {
  /** The unix socket's path; absent where QEMU was handed an open fd (libvirt does that). */
  path?: string;
  /** How the command line made it: `-qmp unix:PATH,server=on` or a `-chardev socket` under `-mon mode=control`. */
  via: '-qmp' | '-mon';
  /** libvirt's own monitor (chardev `charmonitor`): libvirt stays connected to it. */
  libvirtMonitor: boolean;
}

/** What a QEMU command line says about watching it. Pure: from the argv alone. */
export interface QemuCommandLine {
  name?: string;
  /** `kvm`, `tcg`, or `kvm:tcg` style lists as given; `tcg` when none is given (QEMU's default). */
  accel: string;
  kvm: boolean;
  qmp: QmpEndpoint[];
  /** Set for a domain libvirt started: which daemon (from the paths libvirt gives its QEMUs). */
  libvirt?: { uri: 'qemu:///system' | 'qemu:///session' };
}

export interface QemuProcess extends QemuCommandLine {
  pid: number;
  /** The process's owner: who may open its sockets, usually. */
  uid: number;
}

export type WatchVerdict =
  | { watchable: true; target: string }
  | { watchable: false; why: string };

/** Is this argv[0] a QEMU system emulator (qemu-system-x86_64, qemu-kvm, a distribution's rename)? */
export function isQemuBinary(argv0: string): boolean {
  const b = basename(argv0);
  return b.startsWith('qemu-system-') || b === 'qemu-kvm';
}

/** The QMP sockets, accelerator and name a QEMU command line asks for. */
export function parseQemuCommandLine(argv: readonly string[]): QemuCommandLine {
  const opts: Array<[string, string]> = [];
  const flags = new Set<string>();
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('-')) continue;
    const opt = a.replace(/^--?/, '-');
    if (NO_VALUE.has(opt)) { flags.add(opt); continue; }
    if (i + 1 < argv.length) opts.push([opt, argv[++i]!]);
  }
  const chardevs = new Map<string, Record<string, string>>();
  for (const [opt, value] of opts) {
    if (opt !== '-chardev') continue;
    const { head, props } = keyval(value);
    if (head === 'socket' && props.id) chardevs.set(props.id, props);
  }
  const qmp: QmpEndpoint[] = [];
  let accel: string | undefined = flags.has('-enable-kvm') ? 'kvm' : undefined;
  let name: string | undefined;
  for (const [opt, value] of opts) {
    if (opt === '-qmp' || opt === '-qmp-pretty') {
      // -qmp unix:PATH,server=on,wait=off (older spelling: ,server,nowait); a client-mode socket is QEMU's to open, not ours.
      const { head, props } = keyval(value);
      if (head.startsWith('unix:') && isServer(props)) qmp.push({ path: head.slice(5), via: '-qmp', libvirtMonitor: false });
    } else if (opt === '-mon') {
      const { head, props } = keyval(value, 'chardev');
      const dev = chardevs.get(props.chardev ?? head);
      if (props.mode === 'control' && dev && isServer(dev)) {
        qmp.push({ ...(dev.path ? { path: dev.path } : {}), via: '-mon', libvirtMonitor: dev.id === 'charmonitor' });
      }
    } else if (opt === '-accel') {
      accel ??= keyval(value, 'accel').head;
    } else if (opt === '-machine' || opt === '-M') {
      const { props } = keyval(value, 'type');
      if (props.accel) accel ??= props.accel;
    } else if (opt === '-name') {
      const { head, props } = keyval(value, 'guest');
      name = props.guest ?? head;
    }
  }
  accel ??= 'tcg';
  const out: QemuCommandLine = { accel, kvm: accel.split(':')[0] === 'kvm', qmp };
  if (name) out.name = name;
  if (qmp.some((q) => q.libvirtMonitor)) {
    out.libvirt = { uri: argv.some((a) => a.includes('/var/lib/libvirt/') || a.includes('/run/libvirt/')) ? 'qemu:///system' : 'qemu:///session' };
  }
  return out;
}

/** QEMU's options that take no value (the ones that matter for skipping values right). */
const NO_VALUE = new Set(['-enable-kvm', '-nographic', '-nodefaults', '-no-user-config', '-no-reboot', '-no-shutdown', '-S', '-daemonize', '-snapshot', '-no-hpet', '-no-acpi', '-full-screen', '-only-migratable', '-version', '-help', '-h', '-preconfig']);

/**
 * QEMU's keyval syntax: `head,key=value,flag,...`, where `,,` is a literal comma. A first element
 * of the form key=value is the implied key's value only when it has no `=` (e.g. `-name foo`).
 */
function keyval(value: string, impliedKey?: string): { head: string; props: Record<string, string> } {
  const parts: string[] = [''];
  for (let i = 0; i < value.length; i++) {
    if (value[i] === ',' && value[i + 1] === ',') { parts[parts.length - 1] += ','; i++; }
    else if (value[i] === ',') parts.push('');
    else parts[parts.length - 1] += value[i];
  }
  const props: Record<string, string> = {};
  let head = '';
  parts.forEach((p, i) => {
    const eq = p.indexOf('=');
    if (i === 0 && (eq < 0 || p.startsWith('unix:') || p.startsWith('tcp:'))) { head = p; if (impliedKey) props[impliedKey] = p; return; }
    if (eq < 0) props[p.startsWith('no') ? p.slice(2) : p] = p.startsWith('no') ? 'off' : 'on';
    else props[p.slice(0, eq)] = p.slice(eq + 1);
  });
  return { head, props };
}

function isServer(props: Record<string, string>): boolean {
  return props.server === 'on' || props.server === 'true' || props.server === 'yes';
}

/** Every QEMU process whose command line this user can read, oldest first. */
export function listQemuProcesses(proc = '/proc'): QemuProcess[] {
  const out: QemuProcess[] = [];
  for (const entry of readdirSync(proc)) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    let uid: number;
    try {
      argv = readFileSync(`${proc}/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.at(-1) === '') argv.pop();
      uid = lstatSync(`${proc}/${entry}`).uid;
    } catch {
      continue; // it exited meanwhile, or hidepid keeps it from us
    }
    if (!argv.length || !isQemuBinary(argv[0]!)) continue;
    out.push({ pid: Number(entry), uid, ...parseQemuCommandLine(argv) });
  }
  return out.sort((a, b) => a.pid - b.pid);
}

/** How many sockets /proc/net/unix shows bound to each path: the listener, plus one per accepted client. */
export function unixSocketUsers(netUnix = '/proc/net/unix'): Map<string, number> {
  const counts = new Map<string, number>();
  let text: string;
  try { text = readFileSync(netUnix, 'utf8'); } catch { return counts; }
  for (const line of text.split('\n').slice(1)) {
    // Num RefCount Protocol Flags Type St Inode Path: the path is the 8th field and may hold spaces.
    const fields = line.trim().split(/\s+/);
    if (fields.length < 8) continue;
    const path = fields.slice(7).join(' ');
    counts.set(path, (counts.get(path) ?? 0) + 1);
  }
  return counts;
}

/** Whether this user can watch one QMP endpoint of a process, and if not, why and what to do. */
export function watchVerdict(p: QemuProcess, q: QmpEndpoint, users: ReadonlyMap<string, number>): WatchVerdict {
  if (q.libvirtMonitor) {
    return { watchable: false, why: `libvirt's own monitor (domain ${p.name ?? '?'} on ${p.libvirt?.uri ?? 'libvirt'}): libvirt holds it; give the domain a QMP socket of its own (docs/watch.md)` };
  }
  if (!q.path) return { watchable: false, why: 'a socket QEMU was handed open (fd=): it has no path to open' };
  if (!p.kvm) return { watchable: false, why: `QEMU runs with -accel ${p.accel}: its vCPUs have no KVM stats to watch` };
  const denied: WatchVerdict = { watchable: false, why: `permission denied: this user may not open the socket; run as uid ${p.uid} (QEMU's owner) or one it lets in` };
  try {
    if (!lstatSync(q.path).isSocket()) return { watchable: false, why: `${q.path} is no longer a socket` };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EACCES') return denied;
    return { watchable: false, why: `${q.path} is gone (removed, or in another mount namespace)` };
  }
  try {
    accessSync(q.path, constants.W_OK); // connecting to a unix socket takes write permission on it
  } catch {
    return denied;
  }
  // The listener plus one accepted connection: QEMU serves that client and keeps others waiting.
  if ((users.get(q.path) ?? 0) > 1) return { watchable: false, why: 'another client holds the socket now (QEMU serves one at a time): try again once it lets go' };
  return { watchable: true, target: `qmp:${q.path}` };
}
