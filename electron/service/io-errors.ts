// What a failed file or stream operation means to a user, in one place: "disk full" rather than
// "internal: ENOSPC: no space left on device, write", for the CLI and the API alike.

const PLAIN: Record<string, string> = {
  ENOSPC: 'disk full',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'not permitted',
  EPIPE: 'the reader closed it',
  EISDIR: 'it is a directory',
  ENOTDIR: 'a part of the path is not a directory',
  ENOENT: 'no such file or directory',
  ENXIO: 'no reader (a socket or a FIFO nobody opened)',
  EIO: 'I/O error',
  EFBIG: 'file too large',
};

export function errnoCode(e: unknown): string | undefined {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** True for the errors that mean "no room left": the user frees space, nothing is broken. */
export function isDiskFull(e: unknown): boolean {
  const code = errnoCode(e);
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/** "disk full (ENOSPC)"; the error's own message for codes without a plain wording. */
export function describeIoError(e: unknown): string {
  const code = errnoCode(e);
  if (code && PLAIN[code]) return `${PLAIN[code]} (${code})`;
  return e instanceof Error ? e.message : String(e);
}
