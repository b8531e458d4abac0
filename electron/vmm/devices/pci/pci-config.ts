// One PCI function's 256-byte configuration space (type 0 header), as a pure state machine: the
// bytes live in shared memory (any thread's instance sees the same function), which bits a guest
// may write is a per-function mask derived from its description (identical on every thread).
// BARs are memory BARs (32-bit, non-prefetchable) of power-of-two sizes: writing all ones and
// reading back gives the size, as every PCI enumerator expects. Capabilities are laid out from
// 0x40 in the order given, each with the bytes its device fills and the bits it lets the guest
// write. Called under the bus lock.

export const PCI_CONFIG_BYTES = 256;
export const PCI_CONFIG_WORDS = PCI_CONFIG_BYTES / 4;

// Header offsets (PCI Local Bus 3.0, 6.1).
export const PCI_VENDOR_ID = 0x00;
export const PCI_DEVICE_ID = 0x02;
export const PCI_COMMAND = 0x04;
export const PCI_STATUS = 0x06;
export const PCI_REVISION = 0x08;
export const PCI_CLASS_PROG = 0x09;
export const PCI_CACHE_LINE_SIZE = 0x0c;
export const PCI_HEADER_TYPE = 0x0e;
export const PCI_BAR0 = 0x10;
export const PCI_SUBSYSTEM_VENDOR_ID = 0x2c;
export const PCI_SUBSYSTEM_ID = 0x2e;
export const PCI_CAPABILITY_LIST = 0x34;
export const PCI_INTERRUPT_LINE = 0x3c;
export const PCI_INTERRUPT_PIN = 0x3d;

export const PCI_COMMAND_MEMORY = 1 << 1;
export const PCI_COMMAND_MASTER = 1 << 2;
export const PCI_COMMAND_INTX_DISABLE = 1 << 10;
const PCI_STATUS_CAP_LIST = 1 << 4;
const CAPS_START = 0x40;

export interface PciBar {
  /** BAR number 0-5. */
  index: number;
  /** Bytes, a power of two >= 16 (a memory BAR). */
  size: number;
  /** Address the VMM assigns at reset (a guest may move it). */
  address: number;
}

export interface PciCapability {
  /** Capability ID (0x11 MSI-X, 0x09 vendor specific). */
  id: number;
  /** Bytes after the ID and next pointer (the device's body, as it reads at reset). */
  body: readonly number[];
  /** Writable bits of the body, byte by byte (absent: read-only). */
  writable?: readonly number[];
}

export interface PciFunctionDescription {
  vendorId: number;
  deviceId: number;
  revision: number;
  /** Class code, subclass, programming interface: 0xCCSSPP. */
  classCode: number;
  subsystemVendorId?: number;
  subsystemId?: number;
  bars?: readonly PciBar[];
  capabilities?: readonly PciCapability[];
}

/** A laid-out capability: where its ID byte sits in configuration space. */
export interface PlacedCapability {
  id: number;
  offset: number;
  length: number;
}

export class PciConfig {
  /** The 256 bytes, shared (a view over the device SAB). */
  readonly bytes: Uint8Array;
  readonly description: PciFunctionDescription;
  readonly capabilities: readonly PlacedCapability[];
  private readonly wmask = new Uint8Array(PCI_CONFIG_BYTES);
  /** BAR index -> size (0 = not implemented). */
  private readonly barSizes = new Array<number>(6).fill(0);

  constructor(bytes: Uint8Array, description: PciFunctionDescription) {
    if (bytes.length !== PCI_CONFIG_BYTES) throw new RangeError('PCI configuration space is 256 bytes');
    this.bytes = bytes;
    this.description = description;
    // Command: memory space, bus master, INTx disable are the guest's to set.
    const command = PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER | PCI_COMMAND_INTX_DISABLE;
    this.wmask[PCI_COMMAND] = command & 0xff;
    this.wmask[PCI_COMMAND + 1] = command >>> 8;
    this.wmask[PCI_INTERRUPT_LINE] = 0xff; // scratch for the OS
    // Cache line size and latency timer: stored and read back, as an OS that sets them expects.
    this.wmask[PCI_CACHE_LINE_SIZE] = 0xff;
    this.wmask[PCI_CACHE_LINE_SIZE + 1] = 0xff;
    for (const bar of description.bars ?? []) {
      if (bar.index < 0 || bar.index > 5 || bar.size < 16 || (bar.size & (bar.size - 1)) !== 0) {
        throw new RangeError(`bad BAR ${bar.index} of ${bar.size} bytes`);
      }
      this.barSizes[bar.index] = bar.size;
      const mask = ~(bar.size - 1) >>> 0;
      for (let i = 0; i < 4; i++) this.wmask[PCI_BAR0 + 4 * bar.index + i] = (mask >>> (8 * i)) & (i === 0 ? 0xf0 : 0xff);
    }
    const placed: PlacedCapability[] = [];
    let at = CAPS_START;
    for (const cap of description.capabilities ?? []) {
      const length = 2 + cap.body.length;
      if (at + length > PCI_CONFIG_BYTES) throw new RangeError('PCI capabilities do not fit in configuration space');
      placed.push({ id: cap.id, offset: at, length });
      cap.writable?.forEach((m, i) => { this.wmask[at + 2 + i] = m; });
      at = (at + length + 3) & ~3;
    }
    this.capabilities = placed;
  }

