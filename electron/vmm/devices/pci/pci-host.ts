// PCI configuration mechanism #1 (PCI Local Bus 3.0, 3.2.2.3.2) on ports 0xCF8 (CONFIG_ADDRESS)
// and 0xCFC-0xCFF (CONFIG_DATA), bus 0 only, and the memory BARs of the functions on it: which
// function answers a configuration access, and which BAR a guest-physical MMIO access outside
// RAM hits. A pure state machine: CONFIG_ADDRESS is one shared word, every function's
// configuration space is its own shared bytes (pci-config.ts), and every access comes in under
// the bus lock (port-bus.ts for the ports; the vCPU worker's MMIO path for BARs).
//
// CONFIG_ADDRESS decodes only 32-bit accesses (as on real chipsets: Linux's type-1 probe writes
// a byte to 0xCFB and expects it not to land there); bit 31 enables, bits 23:16 bus, 15:11
// device, 10:8 function, 7:2 register. A read of an absent function gives all ones.
import { readAllOnes } from '../floating-bus.ts';
import { PciConfig, type PciFunctionDescription } from './pci-config.ts';

export const PCI_CONFIG_ADDRESS_PORT = 0xcf8;
export const PCI_CONFIG_DATA_PORT = 0xcfc;
/** Device slots on bus 0 (function 0 of each; no multi-function devices). */
export const PCI_SLOTS = 32;
export const PCI_HOST_STATE_WORDS = 1;

const ENABLE = 0x80000000;
const ONES = [0, 0xff, 0xffff, 0, 0xffffffff];

/** One function as the bus sees it: its configuration space and its BARs' registers. */
export interface PciFunction {
  readonly config: PciConfig;
  /** After a configuration write that changed a byte (BAR moved, decoding toggled, MSI-X enabled). */
  configChanged?(offset: number, size: number): void;
  /** An access of `size` bytes at `offset` into BAR `bar`; `data[0..size)` little endian. */
  mmioRead(bar: number, offset: number, data: Uint8Array, size: number): void;
  mmioWrite(bar: number, offset: number, data: Uint8Array, size: number): void;
}

/** The host bridge at 00:00.0: a function with no BARs (QEMU's PCIe host bridge IDs; Linux needs no driver). */
export const HOST_BRIDGE: PciFunctionDescription = Object.freeze({
  vendorId: 0x1b36,
  deviceId: 0x0008,
  revision: 0,
  classCode: 0x060000, // bridge, host bridge
});

export class HostBridge implements PciFunction {
  readonly config: PciConfig;
  constructor(bytes: Uint8Array) {
    this.config = new PciConfig(bytes, HOST_BRIDGE);
  }
  mmioRead(_bar: number, _offset: number, data: Uint8Array, size: number): void { readAllOnes(data, size); }
  mmioWrite(): void {}
}

export class PciHost {
  private readonly state: Int32Array;
  private readonly slots: (PciFunction | undefined)[];
  private readonly present: PciFunction[];
  /** Where target() found the last address: the BAR and the offset in it. */
  private targetBar = 0;
  private targetOffset = 0;

  /** `state`: PCI_HOST_STATE_WORDS shared words; `slots[n]` is device n's function 0. */
  constructor(state: Int32Array, slots: readonly (PciFunction | undefined)[]) {
    if (slots.length > PCI_SLOTS) throw new RangeError(`bus 0 has ${PCI_SLOTS} slots`);
    this.state = state;
    this.slots = [...slots];
    this.present = this.slots.filter((f): f is PciFunction => f !== undefined);
  }

  /** Ports 0xCF8-0xCFB. */
  readAddress(offset: number, size: number): number {
    if (offset !== 0 || size !== 4) return ONES[size]!;
    return this.state[0]! >>> 0;
  }

  writeAddress(offset: number, size: number, value: number): void {
    if (offset !== 0 || size !== 4) return;
    this.state[0] = (value & 0x80fffffc) | 0; // reserved bits 30:24 and 1:0 read as 0
  }

  /** Ports 0xCFC-0xCFF: the selected register's bytes `offset .. offset + size`. */
  readData(offset: number, size: number): number {
    const fn = this.selected();
    if (!fn) return ONES[size]!;
    const reg = (this.state[0]! & 0xfc) + offset;
    return fn.config.read(reg, Math.min(size, 4 - offset));
  }

  writeData(offset: number, size: number, value: number): void {
    const fn = this.selected();
    if (!fn) return;
    const reg = (this.state[0]! & 0xfc) + offset;
    const n = Math.min(size, 4 - offset);
    if (fn.config.write(reg, n, value)) fn.configChanged?.(reg, n);
  }

  /**
   * The function whose decoded BAR holds `address`, or undefined (nobody answers); the BAR and
   * the offset in it are left in targetBar / targetOffset. No object per access: every MMIO exit
   * outside RAM comes through here.
   */
  private target(address: number): PciFunction | undefined {
    for (const fn of this.present) {
      const bar = fn.config.barAt(address);
      if (bar >= 0) {
        this.targetBar = bar;
        this.targetOffset = address - fn.config.barAddress(bar);
        return fn;
      }
    }
    return undefined;
  }

  /** Reads of `size` bytes at `address`: a BAR's registers, else all ones (as on an empty bus). */
  mmioRead(address: number, data: Uint8Array, size: number): boolean {
    const fn = this.target(address);
    if (!fn) return false;
    fn.mmioRead(this.targetBar, this.targetOffset, data, size);
    return true;
  }

  mmioWrite(address: number, data: Uint8Array, size: number): boolean {
    const fn = this.target(address);
    if (!fn) return false;
    fn.mmioWrite(this.targetBar, this.targetOffset, data, size);
    return true;
  }

  private selected(): PciFunction | undefined {
    const a = this.state[0]! >>> 0;
    if ((a & ENABLE) === 0) return undefined;
    const bus = (a >>> 16) & 0xff;
    const dev = (a >>> 11) & 0x1f;
    const fn = (a >>> 8) & 0x7;
    if (bus !== 0 || fn !== 0) return undefined;
    return this.slots[dev];
  }
}
