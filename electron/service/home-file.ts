// Reading a file of UNHALT_HOME (the library, settings, notices, experiment records, confirmed
// commands, saved workloads): only a regular file of sane size is read, and never by blocking.
// A FIFO in its place would block the event loop and with it the whole API, /dev/zero (through a
// symbolic link) would fill memory, a directory would throw a stack trace: each is named in one
// line instead. Opened with O_NONBLOCK and judged by fstat on the open file, so a swap between a
// check and the read changes nothing.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/** A file of UNHALT_HOME that is no regular file, or too big to be one of ours. */
export class HomeFileError extends Error {
  override name = 'HomeFileError';
}

/** What `fstat` says a path is, in a few words. */
function kindOf(st: { isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean }): string {
  return st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : st.isCharacterDevice() || st.isBlockDevice() ? 'a device' : 'no regular file';
}

/**
 * The text of `path`, or undefined when there is none (ENOENT). Throws HomeFileError when it is no
 * regular file or holds more than `maxBytes` (the message names it, `what` it is, and the fix).
 */
export function readHomeFile(path: string, what: string, maxBytes: number): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new HomeFileError(`${what} ${path} is ${kindOf(st)}, not a file: move it away (Unhalt makes that file itself)`);
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