  /** Writes the function's reset state into its shared bytes (once, when the VM is built). */
  reset(): void {
    const d = this.description;
    const b = this.bytes;
    b.fill(0);
    this.put(PCI_VENDOR_ID, 2, d.vendorId);
    this.put(PCI_DEVICE_ID, 2, d.deviceId);
    this.put(PCI_REVISION, 1, d.revision);
    this.put(PCI_CLASS_PROG, 1, d.classCode & 0xff);
    this.put(PCI_CLASS_PROG + 1, 2, d.classCode >>> 8);
    this.put(PCI_HEADER_TYPE, 1, 0); // type 0, single function
    this.put(PCI_SUBSYSTEM_VENDOR_ID, 2, d.subsystemVendorId ?? 0);
    this.put(PCI_SUBSYSTEM_ID, 2, d.subsystemId ?? 0);
    this.put(PCI_INTERRUPT_PIN, 1, 0); // no INTx: MSI-X only
    for (const bar of d.bars ?? []) this.put(PCI_BAR0 + 4 * bar.index, 4, bar.address & ~(bar.size - 1));
    const caps = d.capabilities ?? [];
    if (caps.length) {
      this.put(PCI_STATUS, 2, PCI_STATUS_CAP_LIST);
      this.put(PCI_CAPABILITY_LIST, 1, this.capabilities[0]!.offset);
    }
    caps.forEach((cap, i) => {
      const at = this.capabilities[i]!.offset;
      b[at] = cap.id;
      b[at + 1] = i + 1 < caps.length ? this.capabilities[i + 1]!.offset : 0;
      b.set(cap.body, at + 2);
    });
  }

  /** `size` 1, 2 or 4 at `offset` (the host bridge keeps accesses inside one dword). */
  read(offset: number, size: number): number {
    let v = 0;
    for (let i = 0; i < size; i++) v |= (offset + i < PCI_CONFIG_BYTES ? this.bytes[offset + i]! : 0xff) << (8 * i);
    return v >>> 0;
  }

  /** Stores the writable bits; returns whether any byte changed (the device may react). */
  write(offset: number, size: number, value: number): boolean {
    let changed = false;
    for (let i = 0; i < size; i++) {
      const at = offset + i;
      if (at >= PCI_CONFIG_BYTES) break;
      const m = this.wmask[at]!;
      if (m === 0) continue;
      const old = this.bytes[at]!;
      const next = (old & ~m) | (((value >>> (8 * i)) & 0xff) & m);
      if (next !== old) {
        this.bytes[at] = next;
        changed = true;
      }
    }
    return changed;
  }

  get command(): number {
    return this.read(PCI_COMMAND, 2);
  }

  get memoryEnabled(): boolean {
    return (this.command & PCI_COMMAND_MEMORY) !== 0;
  }

  get busMaster(): boolean {
    return (this.command & PCI_COMMAND_MASTER) !== 0;
  }

  /** The BAR's current base address (0 when the BAR does not exist). */
  barAddress(index: number): number {
    if (this.barSizes[index] === 0) return 0;
    return (this.read(PCI_BAR0 + 4 * index, 4) & ~0xf) >>> 0;
  }

  barSize(index: number): number {
    return this.barSizes[index] ?? 0;
  }

  /**
   * Which decoded BAR holds `address` (memory decoding on, the BAR not mid-sizing), or -1. A BAR
   * left at all ones (being sized) or at 0 decodes nothing.
   */
  barAt(address: number): number {
    if (!this.memoryEnabled) return -1;
    for (let i = 0; i < 6; i++) {
      const size = this.barSizes[i]!;
      if (size === 0) continue;
      const base = this.barAddress(i);
      if (base === 0 || base + size >= 0x1_0000_0000) continue;
      if (address >= base && address < base + size) return i;
    }
    return -1;
  }

  private put(offset: number, size: number, value: number): void {
    for (let i = 0; i < size; i++) this.bytes[offset + i] = (value >>> (8 * i)) & 0xff;
  }
}
