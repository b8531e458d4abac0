// A TAP device (Linux TUN/TAP, IFF_TAP | IFF_NO_PI): Ethernet frames in and out of one fd, each
// read(2) one frame, each write(2) one frame. Only a tap that exists already is attached (a
// persistent one the user made: `ip tuntap add dev NAME mode tap user USER`); TUNSETIFF would
// otherwise create a fresh one, which is not what `tap=NAME` asks for. IFF_TUN_EXCL stays off, so
// a persistent tap can be attached again after the VM that used it ended.
import { existsSync, readFileSync } from 'node:fs';
import { O_CLOEXEC, O_RDWR, OsError, closeFd, describeErrno, errno, libc } from '../kvm/libc.ts';

const TUNSETIFF = 0x400454ca;
const IFF_TAP = 0x0002;
const IFF_NO_PI = 0x1000;
const O_NONBLOCK = 0x800;
const IFNAMSIZ = 16;
const EAGAIN = 11;
export const TUN_DEVICE = '/dev/net/tun';

/** One line for a tap that cannot be had, naming what to do. */
export class TapError extends Error {
  override name = 'TapError';
}

/** Opens tap `name` for frames, non-blocking. Throws TapError (one line) when it cannot. */
export function openTap(name: string): number {
  const sys = `/sys/class/net/${name}`;
  if (!existsSync(sys)) throw new TapError(`tap ${name} does not exist: create it first (ip tuntap add dev ${name} mode tap user $(id -un); ip link set ${name} up)`);
  let flags: number;
  try {
    flags = Number.parseInt(readFileSync(`${sys}/tun_flags`, 'utf8').trim(), 16);
  } catch {
    throw new TapError(`${name} is a network interface but not a tap (no TUN/TAP flags): give the name of a tap device`);
  }
  if ((flags & IFF_TAP) === 0) throw new TapError(`${name} is a TUN (IP) device, not a tap: create a tap (ip tuntap add dev NAME mode tap)`);
  const fd = libc.open(TUN_DEVICE, O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw new TapError(`tap ${name} cannot be opened: ${TUN_DEVICE}: ${describeErrno(errno())}`);
  const ifr = Buffer.alloc(40);
  ifr.write(name, 0, IFNAMSIZ - 1, 'latin1');
  ifr.writeUInt16LE(IFF_TAP | IFF_NO_PI, IFNAMSIZ);
  if (libc.ioctlBuf(fd, TUNSETIFF, ifr) < 0) {
    const err = errno();
    closeFd(fd);
    const why = err === 1 ? ' (it belongs to another user or group: ip tuntap add ... user YOU, or run with CAP_NET_ADMIN)'
      : err === 16 ? ' (another process has it attached)' : err === 22 ? ' (its flags differ: it is not a plain tap without packet information)' : '';
    throw new TapError(`tap ${name} cannot be opened: ${describeErrno(err)}${why}`);
  }
  return fd;
}

/** Frames on an open tap fd (one read, one frame; non-blocking). */
export class TapFd {
  readonly fd: number;
  private closed = false;
  constructor(fd: number) {
    this.fd = fd;
  }

  /** Reads one frame into `buf`; 0 when none is waiting. */
  read(buf: Uint8Array): number {
    const n = Number(libc.read(this.fd, buf, buf.length));
    if (n >= 0) return n;
    const err = errno();
    if (err === EAGAIN) return 0;
    throw new OsError('tap read', err);
  }

  /** Writes one frame; false when the tap's queue is full (the frame is lost, as on a wire). */
  write(frame: Uint8Array): boolean {
    const n = Number(libc.write(this.fd, frame, frame.length));
    if (n >= 0) return true;
    const err = errno();
    if (err === EAGAIN || err === 5 /* EIO: the interface is down */) return false;
    throw new OsError('tap write', err);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeFd(this.fd);
  }
}
