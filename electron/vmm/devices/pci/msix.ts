// An MSI-X table and pending-bit array (PCI Local Bus 3.0, 6.8.2) in shared memory: one 16-byte
// entry per vector (message address low/high, data, vector control), and one pending bit per
// vector set while the vector or the whole function is masked. Whichever thread raises a vector
// (the I/O thread for a used buffer, a vCPU worker for an unmask that finds a pending bit)
// delivers it with its own `signal` (KVM_SIGNAL_MSI). Called under the bus lock.

export const MSIX_ENTRY_BYTES = 16;
/** Most vectors a table holds here (the pending bits are one shared word). */
export const MSIX_MAX_VECTORS = 32;
export const MSIX_CAP_ID = 0x11;
const CTRL_ENABLE = 0x8000;
const CTRL_FUNCTION_MASK = 0x4000;
const VECTOR_MASKED = 1;

export interface MsixIo {
  /** Deliver one message (address, data): KVM_SIGNAL_MSI. */
  signal(address: number, data: number): void;
}

export class MsixTable {
  readonly vectors: number;
  private readonly table: Uint8Array;
  private readonly view: DataView;
  private readonly pending: Int32Array;
  /** Message control, read from the capability in configuration space. */
  private readonly control: () => number;
  private readonly io: MsixIo;

  /** `table`: vectors * 16 shared bytes; `pending`: one shared word. */
  constructor(table: Uint8Array, pending: Int32Array, control: () => number, io: MsixIo) {
    if (table.length % MSIX_ENTRY_BYTES !== 0 || table.length / MSIX_ENTRY_BYTES > MSIX_MAX_VECTORS) throw new RangeError('bad MSI-X table');
    this.vectors = table.length / MSIX_ENTRY_BYTES;
    this.table = table;
    this.view = new DataView(table.buffer, table.byteOffset, table.length);
    this.pending = pending;
    this.control = control;
    this.io = io;
  }

  /** The capability body a PciConfig lays out (message control, table and PBA offset/BIR). */
  static capability(vectors: number, bar: number, tableOffset: number, pbaOffset: number): { id: number; body: number[]; writable: number[] } {
    const le32 = (v: number) => [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24];
    return {
      id: MSIX_CAP_ID,
      body: [(vectors - 1) & 0xff, (vectors - 1) >>> 8, ...le32(tableOffset | bar), ...le32(pbaOffset | bar)],
      writable: [0, (CTRL_ENABLE | CTRL_FUNCTION_MASK) >>> 8, 0, 0, 0, 0, 0, 0, 0, 0],
    };
  }

  /** Reset state: every vector masked, nothing pending. */
  reset(): void {
    this.table.fill(0);
    for (let v = 0; v < this.vectors; v++) this.view.setUint32(v * MSIX_ENTRY_BYTES + 12, VECTOR_MASKED, true);
    this.pending[0] = 0;
  }

  get enabled(): boolean {
    return (this.control() & CTRL_ENABLE) !== 0;
  }

  /** Table accesses: 4- or 8-byte aligned (the spec's rule); anything else reads 0 / is dropped. */
  readTable(offset: number, data: Uint8Array, size: number): void {
    data.fill(0, 0, size);
    if ((size !== 4 && size !== 8) || offset % size !== 0 || offset + size > this.table.length) return;
    data.set(this.table.subarray(offset, offset + size));
  }

  writeTable(offset: number, data: Uint8Array, size: number): void {
    if ((size !== 4 && size !== 8) || offset % size !== 0 || offset + size > this.table.length) return;
    this.table.set(data.subarray(0, size), offset);
    this.deliverPending();
  }

  /** The pending-bit array: 8 bytes here (up to 32 vectors in its low word), read-only. */
  readPba(offset: number, data: Uint8Array, size: number): void {
    for (let i = 0; i < size; i++) data[i] = offset + i < 4 ? (this.pending[0]! >>> (8 * (offset + i))) & 0xff : 0;
  }

  /** Raises `vector`: delivered now, or left pending while masked. Returns whether it was delivered. */
  raise(vector: number): boolean {
    if (vector >= this.vectors || !this.enabled) return false;
    if (this.masked(vector)) {
      this.pending[0] = this.pending[0]! | (1 << vector);
      return false;
    }
    this.deliver(vector);
    return true;
  }

  /** After the function mask or enable bit changed, or an entry was unmasked: send what was pending. */
  deliverPending(): void {
    const p = this.pending[0]!;
    if (p === 0 || !this.enabled) return;
    for (let v = 0; v < this.vectors; v++) {
      if ((p & (1 << v)) !== 0 && !this.masked(v)) {
        this.pending[0] = this.pending[0]! & ~(1 << v);
        this.deliver(v);
      }
    }
  }

  private masked(vector: number): boolean {
    return (this.control() & CTRL_FUNCTION_MASK) !== 0 || (this.view.getUint32(vector * MSIX_ENTRY_BYTES + 12, true) & VECTOR_MASKED) !== 0;
  }

  private deliver(vector: number): void {
    const o = vector * MSIX_ENTRY_BYTES;
    const address = this.view.getUint32(o, true) + this.view.getUint32(o + 4, true) * 0x1_0000_0000;
    this.io.signal(address, this.view.getUint32(o + 8, true));
  }
}
