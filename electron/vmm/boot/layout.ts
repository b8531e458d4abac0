// Where the VMM puts boot structures in guest-physical memory (docs/guest-contract.md).
export const LAYOUT = {
  /** Boot GDT: null, null, code32 (0x10), data32 (0x18), TSS (0x20), code64 (0x28). */
  gdt: 0x500,
  /** Long-mode identity page tables for the Linux boot protocol (PML4, PDPT, 4 page directories). */
  pml4: 0x9000,
  /** PVH hvm_start_info, its module list and memory map. */
  startInfo: 0x6000,
  modList: 0x6040,
  memMap: 0x7000,
  memMapMaxEntries: 128,
  /** Linux zero page (boot_params) for the bzImage path. */
  zeroPage: 0x7000 + 128 * 24,
  cmdline: 0x20000,
  cmdlineMax: 4096,
  /** End of what boot structures may use below the EBDA. */
  lowEnd: 0x9fc00,
  /** ACPI tables; the RSDP is also found by the legacy scan of 0xE0000-0xFFFFF. */
  acpi: 0xe0000,
  acpiEnd: 0x100000,
  /** Kernels load at or above 1 MiB. */
  kernelMin: 0x100000,
  /** Three pages KVM needs for the real-mode TSS on Intel without unrestricted guest, and one for the identity map. */
  tssAddr: 0xfffbd000,
  identityMap: 0xfffbc000,
  lapic: 0xfee00000,
  ioapic: 0xfec00000,
} as const;

export const E820_RAM = 1;
export const E820_RESERVED = 2;

export interface E820Entry {
  addr: number;
  size: number;
  type: number;
}
