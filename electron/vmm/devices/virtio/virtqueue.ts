// A split virtqueue (virtio 1.2, 2.7) read straight from guest RAM: take the next available
// descriptor chain, hand its buffers to the back end, put the head on the used ring. Everything
// in these rings is written by the guest and trusted for nothing: an index past the ring, a chain
// that loops or is longer than the ring, a buffer outside RAM, a readable buffer after a writable
// one, an indirect descriptor (not offered) or an available index that runs more than a ring
// ahead makes the queue report a QueueError, and the transport marks the device
// DEVICE_NEEDS_RESET. Nothing here throws for guest data or allocates per buffer.

import type { GuestRam } from './guest-ram.ts';

export const VIRTQ_DESC_F_NEXT = 1;
export const VIRTQ_DESC_F_WRITE = 2;
export const VIRTQ_DESC_F_INDIRECT = 4;
export const VIRTQ_AVAIL_F_NO_INTERRUPT = 1;
/** Largest queue a device offers (a split ring's limit is 32768). */
export const MAX_QUEUE_SIZE = 1024;

/** Why a queue was given up on: a readable word for the log and the device's error code. */
export const QUEUE_ERROR = Object.freeze({
  none: 0,
  ringOutsideRam: 1,
  availIndexJump: 2,
  headOutOfRange: 3,
  nextOutOfRange: 4,
  chainTooLong: 5,
  bufferOutsideRam: 6,
  indirect: 7,
  readAfterWrite: 8,
  badSize: 9,
  /** The device type could not make sense of a request it can answer nothing to (a blk chain with no status byte). */
  badRequest: 10,
});
export type QueueError = (typeof QUEUE_ERROR)[keyof typeof QUEUE_ERROR];

export const QUEUE_ERROR_NAMES: Record<number, string> = Object.fromEntries(Object.entries(QUEUE_ERROR).map(([k, v]) => [v, k]));

export interface QueueAddresses {
  size: number;
  desc: number;
  avail: number;
  used: number;
}

/** One descriptor chain: its head and buffers, in reused arrays (valid until the next pop). */
export class Chain {
  head = 0;
  count = 0;
  /** Offsets into GuestRam.bytes (already checked to lie in RAM), lengths, writable flags. */
  readonly offset: Float64Array;
  readonly length: Uint32Array;
  readonly writable: Uint8Array;
  constructor(max: number) {
    this.offset = new Float64Array(max);
    this.length = new Uint32Array(max);
    this.writable = new Uint8Array(max);
  }
  /** Total bytes of the device-writable buffers. */
  writableBytes(): number {
    let n = 0;
    for (let i = 0; i < this.count; i++) if (this.writable[i]) n += this.length[i]!;
    return n;
  }
}

/**
 * One queue's rings in guest RAM. `lastAvail` (the next available entry to take) and the used
 * index live with the caller (shared state), so every thread's instance continues where the
 * last left off; this class only reads and writes the rings.
 */
export class SplitQueue {
  private readonly ram: GuestRam;
  private q: QueueAddresses = { size: 0, desc: 0, avail: 0, used: 0 };
  private descOff = 0;
  private availOff = 0;
  private usedOff = 0;
  readonly chain = new Chain(MAX_QUEUE_SIZE);
  error: QueueError = QUEUE_ERROR.none;

  constructor(ram: GuestRam) {
    this.ram = ram;
  }

  /** Points at a queue's rings; false (and `error`) when its size is bad or a ring is outside RAM. */
  bind(q: QueueAddresses): boolean {
    this.q = q;
    this.error = QUEUE_ERROR.none;
    const n = q.size;
    if (n === 0 || n > MAX_QUEUE_SIZE || (n & (n - 1)) !== 0) return this.fail(QUEUE_ERROR.badSize);
    this.descOff = this.ram.offsetOf(q.desc, 16 * n);
    this.availOff = this.ram.offsetOf(q.avail, 6 + 2 * n);
    this.usedOff = this.ram.offsetOf(q.used, 6 + 8 * n);
    // Alignment (2.7): descriptors 16, available ring 2, used ring 4.
    if (this.descOff < 0 || this.availOff < 0 || this.usedOff < 0 || q.desc % 16 !== 0 || q.avail % 2 !== 0 || q.used % 4 !== 0) {
      return this.fail(QUEUE_ERROR.ringOutsideRam);
    }
    return true;
  }

  /** The guest's available index (an atomic load: the guest's CPU wrote it). */
  availIdx(): number {
    return Atomics.load(this.ram.u16, (this.availOff + 2) >>> 1);
  }

  /** Whether the driver asked for no interrupts (VIRTQ_AVAIL_F_NO_INTERRUPT). */
  interruptSuppressed(): boolean {
    return (Atomics.load(this.ram.u16, this.availOff >>> 1) & VIRTQ_AVAIL_F_NO_INTERRUPT) !== 0;
  }

  /** Entries available from `lastAvail`: 0 when none, -1 (and `error`) when the guest claims more than the ring holds. */
  pending(lastAvail: number): number {
    const n = (this.availIdx() - lastAvail) & 0xffff;
    if (n > this.q.size) {
      this.fail(QUEUE_ERROR.availIndexJump);
      return -1;
    }
    return n;
  }

  /** Reads the chain at available entry `lastAvail` into `this.chain`; false (and `error`) when it is bad. */
  pop(lastAvail: number): boolean {
    const size = this.q.size;
    const v = this.ram.view;
    const head = v.getUint16(this.availOff + 4 + 2 * (lastAvail % size), true);
    const c = this.chain;
    c.head = head;
    c.count = 0;
    if (head >= size) return this.fail(QUEUE_ERROR.headOutOfRange);
    let i = head;
    let sawWritable = false;
    for (;;) {
      // A chain visits each descriptor at most once, so more than `size` buffers means a loop.
      if (c.count >= size) return this.fail(QUEUE_ERROR.chainTooLong);
      const d = this.descOff + 16 * i;
      const addr = v.getUint32(d, true) + v.getUint32(d + 4, true) * 0x1_0000_0000;
      const len = v.getUint32(d + 8, true);
      const flags = v.getUint16(d + 12, true);
      const next = v.getUint16(d + 14, true);
      if (flags & VIRTQ_DESC_F_INDIRECT) return this.fail(QUEUE_ERROR.indirect);
      const writable = (flags & VIRTQ_DESC_F_WRITE) !== 0;
      if (!writable && sawWritable) return this.fail(QUEUE_ERROR.readAfterWrite);
      sawWritable ||= writable;
      const off = this.ram.offsetOf(addr, len);
      if (off < 0) return this.fail(QUEUE_ERROR.bufferOutsideRam);
      c.offset[c.count] = off;
      c.length[c.count] = len;
      c.writable[c.count] = writable ? 1 : 0;
      c.count++;
      if ((flags & VIRTQ_DESC_F_NEXT) === 0) return true;
      if (next >= size) return this.fail(QUEUE_ERROR.nextOutOfRange);
      i = next;
    }
  }

  /** Puts (head, written bytes) at used entry `usedIdx`, then publishes `usedIdx + 1`. */
  push(usedIdx: number, head: number, written: number): void {
    const e = this.usedOff + 4 + 8 * (usedIdx % this.q.size);
    this.ram.view.setUint32(e, head, true);
    this.ram.view.setUint32(e + 4, written, true);
    // The element before the index (an atomic store orders it after the plain stores above).
    Atomics.store(this.ram.u16, (this.usedOff + 2) >>> 1, (usedIdx + 1) & 0xffff);
  }

  private fail(e: QueueError): false {
    this.error = e;
    return false;
  }
}
