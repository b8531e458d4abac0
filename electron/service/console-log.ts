// Each VM's console output also goes to a bounded file, UNHALT_HOME/logs/<vm id>.log: when it
// would pass its limit it is renamed to .log.1 (replacing the older one) and a new file starts,
// so one VM never takes more than twice the limit. Writes are batched on a short timer, and what
// is waiting is bounded too: a guest flooding its console loses log bytes (counted), the VMM
// never buffers without limit. The writes are asynchronous, one after another: this runs on the
// main thread that answers every client, and a disk stall must never stall them.
import { closeSync, constants, readSync, rmSync } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { NotRegularFileError, openRegularFile, openRegularHandle } from './home-file.ts';
import { makeDirs } from './make-dir.ts';

export const DEFAULT_LOG_BYTES = 1024 * 1024;
const FLUSH_MS = 250;
const MAX_PENDING = 256 * 1024;

export function consoleLogPath(logsDir: string, vmId: string): string {
  return join(logsDir, `${vmId}.log`);
}

export class ConsoleLogFile {
  readonly path: string;
  readonly maxBytes: number;
  /** Bytes not logged because they arrived faster than the disk took them, or a write failed. */
  dropped = 0;
  /** The last write error (the log is best effort: the console itself never stops for it). */
  lastError?: string;
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  /** Bytes handed to the write chain and not yet on disk (bounded with pendingBytes). */
  private writingBytes = 0;
  private writing: Promise<void> = Promise.resolve();
  private timer?: NodeJS.Timeout;
  private size = -1;

  constructor(path: string, maxBytes = DEFAULT_LOG_BYTES) {
    this.path = path;
    this.maxBytes = maxBytes;
  }

  write(bytes: Uint8Array): void {
    if (this.pendingBytes + this.writingBytes + bytes.length > MAX_PENDING) {
      this.dropped += bytes.length;
      return;
    }
    this.pending.push(new Uint8Array(bytes)); // a copy (Buffer#slice would share)
    this.pendingBytes += bytes.length;
    this.timer ??= setTimeout(() => { void this.flush(); }, FLUSH_MS);
    this.timer.unref?.();
  }

  /**
   * Hands what is waiting to the write chain (also called at VM exit and service shutdown);
   * resolves once everything handed over so far is on disk (or counted as dropped).
   */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pendingBytes === 0) return this.writing;
    const data = Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    this.writingBytes += data.length;
    this.writing = this.writing.then(() => this.writeOut(data)).finally(() => { this.writingBytes -= data.length; });
    return this.writing;
  }

  private async writeOut(all: Buffer): Promise<void> {
    let data = all;
    try {
      if (this.size < 0) {
        makeDirs(dirname(this.path), 0o700);
        this.size = await fileSize(this.path);
      }
      if (data.length > this.maxBytes) {
        this.dropped += data.length - this.maxBytes;
        data = data.subarray(data.length - this.maxBytes);
      }
      if (this.size + data.length > this.maxBytes) {
        await rename(this.path, `${this.path}.1`);
        this.size = 0;
      }
      await appendRegular(this.path, data);
      this.size += data.length;
    } catch (e) {
      // ENOENT on rename: the file is gone (deleted VM, cleared logs): start over.
      this.size = -1;
      this.dropped += data.length;
      this.lastError = (e as Error).message;
    }
  }

  /** Removes the log files (when the VM is deleted), again after a write still under way. */
  remove(): void {
    this.pending = [];
    this.pendingBytes = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const removeAll = () => {
      rmSync(this.path, { force: true });
      rmSync(`${this.path}.1`, { force: true });
      this.size = -1;
    };
    removeAll();
    if (this.writingBytes > 0) {
      this.writing = this.writing.then(() => Promise.all([rm(this.path, { force: true }), rm(`${this.path}.1`, { force: true })]))
        .then(() => { this.size = -1; }, () => {});
    }
  }
}

/**
 * Appends to the log, which must be a regular file of ours: never through a symbolic link (guest
 * output would land in whatever file it names), never blocking on a FIFO.
 */
async function appendRegular(path: string, data: Buffer): Promise<void> {
  const { handle: f } = await openRegularHandle(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, { mode: 0o600 }).catch((e: unknown) => {
    throw e instanceof NotRegularFileError ? new Error(`${path} is no regular file: the console log is not written there (move it away)`) : e;
  });
  try {
    await f.write(data);
  } finally {
    await f.close();
  }
}

async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

/** The last `max` bytes of a VM's log (the scrollback after a restart of the app), or empty. */
export function readLogTail(path: string, max: number): Uint8Array {
  let fd: number;
  let size: number;
  try {
    // Never through a link, never blocking on a FIFO: only a regular file of ours has a tail.
    ({ fd, stats: { size } } = openRegularFile(path, constants.O_RDONLY));
  } catch {
    return new Uint8Array(0);
  }
  try {
    const n = Math.min(size, max);
    const buf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      const r = readSync(fd, buf, got, n - got, size - n + got);
      if (r === 0) break;
      got += r;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}
