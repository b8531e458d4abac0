// An exclusive lock between processes (the Electron app and host mode share UNHALT_HOME): a lock
// file that exists while someone writes, holding "pid starttime". It appears atomically with its
// content (written to a temp file, then link(2)ed into place: like O_CREAT|O_EXCL, the link fails
// with EEXIST if the lock exists, but there is never an empty lock file to misjudge). A holder
// killed with SIGKILL leaves its file behind; the next taker finds the pid dead (or reused by a
// process that started later) and breaks the lock.
import { randomBytes } from 'node:crypto';
import { closeSync, constants, linkSync, readdirSync, readFileSync, readSync, renameSync, unlinkSync, writeFileSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { NotRegularFileError, openRegularFile } from './home-file.ts';
import { pidAlive } from '../vmm/process-alive.ts';

export class LockBusyError extends Error {
  override name = 'LockBusyError';
  readonly holderPid: number | undefined;

  constructor(path: string, holderPid: number | undefined, waitedMs: number) {
    super(`${path} is locked by ${holderPid ? `process ${holderPid}` : 'another process'} (waited ${waitedMs} ms)`);
    this.holderPid = holderPid;
  }
}

/** The lock's path holds something no taker of ours made (a directory, a FIFO): nothing can take it. */
export class LockFileError extends Error {
  override name = 'LockFileError';

  constructor(path: string, what: string) {
    super(`the lock file ${path} is ${what}, which Unhalt never makes there (it makes and removes that file itself): remove it (${what === 'a directory' ? 'rmdir' : 'rm'} ${path}) and try again`);
  }
}

/** How long a taker waits for another holder by default (the service's library changes included). */
export const DEFAULT_LOCK_TIMEOUT_MS = 5000;

export interface LockOptions {
  /** How long to wait for another holder (default DEFAULT_LOCK_TIMEOUT_MS; 0 = try once). */
  timeoutMs?: number;
  pollMs?: number;
}

export class FileLock {
  readonly path: string;
  private readonly token: string;
  private released = false;

  private constructor(path: string, token: string) {
    this.path = path;
    this.token = token;
  }

  /** Takes the lock now, or returns null if a live process holds it. */
  static tryAcquire(path: string): FileLock | null {
    const token = ownToken();
    for (let attempt = 0; attempt < 3; attempt++) {
      if (createExclusive(path, token)) return new FileLock(path, token);
      const age = { mtimeMs: 0 };
      const held = readLock(path, age);
      if (held === undefined) continue; // released between our link and our read: try again
      if (isHolderAlive(held, Date.now() - age.mtimeMs)) return null;
      breakStaleLock(path, held);
    }
    return null;
  }

  /** Waits (asynchronously, without blocking the event loop) for the lock; throws LockBusyError. */
  static async acquire(path: string, options: LockOptions = {}): Promise<FileLock> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
    const pollMs = options.pollMs ?? 20;
    const start = performance.now();
    for (;;) {
      const lock = FileLock.tryAcquire(path);
      if (lock) return lock;
      const waited = performance.now() - start;
      if (waited >= timeoutMs) throw new LockBusyError(path, parseToken(readLock(path) ?? '')?.pid, Math.round(waited));
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /**
   * Removes what killed lock takers left beside the lock: their half-made "<lock>.<pid>-<hex>"
   * and "<lock>.stale-<pid>-<hex>" files, when that pid is no longer alive.
   */
  static removeDebris(path: string): number {
    const prefix = `${basename(path)}.`;
    let removed = 0;
    for (const name of readdirSync(dirname(path))) {
      const m = name.startsWith(prefix) ? /^(?:stale-)?(\d+)-[0-9a-f]{8}$/.exec(name.slice(prefix.length)) : null;
      if (!m || pidAlive(Number(m[1]))) continue;
      try { unlinkSync(join(dirname(path), name)); removed++; } catch { /* raced with another cleaner */ }
    }
    return removed;
  }

  /** Removes the lock file if it is still ours (a holder judged dead may have lost it). */
  release(): void {
    if (this.released) return;
    this.released = true;
    if (readLock(this.path) === this.token) {
      try { unlinkSync(this.path); } catch { /* already gone */ }
    }
  }
}

function createExclusive(path: string, token: string): boolean {
  const tmp = `${path}.${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    // Inside the try: a write that fails (a full disk) has already created the file.
    writeFileSync(tmp, token, { mode: 0o600 });
    linkSync(tmp, path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  } finally {
    try { unlinkSync(tmp); } catch { /* nothing to clean */ }
  }
}

/** The lock file's token, or undefined when there is none; when it was last written in `age`. */
function readLock(path: string, age?: { mtimeMs: number }): string | undefined {
  let fd: number;
  let st: Stats;
  try {
    // Never through a link, never blocking on a FIFO: judged by what was opened.
    ({ fd, stats: st } = openRegularFile(path, constants.O_RDONLY));
  } catch (e) {
    if (e instanceof NotRegularFileError) throw new LockFileError(path, e.kind === 'a directory' || e.kind === 'a FIFO' ? e.kind : 'no regular file');
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw new LockFileError(path, 'a symbolic link');
    throw e;
  }
  try {
    if (age) age.mtimeMs = st.mtimeMs;
    // A lock file is "pid starttime\n": anything longer is damage, and only its start is read.
    const buf = Buffer.alloc(64);
    return buf.toString('utf8', 0, readSync(fd, buf, 0, buf.length, 0));
  } finally {
    closeSync(fd);
  }
}

/**
 * Moves a stale lock out of the way. Renaming (not unlinking) makes the check-then-break safe
 * against a second breaker: only one rename succeeds, and if what we moved turns out to be a
 * fresh lock someone took meanwhile, it is linked back (never over a newer one).
 */
function breakStaleLock(path: string, staleToken: string): void {
  const aside = `${path}.stale-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    renameSync(path, aside);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  try {
    if (readLock(aside) !== staleToken) {
      try { linkSync(aside, path); } catch { /* a newer lock is in place; that holder wins */ }
    }
  } finally {
    try { unlinkSync(aside); } catch { /* gone */ }
  }
}

function ownToken(): string {
  return `${process.pid} ${processStartTime(process.pid) ?? 0}\n`;
}

function parseToken(token: string): { pid: number; start: number } | undefined {
  const m = /^(\d+) (\d+)\n?$/.exec(token);
  if (!m) return undefined;
  return { pid: Number(m[1]), start: Number(m[2]) };
}

/**
 * A token without a start time (written where /proc could not say) proves its holder only while
 * the lock is younger than this: a lock is held for the milliseconds of one write, so one older
 * than a minute whose holder cannot be proven is someone's leftover (a pid 1 of another namespace).
 */
const UNPROVEN_LOCK_MS = 60_000;

function isHolderAlive(token: string, ageMs: number): boolean {
  const t = parseToken(token);
  // Our own writer always creates complete tokens (link is atomic); garbage is someone's damage.
  if (!t || !pidAlive(t.pid)) return false;
  // Alive only when proven: a pid the kernel has since given to another process has another
  // start time; a token without one proves its holder only for a while (UNPROVEN_LOCK_MS).
  // A start time we may not read (/proc mounted hidepid) leaves the live pid the benefit.
  if (token === ownToken()) return true;
  if (t.start === 0) return ageMs < UNPROVEN_LOCK_MS;
  const start = processStartTime(t.pid);
  return start === undefined || start === t.start;
}

/** Field 22 of /proc/PID/stat: start time in clock ticks since boot (undefined if unreadable). */
export function processStartTime(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const v = Number(fields[19]);
    return Number.isFinite(v) ? v : undefined;
  } catch {
    return undefined;
  }
}
