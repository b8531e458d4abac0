// The driver's side that the virtio fuzz files share (virtqueue-fuzz, virtio-net-fuzz): one
// device's registers on the real board (MMIO, little-endian), and guest RAM written together with
// the driver's own copy of it (`shadow`), so that after the device ran, any byte it changed can
// be told from one the driver wrote.
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';

interface Mmio {
  read(address: number, data: Uint8Array, size: number): void;
  write(address: number, data: Uint8Array, size: number): void;
}

export abstract class FuzzDriver {
  readonly sab: SharedArrayBuffer;
  readonly ram: Uint8Array;
  readonly ramBuf: Buffer;
  readonly shadow: Uint8Array;
  readonly shadowBuf: Buffer;
  protected readonly dvR: DataView;
  readonly dvS: DataView;
  readonly guestRam: GuestRam;
  readonly ramSize: number;
  private readonly data = new Uint8Array(8);
  /** The board the device is on (the subclass attaches it). */
  protected abstract readonly b: { mmio: Mmio };

  /** `size` bytes of guest RAM at guest-physical 0, both copies filled with `background`. */
  constructor(ramSize: number, background: Uint8Array) {
    this.ramSize = ramSize;
    this.sab = new SharedArrayBuffer(ramSize);
    this.ram = new Uint8Array(this.sab);
    this.ramBuf = Buffer.from(this.sab);
    this.shadow = new Uint8Array(ramSize);
    this.shadowBuf = Buffer.from(this.shadow.buffer);
    this.dvR = new DataView(this.sab);
    this.dvS = new DataView(this.shadow.buffer);
    this.guestRam = new GuestRam(this.ram, [{ guestPhysAddr: 0, size: ramSize, offset: 0 }]);
    this.ram.set(background);
    this.shadow.set(background);
  }

  /** A register write of `size` bytes. */
  w(addr: number, size: number, v: number): void {
    const data = this.data;
    for (let i = 0; i < size; i++) data[i] = (v >>> (8 * i)) & 0xff;
    this.b.mmio.write(addr, data, size);
  }

  /** A register read of `size` bytes. */
  r(addr: number, size: number): number {
    const data = this.data;
    this.b.mmio.read(addr, data, size);
    let v = 0;
    for (let i = 0; i < size; i++) v |= data[i]! << (8 * i);
    return v >>> 0;
  }

  // --- the driver's writes: guest RAM and its copy alike (nothing outside RAM) --------------------
  put16(at: number, v: number): void {
    if (at < 0 || at + 2 > this.ramSize) return;
    this.dvR.setUint16(at, v, true);
    this.dvS.setUint16(at, v, true);
  }

  put32(at: number, v: number): void {
    if (at < 0 || at + 4 > this.ramSize) return;
    this.dvR.setUint32(at, v, true);
    this.dvS.setUint32(at, v, true);
  }

  /** A descriptor at `at` (addresses up to 2^64 as two halves); none where it would not fit in RAM. */
  putDesc(at: number, addr: number, len: number, flags: number, next: number, addrHi = Math.floor(addr / 2 ** 32)): void {
    if (at < 0 || at + 16 > this.ramSize) return;
    this.put32(at, addr % 2 ** 32);
    this.put32(at + 4, addrHi);
    this.put32(at + 8, len);
    this.put16(at + 12, flags);
    this.put16(at + 14, next);
  }
}
