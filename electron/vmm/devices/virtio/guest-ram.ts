// Guest RAM as a device back end reads it: guest-physical ranges translated to offsets of the one
// RAM SharedArrayBuffer (memory/guest-memory.ts), or refused when any byte lies outside RAM. A
// guest hands devices addresses; nothing it hands can make a view reach past its RAM.

export interface RamRange {
  guestPhysAddr: number;
  size: number;
  /** Offset inside `bytes`. */
  offset: number;
}

/** Plain data a worker gets (postMessage-able): the RAM SAB, where RAM starts in it, the ranges. */
export interface GuestRamHandle {
  sab: SharedArrayBuffer;
  base: number;
  size: number;
  ranges: RamRange[];
}

export class GuestRam {
  readonly bytes: Uint8Array;
  readonly view: DataView;
  /** 16-bit view for the ring indices (aligned, so Atomics work on them). */
  readonly u16: Uint16Array;
  private readonly ranges: readonly RamRange[];

  constructor(bytes: Uint8Array, ranges: readonly RamRange[]) {
    if (bytes.byteOffset % 2 !== 0) throw new RangeError('guest RAM must start 2-byte aligned');
    this.bytes = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.u16 = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >>> 1);
    this.ranges = ranges;
  }

  static fromHandle(h: GuestRamHandle): GuestRam {
    return new GuestRam(new Uint8Array(h.sab, h.base, h.size), h.ranges);
  }

  /** Offset of `gpa .. gpa + length` in `bytes`, or -1 when any of it is not RAM. */
  offsetOf(gpa: number, length: number): number {
    if (!(gpa >= 0) || !(length >= 0) || !Number.isSafeInteger(gpa + length)) return -1;
    for (const r of this.ranges) {
      if (gpa >= r.guestPhysAddr && gpa + length <= r.guestPhysAddr + r.size) return r.offset + (gpa - r.guestPhysAddr);
    }
    return -1;
  }
}

/**
 * `lookup` (a host call: the address of guest RAM's first byte) asked once per GuestRam, for a
 * device type that hands host calls raw guest-RAM addresses on every request (virtio-blk's
 * pread/pwrite, virtio-rng's getrandom): the I/O thread serves one RAM; given another, it asks again.
 */
export function ramAddressOnce(lookup: (ram: GuestRam) => number): (ram: GuestRam) => number {
  let last: GuestRam | undefined;
  let address = -1;
  return (ram) => {
    if (ram !== last) {
      last = ram;
      address = lookup(ram);
    }
    return address;
  };
}
