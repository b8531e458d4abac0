// Opening a file of UNHALT_HOME (the library and its lock, settings, notices, experiment records,
// confirmed commands, saved workloads, the owner lock, console logs): only a regular file is
// opened, and never by blocking. A FIFO in its place would block the event loop and with it the
// whole API, /dev/zero (through a symbolic link) would fill memory, a directory would throw a
// stack trace: each is named in one line instead. Opened with O_NONBLOCK (and O_NOFOLLOW unless
// links are followed on purpose) and judged by fstat on the open file, so a swap between a check
// and the use changes nothing.
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

/** A file of UNHALT_HOME that is no regular file, or too big to be one of ours. */
export class HomeFileError extends Error {
  override name = 'HomeFileError';
}

/** What was opened where a regular file belongs (already closed again); `kind` says what, in a few words. */
export class NotRegularFileError extends Error {
  override name = 'NotRegularFileError';
  readonly kind: string;
  readonly stats: Stats;

  constructor(path: string, stats: Stats) {
    const kind = kindOf(stats);
    super(`${path} is ${kind}, not a regular file`);
    this.kind = kind;
    this.stats = stats;
  }
}

/** What `fstat` says a path is, in a few words. */
function kindOf(st: Stats): string {
  return st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : st.isCharacterDevice() || st.isBlockDevice() ? 'a device' : 'no regular file';
}

export interface RegularFileOptions {
  /** Open through a symbolic link too (default: never, O_NOFOLLOW: open fails with ELOOP). */
  followLinks?: boolean;
  /** The mode of a file O_CREAT makes. */
  mode?: number;
}

const safeFlags = (flags: number, options: RegularFileOptions) => flags | constants.O_NONBLOCK | (options.followLinks ? 0 : constants.O_NOFOLLOW);

/**
 * Opens `path` with `flags` (O_RDONLY, O_RDWR | O_CREAT, ...) as a regular file, never blocking and
 * never through a symbolic link unless `followLinks`. Returns the fd, which the caller closes, and
 * its fstat. open's own errors pass through (ENOENT, ELOOP for a link, EISDIR for a directory
 * opened to write); anything else than a regular file throws NotRegularFileError, its fd closed.
 */
export function openRegularFile(path: string, flags: number, options: RegularFileOptions = {}): { fd: number; stats: Stats } {
  const fd = openSync(path, safeFlags(flags, options), options.mode);
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new NotRegularFileError(path, stats);
    return { fd, stats };
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}

/** openRegularFile without blocking the thread on the disk: a FileHandle, which the caller closes. */
export async function openRegularHandle(path: string, flags: number, options: RegularFileOptions = {}): Promise<{ handle: FileHandle; stats: Stats }> {
  const handle = await open(path, safeFlags(flags, options), options.mode);
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new NotRegularFileError(path, stats);
    return { handle, stats };
  } catch (e) {
    await handle.close();
    throw e;
  }
}

/**
 * The text of `path`, or undefined when there is none (ENOENT). Throws HomeFileError when it is no
 * regular file or holds more than `maxBytes` (the message names it, `what` it is, and the fix).
 * A symbolic link is followed and what it leads to judged: a link to /dev/zero is named a device.
 */
export function readHomeFile(path: string, what: string, maxBytes: number): string | undefined {
  let fd: number;
  let st: Stats;
  try {
    ({ fd, stats: st } = openRegularFile(path, constants.O_RDONLY, { followLinks: true }));
  } catch (e) {
    if (e instanceof NotRegularFileError) throw new HomeFileError(`${what} ${path} is ${e.kind}, not a file: move it away (Unhalt makes that file itself)`);
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    if (st.size > maxBytes) throw new HomeFileError(`${what} ${path} is ${st.size} bytes, more than it can be (${maxBytes}): move it away`);
    // A regular file's size may still grow while it is read: never more than the bound.
    let buf = Buffer.alloc(Math.min(maxBytes, st.size) + 1);
    let n = 0;
    for (;;) {
      const got = readSync(fd, buf, n, buf.length - n, n);
      if (got === 0) break;
      n += got;
      if (n < buf.length) continue;
      if (buf.length > maxBytes) throw new HomeFileError(`${what} ${path} grew past ${maxBytes} bytes while it was read: move it away`);
      const bigger = Buffer.alloc(Math.min(maxBytes + 1, buf.length * 2));
      buf.copy(bigger, 0, 0, n);
      buf = bigger;
    }
    return buf.toString('utf8', 0, n);
  } finally {
    closeSync(fd);
  }
}
