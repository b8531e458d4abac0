// QEMU's pc-testdev (hw/misc/pc-testdev.c), which kvm-unit-tests' own runner adds to every test:
//   0xe0-0xe3   a 32-bit scratch register, read and written at any width and offset within it
//               (the emulator test's string I/O: `rep outsb` then `inb`);
//   0xe4-0xe7   "flush page": QEMU mprotects the page a write names, so KVM drops its mapping and
//               the guest's next access faults into KVM (eventinj's "NP exception" path); here a
//               no-op, so that path is not taken (docs/kvm-unit-tests.md);
//   0xe8-0xeb   the same register, byte by byte (the bus hands wider accesses over a byte at a time);
//   0x2000+N    a write of V drives ISA IRQ line N (0-23) to V != 0 through the in-kernel irqchip
//               (the ioapic test's set_irq_line), on every write as QEMU's qemu_set_irq does;
//   0xff000000  64 KiB of RAM-like MMIO: what is written there reads back (every access an exit).
// Its state (the register and the 64 KiB) sits in the device SAB, so every vCPU thread sees one device.

export const PC_TESTDEV_SCRATCH_PORT = 0xe0;
export const PC_TESTDEV_FLUSH_PORT = 0xe4;
export const PC_TESTDEV_SCRATCH_BYTE_PORT = 0xe8;
export const PC_TESTDEV_IRQ_PORT = 0x2000;
/** ISA IRQ lines the guest may drive (the I/O APIC's pins). */
export const PC_TESTDEV_IRQ_LINES = 24;
export const PC_TESTDEV_MMIO_BASE = 0xff000000;
export const PC_TESTDEV_MMIO_SIZE = 0x10000;
/** The scratch register, then the MMIO window's bytes. */
export const PC_TESTDEV_STATE_WORDS = 1 + PC_TESTDEV_MMIO_SIZE / 4;

export interface PcTestdevIo {
  setIrq(line: number, level: boolean): void;
}

const MASK = [0, 0xff, 0xffff, 0xffffff, 0xffffffff];

export class PcTestdev {
  private readonly state: Int32Array;
  private readonly mem: Uint8Array;
  private readonly io: PcTestdevIo;

  /** `state`: PC_TESTDEV_STATE_WORDS words of the device SAB (zeroed at power-on). */
  constructor(state: Int32Array, io: PcTestdevIo) {
    if (state.length < PC_TESTDEV_STATE_WORDS) throw new RangeError('pc-testdev state too small');
    this.state = state;
    this.mem = new Uint8Array(state.buffer, state.byteOffset + 4, PC_TESTDEV_MMIO_SIZE);
    this.io = io;
  }

  /** The scratch register's `size` bytes at byte `offset` (0-3). */
  readScratch(offset: number, size: number): number {
    const shift = (offset & 3) * 8;
    return ((Atomics.load(this.state, 0) >>> shift) & MASK[size]!) >>> 0;
  }

  writeScratch(offset: number, size: number, value: number): void {
    const shift = (offset & 3) * 8;
    const mask = (MASK[size]! << shift) >>> 0;
    const old = Atomics.load(this.state, 0);
    Atomics.store(this.state, 0, ((old & ~mask) | ((value << shift) & mask)) | 0);
  }

  /** A write to port 0x2000 + `line`. */
  writeIrqLine(line: number, value: number): void {
    if (line < PC_TESTDEV_IRQ_LINES) this.io.setIrq(line, value !== 0);
  }

  /** An MMIO read at `address` (inside the window) of `size` bytes into `data`; past its end reads all ones. */
  mmioRead(address: number, data: Uint8Array, size: number): void {
    const at = address - PC_TESTDEV_MMIO_BASE;
    for (let i = 0; i < size; i++) data[i] = at + i < PC_TESTDEV_MMIO_SIZE ? this.mem[at + i]! : 0xff;
  }

  mmioWrite(address: number, data: Uint8Array, size: number): void {
    const at = address - PC_TESTDEV_MMIO_BASE;
    for (let i = 0; i < size && at + i < PC_TESTDEV_MMIO_SIZE; i++) this.mem[at + i] = data[i]!;
  }

  /** Whether `address` is in the MMIO window. */
  static inWindow(address: number): boolean {
    return address >= PC_TESTDEV_MMIO_BASE && address < PC_TESTDEV_MMIO_BASE + PC_TESTDEV_MMIO_SIZE;
  }
}
