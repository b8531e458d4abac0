// A TAP device (Linux TUN/TAP, IFF_TAP | IFF_NO_PI): Ethernet frames in and out of one fd, each
// read(2) one frame, each write(2) one frame. A tap that exists already is attached (a persistent
// one the user made: `ip tuntap add dev NAME mode tap user USER`); IFF_TUN_EXCL stays off, so it
// can be attached again after the VM that used it ended. A name no interface has is created, as
// QEMU's `-netdev tap,ifname=NAME` does, when this process may (CAP_NET_ADMIN in its network
// namespace): not persistent (no TUNSETPERSIST), so it goes when the fd closes — with the VM —
// and brought up (IFF_UP) so frames flow at once; addresses, bridges and routes stay the user's.
// A process that may not create it is told in one line how to make one it may attach.
// Whether the name is a tap, another interface or none is asked of the caller's own network
// namespace (ioctls on a socket it makes, the namespace TUNSETIFF acts in too), never of
// /sys/class/net: that shows the namespace of whoever mounted /sys, which after a plain
// `unshare -n` or `nsenter --net` is another one.
import { O_CLOEXEC, O_RDWR, OsError, addressOf, closeFd, describeErrno, errno, libc } from '../kvm/libc.ts';

const TUNSETIFF = 0x400454ca;
const SIOCGIFFLAGS = 0x8913;
const SIOCSIFFLAGS = 0x8914;
const SIOCGIFINDEX = 0x8933;
const SIOCETHTOOL = 0x8946;
const ETHTOOL_GDRVINFO = 0x3;
/** struct ethtool_drvinfo: cmd, then driver[32], version[32], fw_version[32], bus_info[32], ... */
const DRVINFO = { bytes: 196, driver: 4, busInfo: 100, strLen: 32 };
const ENODEV = 19;
const AF_INET = 2;
const SOCK_DGRAM = 2;
const IFF_UP = 0x1;
const EPERM = 1;
const EACCES = 13;
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

/** How to make a tap this user may attach without privileges. */
const createIt = (name: string) => `ip tuntap add dev ${name} mode tap user $(id -un); ip link set ${name} up`;

/**
 * Opens tap `name` for frames, non-blocking: an existing tap attached, a name no interface has
 * created (when this process may) and brought up. Throws TapError (one line) when it cannot.
 */
export function openTap(name: string): number {
  const kind = interfaceKind(name);
  const exists = kind !== 'none';
  if (kind === 'other') throw new TapError(`${name} is a network interface but not a tap (no TUN/TAP flags): give the name of a tap device`);
  if (kind === 'tun') throw new TapError(`${name} is a TUN (IP) device, not a tap: create a tap (ip tuntap add dev NAME mode tap)`);
  const fd = libc.open(TUN_DEVICE, O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const err = errno();
    if (!exists && (err === EACCES || err === EPERM)) {
      throw new TapError(`tap ${name} does not exist, and this process may not create it (${TUN_DEVICE}: ${describeErrno(err)}; creating needs CAP_NET_ADMIN): create it first (${createIt(name)})`);
    }
    throw new TapError(`tap ${name} cannot be ${exists ? 'opened' : 'created'}: ${TUN_DEVICE}: ${describeErrno(err)}`);
  }
  const ifr = ifreq(name);
  ifr.writeUInt16LE(IFF_TAP | IFF_NO_PI, IFNAMSIZ);
  if (libc.ioctlBuf(fd, TUNSETIFF, ifr) < 0) {
    const err = errno();
    closeFd(fd);
    if (!exists && err === EPERM) {
      throw new TapError(`tap ${name} does not exist, and this process may not create it (creating needs CAP_NET_ADMIN): create it first (${createIt(name)})`);
    }
    const why = err === EPERM ? ' (it belongs to another user or group: ip tuntap add ... user YOU, or run with CAP_NET_ADMIN)'
      : err === 16 ? ' (another process has it attached)' : err === 22 ? ' (its flags differ: it is not a plain tap without packet information)' : '';
    throw new TapError(`tap ${name} cannot be ${exists ? 'opened' : 'created'}: ${describeErrno(err)}${why}`);
  }
  if (!exists) {
    const err = bringUp(name);
    if (err) {
      closeFd(fd); // the tap goes with it
      throw new TapError(`tap ${name} was created but cannot be brought up: ${describeErrno(err)}`);
    }
  }
  return fd;
}

