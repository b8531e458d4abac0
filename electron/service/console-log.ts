// Each VM's console output also goes to a bounded file, UNHALT_HOME/logs/<vm id>.log: when it
// would pass its limit it is renamed to .log.1 (replacing the older one) and a new file starts,
// so one VM never takes more than twice the limit. Writes are batched on a short timer, and what
// is waiting is bounded too: a guest flooding its console loses log bytes (counted), the VMM
// never buffers without limit.
import { appendFileSync, closeSync, fstatSync, openSync, readSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
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
  private timer?: NodeJS.Timeout;
  private size = -1;

  constructor(path: string, maxBytes = DEFAULT_LOG_BYTES) {
    this.path = path;
    this.maxBytes = maxBytes;
  }

  write(bytes: Uint8Array): void {
    if (this.pendingBytes + bytes.length > MAX_PENDING) {
      this.dropped += bytes.length;
      return;
    }
    this.pending.push(new Uint8Array(bytes)); // a copy (Buffer#slice would share)
    this.pendingBytes += bytes.length;
    this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
    this.timer.unref?.();
  }

  /** Writes what is waiting now (also called at VM exit and service shutdown). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pendingBytes === 0) return;
    let data = Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    try {
      if (this.size < 0) {
        makeDirs(dirname(this.path), 0o700);
        this.size = fileSize(this.path);
      }
      if (data.length > this.maxBytes) {
        this.dropped += data.length - this.maxBytes;
        data = data.subarray(data.length - this.maxBytes);
      }
      if (this.size + data.length > this.maxBytes) {
        renameSync(this.path, `${this.path}.1`);
        this.size = 0;
      }
      appendFileSync(this.path, data, { mode: 0o600 });
      this.size += data.length;
    } catch (e) {
      // ENOENT on rename: the file is gone (deleted VM, cleared logs): start over.
      this.size = -1;
      this.dropped += data.length;
      this.lastError = (e as Error).message;
    }
  }

  /** Removes the log files (when the VM is deleted). */
  remove(): void {
    this.pending = [];
    this.pendingBytes = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    rmSync(this.path, { force: true });
    rmSync(`${this.path}.1`, { force: true });
    this.size = -1;
  }
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The last `max` bytes of a VM's log (the scrollback after a restart of the app), or empty. */
export function readLogTail(path: string, max: number): Uint8Array {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return new Uint8Array(0);
  }
  try {
    const size = fstatSync(fd).size;
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
