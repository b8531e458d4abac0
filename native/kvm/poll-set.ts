// poll(2) over a set of fds rebuilt for every wait: a fixed head (the I/O thread's eventfds) and
// whatever the back ends add each round (libslirp's sockets, a TAP fd). One growable buffer of
// struct pollfd (8 bytes: fd, events, revents); no allocation per wait once it has grown.
import { EINTR, OsError, errno, libc } from './libc.ts';

export const POLL = Object.freeze({ in: 1, pri: 2, out: 4, err: 8, hup: 16, nval: 32 });

export class PollSet {
  private buf = Buffer.alloc(8 * 16);
  private count = 0;
  private readonly fixed: readonly number[];

  /** `fixed`: fds (waited on for POLLIN) that stay at indices 0.. across rounds. */
  constructor(fixed: readonly number[]) {
    this.fixed = [...fixed];
    for (const fd of fixed) this.add(fd, POLL.in);
  }

  /**
   * Whether the next waits watch fixed fd `i` (until changed). An unwatched one is in the set as
   * -1, which poll(2) skips: whatever is pending on it stays there, and ready(i) is false.
   */
  watch(i: number, on: boolean): void {
    if (i < 0 || i >= this.fixed.length) throw new RangeError(`no fixed fd ${i}`);
    this.buf.writeInt32LE(on ? this.fixed[i]! : -1, 8 * i);
  }

  /** Drops what the back ends added last round (the fixed fds stay). */
  reset(): void {
    this.count = this.fixed.length;
  }

  /** Adds `fd` with poll(2) `events` for the next wait; returns its index. */
  add(fd: number, events: number): number {
    if (8 * (this.count + 1) > this.buf.length) {
      const bigger = Buffer.alloc(this.buf.length * 2);
      this.buf.copy(bigger);
      this.buf = bigger;
    }
    const i = this.count++;
    this.buf.writeInt32LE(fd, 8 * i);
    this.buf.writeInt16LE(events, 8 * i + 4);
    this.buf.writeInt16LE(0, 8 * i + 6);
    return i;
  }

  get size(): number {
    return this.count;
  }

  /** Blocks this thread until an fd is ready or `timeoutMs` passes (-1: forever); returns how many are ready (0 after EINTR). */
  wait(timeoutMs: number): number {
    for (let i = 0; i < this.count; i++) this.buf.writeInt16LE(0, 8 * i + 6);
    const n = libc.poll(this.buf, this.count, timeoutMs);
    if (n < 0) {
      const err = errno();
      if (err === EINTR) return 0;
      throw new OsError('poll', err);
    }
    return n;
  }

  /** revents of index `i` at the last wait (0 for an index past the set). */
  revents(i: number): number {
    return i >= 0 && i < this.count ? this.buf.readUInt16LE(8 * i + 6) : 0;
  }

  ready(i: number): boolean {
    return (this.revents(i) & POLL.in) !== 0;
  }
}
