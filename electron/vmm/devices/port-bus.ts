// The x86 I/O-port bus a vCPU worker dispatches its KVM_EXIT_IO exits to. Each thread has
// its own PortBus over the same shared device state; every access takes the shared lock, so
// devices see one access at a time whichever vCPU (or the main thread) makes it (except a
// device that declares itself lockFree).
//
// Ports nobody claims behave like an empty ISA bus: reads return all ones, writes vanish.
// Each such access is counted per port in a small fixed table in shared memory (so a
// diagnostic can show what a guest probed), with one overflow counter once the table fills.

import type { SharedLock } from './shared-lock.ts';

export interface PortDevice {
  /** First port and number of ports claimed. */
  readonly base: number;
  readonly length: number;
  /** Registers are 8 bits wide: hand 2- and 4-byte accesses over one byte at a time. */
  readonly byteWide?: boolean;
  /**
   * Every access is one tear-free load or store (an aligned 32-bit word) of the device's own state and nothing else,
   * or touches no shared state at all: the bus lock is not taken for it (port 0x80, which Linux writes as an I/O
   * delay and the probe's `pio` scenario hammers; two atomic read-modify-writes were a quarter of such an exit's JS;
   * the ACPI PM timer, computed from a clock, which a guest may poll).
   */
  readonly lockFree?: boolean;
  /** `offset` from `base`; `size` 1, 2 or 4; the result is masked to `size`. */
  read(offset: number, size: number): number;
  write(offset: number, size: number, value: number): void;
}

export interface UnhandledPort {
  port: number;
  count: number;
}

/** Slots in the unhandled-access table; words: [port + 1, count] per slot, then overflow. */
export const UNHANDLED_SLOTS = 16;
export const UNHANDLED_TABLE_WORDS = UNHANDLED_SLOTS * 2 + 1;

const PORTS = 0x10000;
const ONES = [0, 0xff, 0xffff, 0, 0xffffffff];

export class PortBus {
  private readonly lock: SharedLock;
  private readonly unhandled: Int32Array;
  private readonly devices: PortDevice[] = [];
  // port -> index + 1 into `devices` (0 = unmapped): one load per access, no search.
  private readonly table = new Uint8Array(PORTS);

  /** `unhandled` is UNHANDLED_TABLE_WORDS shared words, zeroed initially. */
  constructor(lock: SharedLock, unhandled: Int32Array) {
    if (unhandled.length < UNHANDLED_TABLE_WORDS) throw new RangeError('unhandled table too small');
    this.lock = lock;
    this.unhandled = unhandled;
  }

  /** Claims `device.base .. base + length - 1`; overlapping an earlier device is an error. */
  map(device: PortDevice): void {
    const { base, length } = device;
    if (!Number.isInteger(base) || !Number.isInteger(length) || length < 1 || base < 0 || base + length > PORTS) {
      throw new RangeError(`bad port range ${base}+${length}`);
    }
    if (this.devices.length >= 255) throw new RangeError('too many port devices');
    for (let p = base; p < base + length; p++) {
      if (this.table[p] !== 0) throw new Error(`port 0x${p.toString(16)} is already mapped`);
    }
    this.devices.push(device);
    this.table.fill(this.devices.length, base, base + length);
  }

  read(port: number, size: number): number {
    const free = this.whole(port, size);
    if (free !== undefined && free.lockFree === true) return (free.read(port - free.base, size) & ONES[size]) >>> 0;
    this.lock.lock();
    try {
      const dev = this.whole(port, size);
      if (dev !== undefined) return (dev.read(port - dev.base, size) & ONES[size]) >>> 0;
      if (this.unmapped(port, size)) {
        this.count(port);
        return ONES[size];
      }
      // Straddles devices or hits a byte-wide device: assemble it byte by byte.
      let v = 0;
      for (let i = 0; i < size; i++) v |= this.readByte(port + i) << (8 * i);
      return v >>> 0;
    } finally {
      this.lock.unlock();
    }
  }

  write(port: number, size: number, value: number): void {
    const free = this.whole(port, size);
    if (free !== undefined && free.lockFree === true) {
      free.write(port - free.base, size, (value & ONES[size]) >>> 0);
      return;
    }
    this.lock.lock();
    try {
      const dev = this.whole(port, size);
      if (dev !== undefined) {
        dev.write(port - dev.base, size, (value & ONES[size]) >>> 0);
      } else if (this.unmapped(port, size)) {
        this.count(port);
      } else {
        for (let i = 0; i < size; i++) this.writeByte(port + i, (value >>> (8 * i)) & 0xff);
      }
    } finally {
      this.lock.unlock();
    }
  }

  /** Runs `fn` under the bus lock (host-side work on device state, e.g. console input). */
  withLock<T>(fn: () => T): T {
    return this.lock.withLock(fn);
  }

  /** Unhandled accesses by port, plus those to ports that found the table full. */
  unhandledCounts(): { ports: UnhandledPort[]; overflow: number } {
    return this.lock.withLock(() => {
      const ports: UnhandledPort[] = [];
      const t = this.unhandled;
      for (let i = 0; i < UNHANDLED_SLOTS; i++) {
        if (t[2 * i] !== 0) ports.push({ port: t[2 * i] - 1, count: t[2 * i + 1] >>> 0 });
      }
      return { ports, overflow: t[2 * UNHANDLED_SLOTS] >>> 0 };
    });
  }

  // The device that takes this access whole, if one does.
  private whole(port: number, size: number): PortDevice | undefined {
    const idx = this.table[port];
    if (idx === 0) return undefined;
    const dev = this.devices[idx - 1];
    if ((size !== 1 && dev.byteWide) || port + size > dev.base + dev.length) return undefined;
    return dev;
  }

  private unmapped(port: number, size: number): boolean {
    for (let i = 0; i < size; i++) {
      const p = port + i;
      if (p < PORTS && this.table[p] !== 0) return false;
    }
    return true;
  }

  // Parts of a partly mapped access: unmapped bytes are not counted (the access was handled).
  private readByte(port: number): number {
    const idx = port < PORTS ? this.table[port] : 0;
    if (idx === 0) return 0xff;
    const dev = this.devices[idx - 1];
    return dev.read(port - dev.base, 1) & 0xff;
  }

  private writeByte(port: number, value: number): void {
    const idx = port < PORTS ? this.table[port] : 0;
    if (idx === 0) return;
    const dev = this.devices[idx - 1];
    dev.write(port - dev.base, 1, value);
  }

  private count(port: number): void {
    const t = this.unhandled;
    for (let i = 0; i < UNHANDLED_SLOTS; i++) {
      const key = t[2 * i];
      if (key === port + 1 || key === 0) {
        t[2 * i] = port + 1;
        t[2 * i + 1]++;
        return;
      }
    }
    t[2 * UNHANDLED_SLOTS]++;
  }
}
