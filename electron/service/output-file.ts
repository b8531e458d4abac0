// Files the user names for output (`bench --output`, `run --stats`, `run --agent-log`): the
// path may be a device (/dev/null, /dev/full, /dev/stdout), a FIFO, or a symlink to one of those
// or to a regular file. Such a target is written *through*, never replaced: a temp file renamed
// over /dev/null, as root, turns the device node into a regular file for everyone. Only a regular
// file (or a path that does not exist yet) gets the atomic temp-and-rename; through a symlink
// the file it points to is replaced and the link is kept. Every failure is one line naming the
// path and what went wrong ("disk full (ENOSPC)").
import { closeSync, lstatSync, openSync, realpathSync, statSync, writeSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { dirname } from 'node:path';
import { writeFileAtomic } from './atomic-file.ts';
import { describeIoError, errnoCode } from './io-errors.ts';

export class OutputError extends Error {
  override name = 'OutputError';
}

type Target =
  | { kind: 'new' }
  | { kind: 'regular'; path: string }
  | { kind: 'through' };

/**
 * What writing to `path` would do, checked before any work (a benchmark may run for minutes
 * first). Throws OutputError for what can never take output: a folder, a socket, a missing folder.
 */
export function checkOutputPath(path: string, what: string): void {
  classify(path, what);
}

function classify(path: string, what: string): Target {
  let link: Stats;
  try {
    link = lstatSync(path);
  } catch (e) {
    if (errnoCode(e) !== 'ENOENT') throw new OutputError(`cannot write ${what} ${path}: ${describeIoError(e)}`);
    requireFolder(dirname(path), path, what);
    return { kind: 'new' };
  }
  let st: Stats = link;
  if (link.isSymbolicLink()) {
    try {
      st = statSync(path);
    } catch (e) {
      // A dangling link: writing through it creates the file it names, as a shell's `>` would.
      if (errnoCode(e) === 'ENOENT') return { kind: 'through' };
      throw new OutputError(`cannot write ${what} ${path}: ${describeIoError(e)}`);
    }
  }
  if (st.isDirectory()) throw new OutputError(`cannot write ${what} ${path}: it is a folder`);
  if (st.isSocket()) throw new OutputError(`cannot write ${what} ${path}: it is a socket`);
  if (st.isFile()) return { kind: 'regular', path: link.isSymbolicLink() ? realpathSync.native(path) : path };
  return { kind: 'through' }; // character/block device or FIFO
}

function requireFolder(dir: string, path: string, what: string): void {
  let st: Stats;
  try {
    st = statSync(dir);
  } catch (e) {
    throw new OutputError(`cannot write ${what} ${path}: ${errnoCode(e) === 'ENOENT' ? `the folder ${dir} does not exist` : describeIoError(e)}`);
  }
  if (!st.isDirectory()) throw new OutputError(`cannot write ${what} ${path}: ${dir} is not a folder`);
}

/** Writes `data` to a user-named path: atomically for regular files, through anything else. */
export function writeOutputFile(path: string, data: string | Uint8Array, what = 'the output', mode = 0o644): void {
  const target = classify(path, what);
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  try {
    if (target.kind === 'through') writeThrough(path, bytes);
    else writeFileAtomic(target.kind === 'regular' ? target.path : path, bytes, mode);
  } catch (e) {
    throw new OutputError(`cannot write ${what} ${path}: ${describeIoError(e)}`);
  }
}

function writeThrough(path: string, bytes: Uint8Array): void {
  const fd = openSync(path, 'w');
  try {
    for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
  } finally {
    closeSync(fd);
  }
}

/**
 * A stream to a user-named path for output that grows while a VM runs. It is opened without
 * truncating, so a run that fails to start leaves an existing file as it was; begin() empties a
 * regular file once there is something to write. The first write error is kept (failure()) and
 * reported through onError, once.
 */
export class OutputStream {
  readonly path: string;
  readonly stream: Writable;
  private readonly handle: FileHandle;
  private readonly regular: boolean;
  private readonly what: string;
  private firstError?: string;
  private begun = false;
  private ended?: Promise<void>;
  private errorListener?: (message: string) => void;

  private constructor(path: string, what: string, handle: FileHandle, regular: boolean) {
    this.path = path;
    this.what = what;
    this.handle = handle;
    this.regular = regular;
    this.stream = handle.createWriteStream();
    this.stream.on('error', (e) => this.fail(e));
    // Held back until begin(): nothing may land before a regular file is emptied.
    this.stream.cork();
  }

  /** Opens (creating if absent, never truncating); throws OutputError. A FIFO waits for its reader. */
  static async open(path: string, what: string): Promise<OutputStream> {
    classify(path, what);
    let handle: FileHandle;
    try {
      handle = await open(path, 'a', 0o644);
    } catch (e) {
      throw new OutputError(`cannot write ${what} ${path}: ${describeIoError(e)}`);
    }
    const st = await handle.stat();
    return new OutputStream(path, what, handle, st.isFile());
  }

  /** The run really starts: a regular file starts empty (devices and FIFOs have nothing to empty). */
  async begin(): Promise<void> {
    this.begun = true;
    try {
      if (this.regular) await this.handle.truncate(0);
    } catch (e) {
      this.fail(e);
    } finally {
      this.stream.uncork();
    }
  }

  onError(listener: (message: string) => void): void {
    this.errorListener = listener;
    if (this.firstError) listener(this.firstError);
  }

  /** The first write error, as one line, or undefined. */
  failure(): string | undefined {
    return this.firstError;
  }

  /** Flushes and closes; resolves even after a write error (failure() tells). */
  close(): Promise<void> {
    this.ended ??= new Promise<void>((resolve) => {
      if (this.stream.closed || this.stream.destroyed) { resolve(); return; }
      this.stream.once('close', () => resolve());
      // A run that never began (a failed start) writes nothing: the file stays as it was.
      if (!this.begun) this.stream.destroy();
      else if (!this.stream.writableEnded) this.stream.end();
    }).then(() => this.handle.close().catch(() => undefined));
    return this.ended;
  }

  private fail(e: unknown): void {
    if (this.firstError) return;
    this.firstError = `cannot write ${this.what} ${this.path}: ${describeIoError(e)}`;
    this.errorListener?.(this.firstError);
  }
}
