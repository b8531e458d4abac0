// The PVH boot protocol (Xen's, also used by QEMU, Firecracker and Cloud Hypervisor): copy an
// ELF's PT_LOAD segments to their physical addresses, enter 32-bit protected mode with paging
// off at the XEN_ELFNOTE_PHYS32_ENTRY address, with ebx pointing at hvm_start_info.
import type { GuestMemory } from '../memory/guest-memory.ts';
import { type ElfFile, PT_LOAD, parseElf } from './elf.ts';
import { type E820Entry, LAYOUT } from './layout.ts';
import type { BootPlan } from './boot-plan.ts';

export const XEN_ELFNOTE_PHYS32_ENTRY = 18;
export const HVM_START_MAGIC = 0x336ec578;

/** The PVH entry point of an ELF, or undefined when it has no PVH note. */
export function pvhEntry(elf: ElfFile): number | undefined {
  const note = elf.notes.find((n) => n.name === 'Xen' && n.type === XEN_ELFNOTE_PHYS32_ENTRY);
  if (!note || note.desc.length < 4) return undefined;
  const v = new DataView(note.desc.buffer, note.desc.byteOffset, note.desc.byteLength);
  return note.desc.length >= 8 ? Number(v.getBigUint64(0, true)) : v.getUint32(0, true);
}

export interface PvhInput {
  kernel: Uint8Array;
  initrd?: Uint8Array;
  cmdline: string;
  rsdpAddress: number;
  e820: readonly E820Entry[];
}

/** Loads a PVH ELF and writes hvm_start_info. Returns where and how the BSP starts. */
export function loadPvh(mem: GuestMemory, input: PvhInput): BootPlan {
  const elf = parseElf(input.kernel);
  const entry = pvhEntry(elf);
  if (entry === undefined) {
    throw new Error('kernel is an ELF file without a XEN_ELFNOTE_PHYS32_ENTRY note: not a PVH kernel '
      + '(build Linux with CONFIG_PVH=y, or use a bzImage)');
  }
  let kernelEnd = 0;
  for (const seg of elf.segments) {
    if (seg.type !== PT_LOAD || seg.memsz === 0) continue;
    if (seg.paddr < LAYOUT.kernelMin) {
      throw new Error(`kernel segment at 0x${seg.paddr.toString(16)} is below 1 MiB, where boot structures live`);
    }
    if (seg.filesz > seg.memsz) throw new Error('kernel has a segment whose file size exceeds its memory size');
    try {
      mem.write(seg.paddr, input.kernel.subarray(seg.offset, seg.offset + seg.filesz));
      mem.fill(seg.paddr + seg.filesz, seg.memsz - seg.filesz);
    } catch {
      throw new Error(`kernel segment 0x${seg.paddr.toString(16)}+0x${seg.memsz.toString(16)} does not fit in guest RAM `
        + `(${mem.size / 1048576} MiB): give the VM more memory`);
    }
    kernelEnd = Math.max(kernelEnd, seg.paddr + seg.memsz);
  }
  if (kernelEnd === 0) throw new Error('kernel ELF has no loadable segments');

  writeCmdline(mem, input.cmdline);

  const si = LAYOUT.startInfo;
  mem.fill(si, 0x40 + 0x20);
  mem.writeU32(si, HVM_START_MAGIC);
  mem.writeU32(si + 4, 1); // version 1: has memmap
  mem.writeU32(si + 8, 0); // flags
  if (input.initrd && input.initrd.length > 0) {
    const initrdAddr = placeInitrd(mem, input.initrd.length, kernelEnd);
    mem.write(initrdAddr, input.initrd);
    mem.writeU32(si + 12, 1);
    mem.writeU64(si + 16, LAYOUT.modList);
    mem.writeU64(LAYOUT.modList, initrdAddr);
    mem.writeU64(LAYOUT.modList + 8, input.initrd.length);
  }
  mem.writeU64(si + 24, LAYOUT.cmdline);
  mem.writeU64(si + 32, input.rsdpAddress);
  if (input.e820.length > LAYOUT.memMapMaxEntries) throw new Error('too many memory map entries');
  input.e820.forEach((e, i) => {
    const o = LAYOUT.memMap + i * 24;
    mem.writeU64(o, e.addr);
    mem.writeU64(o + 8, e.size);
    mem.writeU32(o + 16, e.type);
    mem.writeU32(o + 20, 0);
  });
  mem.writeU64(si + 40, LAYOUT.memMap);
  mem.writeU32(si + 48, input.e820.length);
  return { protocol: 'pvh', mode: 'protected32', entry, rbx: LAYOUT.startInfo, rsi: 0 };
}

/** The command line at LAYOUT.cmdline, NUL-padded (PVH and multiboot: the same place and limit). */
export function writeCmdline(mem: GuestMemory, cmdline: string): void {
  const bytes = new TextEncoder().encode(cmdline);
  if (bytes.length >= LAYOUT.cmdlineMax) throw new Error(`command line is ${bytes.length} bytes; at most ${LAYOUT.cmdlineMax - 1} fit`);
  mem.fill(LAYOUT.cmdline, LAYOUT.cmdlineMax);
  mem.write(LAYOUT.cmdline, bytes);
}

/**
 * Initrds go at the top of low RAM (page aligned), like QEMU and Firecracker do, so they never
 * collide with a kernel that decompresses upwards.
 */
export function placeInitrd(mem: GuestMemory, size: number, kernelEnd: number, maxAddr = Infinity): number {
  const top = Math.min(mem.lowMemoryEnd, maxAddr + 1);
  const addr = Math.floor((top - size) / 4096) * 4096;
  if (size <= 0 || addr < kernelEnd) {
    throw new Error(`initrd of ${(size / 1048576).toFixed(1)} MiB does not fit in guest memory above the kernel `
      + `(${(mem.size / 1048576).toFixed(0)} MiB): give the VM more memory`);
  }
  return addr;
}
