// QEMU's firmware configuration device (fw_cfg), its legacy I/O interface only, as QEMU's x86
// machines place it (unhalt-1.2 and later; docs/guest-contract.md):
//   0x510: a 16-bit write selects an item (little endian) and rewinds its read offset to 0
//   0x511: each byte read returns the next byte of the selected item (0 past its end)
// As QEMU's combined region, any byte read of 0x510-0x511 is a data read, a byte write is a data
// write (ignored: QEMU dropped write support in 2.4) and a 16-bit write at either port selects.
// Other accesses are invalid there; reads of them give 0 and nothing moves. An item the board does
// not have (or an arch-local 0x8000+ one: this board has none) reads as all zeros, as in QEMU.
// No DMA interface: FW_CFG_ID has bit 0 (the traditional interface) only.
// State (the selected key and the offset) lives in shared words, so any thread's instance works;
// the items themselves are constants every thread builds from the same BoardConfig.

export const FW_CFG_PORT = 0x510;
export const FW_CFG_LENGTH = 2;
export const FW_CFG_STATE_WORDS = 2;

export const FW_CFG = Object.freeze({
  signature: 0x00,
  id: 0x01,
  ramSize: 0x03,
  nbCpus: 0x05,
  maxCpus: 0x0f,
  fileDir: 0x19,
});

/** FW_CFG_ID: bit 0, the traditional I/O interface; bit 1 (DMA) is not offered. */
export const FW_CFG_VERSION = 1;

// The key's bit 14 (write channel) and bit 15 (arch-local table) are not part of the index (QEMU's
// FW_CFG_ENTRY_MASK); an arch-local key indexes a second table, which this board leaves empty.
const ENTRY_MASK = 0x3fff;
const ARCH_LOCAL = 0x8000;

const KEY = 0; // state word indices
const OFFSET = 1;

/** What the items describe: the VM's vCPUs and guest RAM. */
export interface FwCfgMachine {
  cpus: number;
  ramBytes: number;
}

/** The items this board's fw_cfg carries, by key (the same bytes QEMU's x86 machines give). */
export function fwCfgItems(m: FwCfgMachine): Map<number, Uint8Array> {
  // An unsigned little-endian integer of `bytes` bytes (QEMU's fw_cfg_add_i16/i32/i64).
  const u = (bytes: number, v: number): Uint8Array => {
    const out = new Uint8Array(8);
    new DataView(out.buffer).setBigUint64(0, BigInt(v), true);
    return out.slice(0, bytes);
  };
  return new Map([
    [FW_CFG.signature, new Uint8Array([0x51, 0x45, 0x4d, 0x55])], // "QEMU"
    [FW_CFG.id, u(4, FW_CFG_VERSION)],
    [FW_CFG.ramSize, u(8, m.ramBytes)],
    [FW_CFG.nbCpus, u(2, m.cpus)],
    // QEMU's x86 gives the APIC ID limit here; ours are 0..cpus-1, so it is the vCPU count.
    [FW_CFG.maxCpus, u(2, m.cpus)],
    // The file directory: a big-endian count (0) and no entries.
    [FW_CFG.fileDir, new Uint8Array(4)],
  ]);
}

export class FwCfg {
  private readonly s: Int32Array;
  private readonly items: ReadonlyMap<number, Uint8Array>;

  constructor(state: Int32Array, items: ReadonlyMap<number, Uint8Array>) {
    this.s = state;
    this.items = items;
  }

  /** Power-on state: FW_CFG_SIGNATURE selected, offset 0 (QEMU's reset). */
  static initState(state: Int32Array): void {
    state[KEY] = FW_CFG.signature;
    state[OFFSET] = 0;
  }

  /** `offset` from 0x510; a byte read is the next data byte, anything wider reads 0. */
  read(_offset: number, size: number): number {
    if (size !== 1) return 0;
    const item = this.selected();
    const at = this.s[OFFSET]!;
    if (!item || at >= item.length) return 0;
    this.s[OFFSET] = at + 1;
    return item[at]!;
  }

  write(_offset: number, size: number, value: number): void {
    if (size !== 2) return; // a byte is a data write (ignored); 32 bits are invalid
    this.s[KEY] = value & 0xffff;
    this.s[OFFSET] = 0;
  }

  private selected(): Uint8Array | undefined {
    const key = this.s[KEY]!;
    return key & ARCH_LOCAL ? undefined : this.items.get(key & ENTRY_MASK);
  }
}
