// Discovery for `unhalt watch --list`: the QEMU processes running on this host, their QMP sockets
// and whether this user can watch each. Read from /proc only (command lines, /proc/net/unix):
// listing never connects to a socket, since a QMP socket serves one client and a connection,
// even a short one, would take the turn of whoever else uses it.
import { accessSync, constants, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename, isAbsolute, resolve as resolvePath } from 'node:path';

/** A QMP server socket a QEMU command line asks for. */
export interface QmpEndpoint {
  /**
   * The unix socket's path, absolute where the listing could resolve a relative one against
   * QEMU's working directory; absent where QEMU was handed an open fd (libvirt does that).
   */
  path?: string;
  /** The path as QEMU bound it (relative ones as given): how /proc/net/unix shows it. */
  boundAs?: string;
  /** An abstract socket (`abstract=on`): a name, not a file. */
  abstract?: boolean;
  /** How the command line made it: `-qmp unix:PATH,server=on` or a `-chardev socket` under `-mon mode=control`. */
  via: '-qmp' | '-mon';
  /** libvirt's own monitor (chardev `charmonitor`): libvirt stays connected to it. */
  libvirtMonitor: boolean;
}

/** What a QEMU command line says about watching it. Pure: from the argv alone. */
export interface QemuCommandLine {
  name?: string;
  /**
   * The accelerators in the order QEMU tries them (`kvm`, `tcg`, `kvm:tcg`): the first -accel,
   * -enable-kvm or -machine accel= given, else QEMU's default (kvm:tcg for a binary named *kvm).
   */
  accel: string;
  /** KVM is the first QEMU tries: its vCPUs have KVM stats unless KVM failed and it fell back. */
  kvm: boolean;
  qmp: QmpEndpoint[];
  /** Set for a domain libvirt started: which daemon (from the paths libvirt gives its QEMUs). */
  libvirt?: { uri: 'qemu:///system' | 'qemu:///session' };
}

export interface QemuProcess extends QemuCommandLine {
  pid: number;
  /** The process's effective uid (/proc/PID/status). */
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
  // Options in order, each with its value (undefined for those that take none).
  const opts: Array<[string, string | undefined]> = [];
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('-')) continue;
    const opt = a.replace(/^--?/, '-');
    opts.push([opt, NO_VALUE.has(opt) || i + 1 >= argv.length ? undefined : argv[++i]!]);
  }
  const chardevs = new Map<string, Record<string, string>>();
  for (const [opt, value] of opts) {
    if (opt !== '-chardev' || value === undefined) continue;
    const { head, props } = keyval(value);
    if (head === 'socket' && props.id) chardevs.set(props.id, props);
  }
  const qmp: QmpEndpoint[] = [];
  const fromChardev = (dev: Record<string, string> | undefined, via: QmpEndpoint['via']) => {
    // A TCP socket (host=, port=) is not one `unhalt watch` opens: only a path, or libvirt's fd.
    if (!dev || !isServer(dev) || (!dev.path && dev.fd === undefined)) return;
    qmp.push({ ...endpointPath(dev.path, dev), via, libvirtMonitor: dev.id === 'charmonitor' });
  };
  let accel: string | undefined;
  let name: string | undefined;
  for (const [opt, value] of opts) {
    if (opt === '-enable-kvm') accel ??= 'kvm';
    if (value === undefined) continue;
    if (opt === '-qmp' || opt === '-qmp-pretty') {
      // -qmp unix:PATH,server=on,wait=off (older: ,server,nowait) or -qmp chardev:ID; a client-mode
      // socket is QEMU's to open, not ours, and a TCP one is not watched.
      const { head, props } = keyval(value);
      if (head.startsWith('unix:') && isServer(props)) qmp.push({ ...endpointPath(head.slice(5), props), via: '-qmp', libvirtMonitor: false });
      else if (head.startsWith('chardev:')) fromChardev(chardevs.get(head.slice(8)), '-qmp');
    } else if (opt === '-mon') {
      const { props } = keyval(value, 'chardev');
      if (props.mode === 'control') fromChardev(chardevs.get(props.chardev!), '-mon');
    } else if (opt === '-accel') {
      accel ??= keyval(value, 'accel').props.accel;
    } else if (opt === '-machine' || opt === '-M') {
      const { props } = keyval(value, 'type');
      if (props.accel) accel ??= props.accel;
    } else if (opt === '-name') {
      name = keyval(value, 'guest').props.guest;
    }
  }
  // QEMU's own default: KVM first for a binary named *kvm (RHEL's qemu-kvm has no TCG at all).
  accel ||= basename(argv[0] ?? '').endsWith('kvm') ? 'kvm:tcg' : 'tcg';
  const out: QemuCommandLine = { accel, kvm: accel.split(':')[0] === 'kvm', qmp };
  if (name) out.name = name;
  if (qmp.some((q) => q.libvirtMonitor)) {
    out.libvirt = { uri: argv.some((a) => a.includes('/var/lib/libvirt/') || a.includes('/run/libvirt/')) ? 'qemu:///system' : 'qemu:///session' };
  }
  return out;
}

