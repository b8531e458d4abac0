// One owner per UNHALT_HOME (docs/architecture.md, "Processes"): the process that owns the VM library and runs
// its VMs (the Electron app's service, `unhalt serve`) holds an flock(2) on UNHALT_HOME/owner.lock
// for its whole life. The kernel drops an flock when its process dies, however it dies (SIGKILL
// included), so there is never a stale owner to judge — unlike vms.json.lock (file-lock.ts), which
// is held for the milliseconds of one write. The file says who holds it (pid, command, start time,
// the host-mode address once there is one) so a second process can name the owner when refused.
// The file is never removed: unlinking a lock file lets a late opener lock the old inode while a
// newcomer locks a new one, and both would own the home.
import { closeSync, constants, ftruncateSync, readlinkSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { NotRegularFileError, openRegularFile } from './home-file.ts';
import { EAGAIN, LOCK_EX, LOCK_NB, errno, libc, describeErrno } from '../../native/kvm/libc.ts';

export interface HomeOwner {
  pid: number;
  command: string;
  startedAt: string;
  /** Host mode's origin (never the token), once the server listens. */
  address?: string;
  /** Its PID namespace ("pid:[4026531836]"): a pid means nothing from another one (a container). */
  pidNs?: string;
}

/** This process's PID namespace, as /proc names it (undefined where /proc cannot say). */
export function ownPidNamespace(): string | undefined {
  try { return readlinkSync('/proc/self/ns/pid'); } catch { return undefined; }
}

/** Another live process owns this UNHALT_HOME. */
export class HomeBusyError extends Error {
  override name = 'HomeBusyError';
  readonly owner: HomeOwner | undefined;

  constructor(home: string, owner: HomeOwner | undefined) {
    super(`${home} is in use by another Unhalt process (${describeOwner(owner)}): one process owns the VMs of an UNHALT_HOME. `
      + `Use that one${owner?.address ? ` (open ${owner.address} with the URL it printed)` : ''}, stop it first, or set UNHALT_HOME to another folder`);
    this.owner = owner;
  }
}

export function ownerLockPath(home: string): string {
  return join(home, 'owner.lock');
}

/** How long a refused process waits for the owner to write who it is (it locks, then writes). */
const OWNER_INFO_WAIT_MS = 1000;

export class HomeOwnership {
  private fd: number | undefined;
  private info: HomeOwner;

  private constructor(fd: number, info: HomeOwner) {
    this.fd = fd;
    this.info = info;
    this.write();
  }

  /** Takes ownership of `home` (which must exist), or throws HomeBusyError naming the owner. */
  static async claim(home: string, command: string): Promise<HomeOwnership> {
    const path = ownerLockPath(home);
    // O_CLOEXEC (Node's default): children such as xdg-open do not inherit the lock. Never through
    // a symbolic link, never blocking on a FIFO: only a regular file is a lock.
    const fd = openLockFile(path, constants.O_RDWR | constants.O_CREAT);
    if (libc.flock(fd, LOCK_EX | LOCK_NB) === 0) {
      const pidNs = ownPidNamespace();
      return new HomeOwnership(fd, { pid: process.pid, command, startedAt: new Date().toISOString(), ...(pidNs ? { pidNs } : {}) });
    }
    const err = errno();
    closeSync(fd);
    if (err !== EAGAIN) throw new Error(`cannot lock ${path}: ${describeErrno(err)}`);
    throw new HomeBusyError(home, await readOwner(path));
  }

  /** Adds host mode's address to what a refused process is told. */
  announce(address: string): void {
    this.info = { ...this.info, address };
    this.write();
  }

  /** Gives the home up (the process's exit does the same). */
  release(): void {
    if (this.fd === undefined) return;
    try { ftruncateSync(this.fd, 0); } catch { /* the lock is what counts, not the text */ }
    closeSync(this.fd);
    this.fd = undefined;
  }

  private write(): void {
    if (this.fd === undefined) return;
    const text = `${JSON.stringify(this.info)}\n`;
    ftruncateSync(this.fd, 0);
    writeSync(this.fd, text, 0);
  }
}

/** The owner as its lock file says, waiting briefly for a new owner to write it. */
async function readOwner(path: string): Promise<HomeOwner | undefined> {
  const deadline = performance.now() + OWNER_INFO_WAIT_MS;
  for (;;) {
    const owner = parseOwner(readText(path));
    if (owner || performance.now() > deadline) return owner;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The lock file opened as a regular file, or an error naming what is there instead and its fix. */
function openLockFile(path: string, flags: number): number {
  try {
    return openRegularFile(path, flags, { mode: 0o600 }).fd;
  } catch (e) {
    if (e instanceof NotRegularFileError) throw new Error(`${path} is no regular file (a FIFO or a device), which Unhalt never makes there: remove it (rm ${path}) and start again`);
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOOP') throw new Error(`${path} is a symbolic link, which Unhalt never makes there: remove it (rm ${path}) and start again`);
    if (code === 'EISDIR') throw new Error(`${path} is a directory, which Unhalt never makes there: remove it (rmdir ${path}) and start again`);
    throw new Error(`cannot open ${path}: ${(e as Error).message}`);
  }
}

/** What the owner wrote (a few hundred bytes; read with a bound). */
function readText(path: string): string {
  try {
    const fd = openLockFile(path, constants.O_RDONLY);
    try {
      const buf = Buffer.alloc(4096);
      return buf.toString('utf8', 0, readSync(fd, buf, 0, buf.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
}

function parseOwner(text: string): HomeOwner | undefined {
  try {
    const o = JSON.parse(text) as Partial<HomeOwner>;
    if (typeof o.pid !== 'number' || typeof o.command !== 'string' || typeof o.startedAt !== 'string') return undefined;
    return {
      pid: o.pid, command: o.command.slice(0, 200), startedAt: o.startedAt,
      ...(typeof o.address === 'string' ? { address: o.address.slice(0, 200) } : {}),
      ...(typeof o.pidNs === 'string' ? { pidNs: o.pidNs.slice(0, 64) } : {}),
    };
  } catch {
    return undefined;
  }
}

export function describeOwner(owner: HomeOwner | undefined, ourPidNs: string | undefined = ownPidNamespace()): string {
  if (!owner) return 'it has not said who it is';
  // A pid from another PID namespace is not this one's process of that number (pid 1 is no init here).
  const elsewhere = owner.pidNs && ourPidNs && owner.pidNs !== ourPidNs ? ` in another PID namespace (${owner.pidNs}: a container or sandbox; this process is in ${ourPidNs})` : '';
  return `pid ${owner.pid}${elsewhere}, ${owner.command}, since ${owner.startedAt}${owner.address ? `, host mode at ${owner.address}` : ''}`;
}
