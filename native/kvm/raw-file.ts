// A small file re-read in place (/proc entries): opened once, then one pread at offset 0 per read
// into a preallocated buffer with a stable address. Through koffi this costs a third of what
// fs.readSync does when it runs only a few times a second (its JS argument checks run cold).
import { O_CLOEXEC, addressOf, errno, libc } from './libc.ts';

const O_RDONLY = 0;

export class RawFile {
  readonly path: string;
  /** Holds the last read's bytes (its first `length` bytes). */
  readonly bytes: Buffer;
  length = 0;
  private fd: number;
  private readonly address: number;

  private constructor(path: string, fd: number, capacity: number) {
    this.path = path;
    this.fd = fd;
    this.bytes = Buffer.from(new ArrayBuffer(capacity)); // own ArrayBuffer: a fixed address for pread
    this.address = addressOf(this.bytes);
  }

  /** Opens a file for reading; null if it cannot be opened (absent, or the thread has exited). */
  static open(path: string, capacity = 4096): RawFile | null {
    const fd = libc.open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? null : new RawFile(path, fd, capacity);
  }

  /** Re-reads the file from its start; returns its length, or -errno (e.g. -ESRCH once a thread is gone). */
  read(): number {
    const n = Number(libc.preadAddress(this.fd, this.address, this.bytes.length, 0));
    this.length = n < 0 ? 0 : n;
    return n < 0 ? -errno() : n;
  }

  close(): void {
    if (this.fd >= 0) libc.close(this.fd);
    this.fd = -1;
  }
}
