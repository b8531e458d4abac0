// eventfd(2) as the VMM uses it: a counter one thread (or KVM, through an ioeventfd) adds to and
// another waits on. An I/O thread waits for several at once with poll(2). Fds are process-wide,
// so the numbers cross to worker threads as plain data.
import { EFD_CLOEXEC, EINTR, OsError, POLLIN, errno, libc } from './libc.ts';

export function createEventFd(): number {
  const fd = libc.eventfd(0, EFD_CLOEXEC);
  if (fd < 0) throw new OsError('eventfd', errno());
  return fd;
}

/** Adds `n` to the counter (wakes a waiter). */
export class EventFdWriter {
  private readonly buf = Buffer.alloc(8);
  signal(fd: number, n = 1): void {
    this.buf.writeBigUInt64LE(BigInt(n), 0);
    if (libc.write(fd, this.buf, 8) < 0) throw new OsError('eventfd write', errno());
  }
}

/** Waits on a fixed set of eventfds and reads their counters (one reused buffer, no allocation per wait). */
export class EventFdPoller {
  private readonly fds: readonly number[];
  private readonly pollBuf: Buffer;
  private readonly counter = Buffer.alloc(8);

  constructor(fds: readonly number[]) {
    this.fds = fds;
    this.pollBuf = Buffer.alloc(8 * fds.length);
    fds.forEach((fd, i) => {
      this.pollBuf.writeInt32LE(fd, 8 * i);
      this.pollBuf.writeInt16LE(POLLIN, 8 * i + 4);
    });
  }

  /** Blocks this thread until one is readable (or `timeoutMs`, -1 = forever); returns how many are. */
  wait(timeoutMs = -1): number {
    for (let i = 0; i < this.fds.length; i++) this.pollBuf.writeInt16LE(0, 8 * i + 6);
    const n = libc.poll(this.pollBuf, this.fds.length, timeoutMs);
    if (n < 0) {
      const err = errno();
      if (err === EINTR) return 0;
      throw new OsError('poll', err);
    }
    return n;
  }

  /** Whether fd number `i` was readable at the last wait. */
  ready(i: number): boolean {
    return (this.pollBuf.readInt16LE(8 * i + 6) & POLLIN) !== 0;
  }

  /** Reads (and so resets) the counter of fd number `i`: how many signals it took since. */
  take(i: number): number {
    if (libc.read(this.fds[i]!, this.counter, 8) !== 8) throw new OsError('eventfd read', errno());
    return Number(this.counter.readBigUInt64LE(0));
  }
}
