// The facts kvm-cause.ts classifies, read from this host: the device, /sys, /proc, /etc/group and
// the kernel log (readKvmFacts; tests point it at a fake tree and a device path of their own).
import { closeSync, constants, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_KVM_DEVICE, kvmDevicePath } from '../../native/kvm/kvm.ts';
import { KVM_MODULES, classifyKvmAccess, describeKvmAccess, type KvmAccess, type KvmFacts } from './kvm-cause.ts';

export { classifyKvmAccess, describeKvmAccess, type KvmAccess, type KvmCause, type KvmFacts } from './kvm-cause.ts';

export interface KvmFactsSources {
  device?: string;
  override?: boolean;
  /** Roots of sysfs and procfs ('/sys', '/proc'): tests point them at a fake tree. */
  sysRoot?: string;
  procRoot?: string;
  /** The file that names group ids (/etc/group). */
  groupFile?: string;
  /** The kernel log, or undefined to read /dev/kmsg (tests give the text). */
  kernelLog?: string;
  /** Files whose existence means a container (/.dockerenv, /run/.containerenv). */
  rootDir?: string;
}

function read(path: string): string | undefined {
  try { return readFileSync(path, 'utf8'); } catch { return undefined; }
}

/** A group's name and members (/etc/group), by gid. */
function groupOf(gid: number, groupFile: string): { name: string; members: string[] } {
  for (const line of (read(groupFile) ?? '').split('\n')) {
    const [name, , id, members] = line.split(':');
    if (name && Number(id) === gid) return { name, members: (members ?? '').split(',').map((m) => m.trim()).filter(Boolean) };
  }
  return { name: String(gid), members: [] };
}

/** The kernel log, without waiting (/dev/kmsg, non-blocking; unreadable for most users: undefined). */
function readKernelLog(): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync('/dev/kmsg', constants.O_RDONLY | constants.O_NONBLOCK);
    const buf = Buffer.alloc(8192);
    const lines: string[] = [];
    for (let i = 0; i < 20000; i++) {
      let n: number;
      try { n = readSync(fd, buf, 0, buf.length, null); } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EPIPE') continue; // overwritten records: go on
        break; // EAGAIN: the end
      }
      if (n <= 0) break;
      lines.push(buf.toString('utf8', 0, n));
    }
    return lines.join('');
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function containerKind(rootDir: string, procRoot: string): string | undefined {
  if (existsSync(join(rootDir, '.dockerenv'))) return 'docker';
  if (existsSync(join(rootDir, 'run/.containerenv'))) return 'podman';
  const cgroup = read(join(procRoot, '1/cgroup')) ?? '';
  if (/kubepods/.test(cgroup)) return 'kubernetes';
  if (/\/docker[/-]/.test(cgroup)) return 'docker';
  if (/\/lxc[/.]/.test(cgroup)) return 'lxc';
  return undefined;
}

/** The facts, read from this host (or from the roots given). */
export function readKvmFacts(src: KvmFactsSources = {}): KvmFacts {
  const device = src.device ?? kvmDevicePath();
  const override = src.override ?? (src.device === undefined && !!process.env.UNHALT_KVM_DEVICE && process.env.UNHALT_KVM_DEVICE !== DEFAULT_KVM_DEVICE);
  const sys = src.sysRoot ?? '/sys';
  const proc = src.procRoot ?? '/proc';
  let open = 'ok';
  try {
    closeSync(openSync(device, constants.O_RDWR));
  } catch (e) {
    open = (e as NodeJS.ErrnoException).code ?? 'EIO';
  }
  let nodeKind: KvmFacts['nodeKind'] = 'missing';
  let nodeGroup: string | undefined;
  let nodeMode: number | undefined;
  let groupNotActive = false;
  let user = 'you';
  try { user = userInfo().username; } catch { /* no passwd entry */ }
  try {
    const st = statSync(device);
    nodeKind = st.isCharacterDevice() ? 'char' : st.isDirectory() ? 'dir' : 'file';
    const group = groupOf(st.gid, src.groupFile ?? '/etc/group');
    nodeGroup = group.name;
    nodeMode = st.mode & 0o7777;
    groupNotActive = group.members.includes(user) && !(process.getgroups?.() ?? []).includes(st.gid) && process.getgid?.() !== st.gid;
  } catch { /* missing, or a parent not searchable */ }
  const facts: KvmFacts = {
    device, override, defaultDevice: DEFAULT_KVM_DEVICE, open, nodeKind,
    ...(nodeGroup !== undefined ? { nodeGroup, nodeMode, ...(groupNotActive ? { groupNotActive } : {}) } : {}),
    user, uid: process.getuid?.() ?? -1, modules: [], cpuFlags: { vmx: false, svm: false, hypervisor: false },
  };
  if (open === 'ok') return facts;
  facts.modules = KVM_MODULES.filter((m) => existsSync(join(sys, 'module', m)));
  const registered = read(join(sys, 'class/misc/kvm/dev'))?.trim();
  if (registered) facts.registered = registered;
  const flags = /^flags\s*:\s*(.*)$/m.exec(read(process.env.UNHALT_CPUINFO_PATH ?? join(proc, 'cpuinfo')) ?? '')?.[1]?.split(/\s+/) ?? [];
  facts.cpuFlags = { vmx: flags.includes('vmx'), svm: flags.includes('svm'), hypervisor: flags.includes('hypervisor') };
  const log = src.kernelLog ?? (src.sysRoot === undefined ? readKernelLog() : undefined);
  if (log !== undefined) facts.pvmGuest = /Hypervisor detected: PVM|running under PVM/.test(log);
  const container = containerKind(src.rootDir ?? '/', proc);
  if (container) facts.container = container;
  return facts;
}

/** This host's verdict (the one call doctor, the service and starts make). */
export function kvmAccess(src: KvmFactsSources = {}): KvmAccess {
  return classifyKvmAccess(readKvmFacts(src));
}

/** Thrown where KVM is needed but cannot be opened: its message names the cause and the fix. */
export class KvmUnavailableError extends Error {
  override name = 'KvmUnavailableError';
  readonly access: KvmAccess;
  constructor(access: KvmAccess) {
    super(describeKvmAccess(access));
    this.access = access;
  }
}