/** An interface's name in a struct ifreq (40 bytes: the name, NUL-terminated, then a union). */
function ifreq(name: string): Buffer {
  const ifr = Buffer.alloc(40);
  ifr.write(name, 0, IFNAMSIZ - 1, 'latin1');
  return ifr;
}

/**
 * What interface `name` is in this process's network namespace: none (SIOCGIFINDEX: ENODEV), a
 * tap or a TUN device (the tun driver's ethtool information: driver "tun", bus "tap" or "tun"),
 * or another kind. A socket's ioctls answer for the namespace it was made in: the caller's.
 */
function interfaceKind(name: string): 'none' | 'tap' | 'tun' | 'other' {
  // A longer name would be looked up (and created) cut to IFNAMSIZ - 1: another interface's.
  if (name === '' || Buffer.byteLength(name, 'latin1') >= IFNAMSIZ) {
    throw new TapError(`tap "${name}" is not an interface name (at most ${IFNAMSIZ - 1} characters)`);
  }
  const s = libc.socket(AF_INET, SOCK_DGRAM | O_CLOEXEC, 0);
  if (s < 0) throw new TapError(`tap ${name} cannot be looked up: socket: ${describeErrno(errno())}`);
  try {
    const ifr = ifreq(name);
    if (libc.ioctlBuf(s, SIOCGIFINDEX, ifr) < 0) {
      const err = errno();
      if (err === ENODEV) return 'none';
      throw new TapError(`tap ${name} cannot be looked up: ${describeErrno(err)}`);
    }
    // SIOCETHTOOL's ifr_data points at the command's struct (anyone may ask for GDRVINFO).
    const info = Buffer.alloc(DRVINFO.bytes);
    info.writeUInt32LE(ETHTOOL_GDRVINFO, 0);
    ifr.fill(0, IFNAMSIZ);
    ifr.writeBigUInt64LE(BigInt(addressOf(info)), IFNAMSIZ);
    if (libc.ioctlBuf(s, SIOCETHTOOL, ifr) < 0) return 'other'; // no driver information: not the tun driver's
    if (cString(info, DRVINFO.driver, DRVINFO.strLen) !== 'tun') return 'other';
    return cString(info, DRVINFO.busInfo, DRVINFO.strLen) === 'tap' ? 'tap' : 'tun';
  } finally {
    closeFd(s);
  }
}

/** A NUL-terminated string in a fixed-size field. */
function cString(buf: Buffer, offset: number, size: number): string {
  const field = buf.subarray(offset, offset + size);
  const end = field.indexOf(0);
  return field.toString('latin1', 0, end < 0 ? size : end);
}

/** Sets IFF_UP on interface `name` (SIOCGIFFLAGS / SIOCSIFFLAGS on a datagram socket); 0 or the errno. */
function bringUp(name: string): number {
  const s = libc.socket(AF_INET, SOCK_DGRAM | O_CLOEXEC, 0);
  if (s < 0) return errno();
  try {
    const ifr = ifreq(name);
    if (libc.ioctlBuf(s, SIOCGIFFLAGS, ifr) < 0) return errno();
    ifr.writeUInt16LE(ifr.readUInt16LE(IFNAMSIZ) | IFF_UP, IFNAMSIZ);
    if (libc.ioctlBuf(s, SIOCSIFFLAGS, ifr) < 0) return errno();
    return 0;
  } finally {
    closeFd(s);
  }
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
