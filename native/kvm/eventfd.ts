// eventfd(2) as the VMM uses it: a counter one thread (or KVM, through an ioeventfd) adds to and
// another waits on. An I/O thread waits for several at once with poll(2) (poll-set.ts). Fds are process-wide,
// so the numbers cross to worker threads as plain data.
import { EFD_CLOEXEC, OsError, errno, libc } from './libc.ts';

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

const counter = Buffer.alloc(8);

/** Reads (and so resets) an eventfd's counter: how many signals it took since. */
export function takeEventFd(fd: number): number {
  if (libc.read(fd, counter, 8) !== 8) throw new OsError('eventfd read', errno());
  return Number(counter.readBigUInt64LE(0));
}