function endpointPath(path: string | undefined, props: Record<string, string>): Pick<QmpEndpoint, 'path' | 'boundAs' | 'abstract'> {
  if (!path) return {};
  return { path, boundAs: path, ...(props.abstract === 'on' ? { abstract: true } : {}) };
}

/**
 * QEMU's options that take no value (qemu-options.hx: those without HAS_ARG, across recent
 * versions): one missing here would take the next option as its value.
 */
const NO_VALUE = new Set([
  '-h', '-help', '-version', '-S', '-s', '-snapshot', '-nographic', '-nodefaults', '-no-user-config', '-nodefconfig',
  '-no-reboot', '-no-shutdown', '-daemonize', '-enable-kvm', '-no-kvm', '-no-hpet', '-no-acpi', '-full-screen',
  '-only-migratable', '-preconfig', '-usb', '-no-fd-bootchk', '-win2k-hack', '-alt-grab', '-ctrl-grab', '-no-quit',
  '-no-frame', '-sdl', '-curses', '-portrait', '-singlestep', '-enable-sync-profile', '-xen-attach', '-old-param',
  '-semihosting', '-enable-fips', '-no-kvm-irqchip', '-no-kvm-pit', '-no-kvm-pit-reinjection', '-rtc-td-hack',
  '-audio-help', '-perfmap', '-jitdump', '-no-graphic', '-watchdog-action-help',
]);

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
      if (!argv.length || !isQemuBinary(argv[0]!)) continue;
      // The effective uid: /proc/PID itself is root's for a process that is not dumpable (-runas).
      uid = Number(/^Uid:\s+\d+\s+(\d+)/m.exec(readFileSync(`${proc}/${entry}/status`, 'utf8'))?.[1] ?? NaN);
    } catch {
      continue; // it exited meanwhile, or hidepid keeps it from us
    }
    const cl = parseQemuCommandLine(argv);
    for (const q of cl.qmp) {
      // A relative path is QEMU's working directory's; unknown (not ours to read): left as given.
      if (q.path && !q.abstract && !isAbsolute(q.path)) {
        try { q.path = resolvePath(readlinkSync(`${proc}/${entry}/cwd`), q.path); } catch { /* left relative */ }
      }
    }
    out.push({ pid: Number(entry), uid, ...cl });
  }
  return out.sort((a, b) => a.pid - b.pid);
}

/**
 * How many sockets /proc/net/unix shows bound to each path (`@name` for an abstract one): the
 * listener, plus one per accepted client.
 */
export function unixSocketUsers(netUnix = '/proc/net/unix'): Map<string, number> {
  const counts = new Map<string, number>();
  let text: string;
  try { text = readFileSync(netUnix, 'utf8'); } catch { return counts; }
  for (const line of text.split('\n').slice(1)) {
    // Num RefCount Protocol Flags Type St Inode Path: the path is the rest, spaces and all.
    const m = /^\s*\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+ (.+)$/.exec(line);
    if (m) counts.set(m[1]!, (counts.get(m[1]!) ?? 0) + 1);
  }
  return counts;
}

/** Whether this user can watch one QMP endpoint of a process, and if not, why and what to do. */
export function watchVerdict(p: QemuProcess, q: QmpEndpoint, users: ReadonlyMap<string, number>): WatchVerdict {
  if (q.libvirtMonitor) {
    return { watchable: false, why: `libvirt's own monitor (domain ${p.name ?? '?'} on ${p.libvirt?.uri ?? 'libvirt'}): libvirt holds it; give the domain a QMP socket of its own (docs/watch.md)` };
  }
  if (!q.path) return { watchable: false, why: 'a socket QEMU was handed open (fd=): it has no path to open' };
  if (q.abstract) return { watchable: false, why: `an abstract socket (@${q.path}): unhalt watch opens a socket file; give QEMU -qmp unix:PATH,server=on,wait=off` };
  if (!p.kvm) return { watchable: false, why: `QEMU runs with -accel ${p.accel}: its vCPUs have no KVM stats to watch` };
  if (!isAbsolute(q.path)) return { watchable: false, why: `${q.path} is relative to QEMU's working directory, which this user may not read: give QEMU an absolute path` };
  const denied = (owner: number) => ({ watchable: false, why: `permission denied: this user may not open the socket; run as uid ${owner} (its owner) or one it lets in` }) as const;
  let owner: number;
  try {
    const st = lstatSync(q.path);
    if (!st.isSocket()) return { watchable: false, why: `${q.path} is no longer a socket` };
    owner = st.uid;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EACCES') return denied(p.uid);
    return { watchable: false, why: `${q.path} is gone (removed, or in another mount namespace)` };
  }
  try {
    accessSync(q.path, constants.W_OK); // connecting to a unix socket takes write permission on it
  } catch {
    return denied(owner);
  }
  // The listener plus one accepted connection: QEMU serves that client and keeps others waiting.
  if ((users.get(q.boundAs ?? q.path) ?? 0) > 1) return { watchable: false, why: 'another client holds the socket now (QEMU serves one at a time): try again once it lets go' };
  return { watchable: true, target: `qmp:${q.path}` };
}
