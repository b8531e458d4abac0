// Multiboot (v1), booted as QEMU's -kernel boots it: the header in the file's first 8 KiB says
// how to load it (an ELF32's segments, or the header's own address fields when flag 16 is set);
// the boot CPU enters 32-bit protected mode, paging off, with EAX 0x2BADB002 and EBX the info
// block. kvm-unit-tests' x86 tests are such kernels. Our blocks sit in low RAM above page 0,
// which those tests take for their SIPI trampoline.
import type { GuestMemory } from '../memory/guest-memory.ts';
import type { BootPlan } from './boot-plan.ts';
import { EM_386, isElf, parseElf, PT_LOAD } from './elf.ts';
import { type E820Entry, LAYOUT } from './layout.ts';
import { placeInitrd, writeCmdline } from './pvh.ts';

export const MULTIBOOT_HEADER_MAGIC = 0x1badb002;
export const MULTIBOOT_BOOTLOADER_MAGIC = 0x2badb002;
/** The header must start, 4-byte aligned, within the file's first 8 KiB. */
const SEARCH_BYTES = 8192;
const HEADER_BYTES = 12;
const ADDRESS_FIELDS_BYTES = 20;

/** Header flags, bits 0-15 being requirements a loader must meet or refuse. */
const FLAG_PAGE_ALIGN_MODULES = 1 << 0;
const FLAG_MEMORY_INFO = 1 << 1;
const FLAG_VIDEO_MODE = 1 << 2;
export const MULTIBOOT_ADDRESS_FIELDS = 1 << 16;
/** What we meet: modules page-aligned, the memory fields; a video mode is ignored, as QEMU does. */
const REQUIREMENTS_MET = FLAG_PAGE_ALIGN_MODULES | FLAG_MEMORY_INFO | FLAG_VIDEO_MODE;

/** Info block flags: which of its fields are valid. */
const INFO_MEMORY = 1 << 0;
const INFO_CMDLINE = 1 << 2;
const INFO_MODULES = 1 << 3;
const INFO_MEMORY_MAP = 1 << 6;
const INFO_LOADER_NAME = 1 << 9;
const INFO_BYTES = 0x58;
const LOADER_NAME = 'Unhalt';

/** Where the info block, its module list, memory map and strings go (below the EBDA, above page 0). */
export const MULTIBOOT_LAYOUT = {
  info: LAYOUT.startInfo,
  modules: LAYOUT.startInfo + 0x100,
  loaderName: LAYOUT.startInfo + 0x200,
  moduleName: LAYOUT.startInfo + 0x300,
  memoryMap: LAYOUT.memMap,
  cmdline: LAYOUT.cmdline,
} as const;

export interface MultibootHeader {
  /** Byte offset of the header in the file. */
  offset: number;
  flags: number;
  /** The a.out-kludge address fields (flag 16): where the file loads, without an ELF. */
  addresses?: { headerAddr: number; loadAddr: number; loadEndAddr: number; bssEndAddr: number; entryAddr: number };
}

/** The file's multiboot header, or undefined; a magic whose checksum does not add up is not one. */
export function findMultibootHeader(bytes: Uint8Array): MultibootHeader | undefined {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = Math.min(bytes.length, SEARCH_BYTES) - HEADER_BYTES;
  for (let o = 0; o <= end; o += 4) {
    if (v.getUint32(o, true) !== MULTIBOOT_HEADER_MAGIC) continue;
    const flags = v.getUint32(o + 4, true);
    if (((MULTIBOOT_HEADER_MAGIC + flags + v.getUint32(o + 8, true)) >>> 0) !== 0) continue;
    const header: MultibootHeader = { offset: o, flags };
    if (flags & MULTIBOOT_ADDRESS_FIELDS && o + HEADER_BYTES + ADDRESS_FIELDS_BYTES <= bytes.length) {
      const at = (i: number) => v.getUint32(o + HEADER_BYTES + 4 * i, true);
      header.addresses = { headerAddr: at(0), loadAddr: at(1), loadEndAddr: at(2), bssEndAddr: at(3), entryAddr: at(4) };
    }
    return header;
  }
  return undefined;
}

export interface MultibootInput {
  kernel: Uint8Array;
  /** The one module (QEMU's -initrd): kvm-unit-tests reads its environment from it. */
  initrd?: Uint8Array;
  /** Its name in the module list (QEMU gives the file's path). */
  initrdName?: string;
  /** The kernel's path then its arguments, as QEMU builds it. */
  cmdline: string;
  e820: readonly E820Entry[];
}

/** A piece of the kernel as it lies in guest RAM: file bytes at `paddr`, zeroes to `memsz`. */
export interface LoadPiece {
  paddr: number;
  memsz: number;
  bytes: Uint8Array;
}

/**
 * How a multiboot kernel loads, judged from the file alone (the configuration checks refuse a
 * broken one with this before a VM is built). Throws one line naming what is wrong.
 */
export function planMultiboot(kernel: Uint8Array): { entry: number; pieces: LoadPiece[] } {
  const header = findMultibootHeader(kernel);
  if (!header) throw new Error('kernel has no multiboot header in its first 8 KiB');
  const unmet = header.flags & 0xffff & ~REQUIREMENTS_MET;
  if (unmet) throw new Error(`multiboot kernel requires features no loader here offers (header flags 0x${unmet.toString(16)})`);
  const plan = header.flags & MULTIBOOT_ADDRESS_FIELDS ? planByAddresses(kernel, header) : planElf32(kernel);
  for (const p of plan.pieces) {
    if (p.paddr < LAYOUT.kernelMin) throw new Error(`kernel segment at 0x${p.paddr.toString(16)} is below 1 MiB, where boot structures live`);
  }
  return plan;
}

/** Loads a multiboot kernel and writes its info block. Throws one line naming what is wrong. */
export function loadMultiboot(mem: GuestMemory, input: MultibootInput): BootPlan {
  const { entry, pieces } = planMultiboot(input.kernel);
  let kernelEnd = 0;
  for (const p of pieces) {
    if (p.paddr + p.memsz > mem.lowMemoryEnd) {
      throw new Error(`kernel segment 0x${p.paddr.toString(16)}+0x${p.memsz.toString(16)} does not fit in guest RAM below 4 GiB `
        + `(${(mem.lowMemoryEnd / 1048576).toFixed(0)} MiB there): give the VM more memory`);
    }
    mem.write(p.paddr, p.bytes);
    mem.fill(p.paddr + p.bytes.length, p.memsz - p.bytes.length);
    kernelEnd = Math.max(kernelEnd, p.paddr + p.memsz);
  }

  const m = MULTIBOOT_LAYOUT;
  writeCmdline(mem, input.cmdline);
  mem.fill(m.info, LAYOUT.memMap - m.info);
  writeString(mem, m.loaderName, LOADER_NAME, m.moduleName - m.loaderName);

  let flags = INFO_MEMORY | INFO_CMDLINE | INFO_MEMORY_MAP | INFO_LOADER_NAME;
  // mem_lower: KiB of RAM from 0; mem_upper: KiB from 1 MiB up to the first hole.
  mem.writeU32(m.info + 4, Math.floor(LAYOUT.lowEnd / 1024));
  mem.writeU32(m.info + 8, Math.floor((mem.lowMemoryEnd - LAYOUT.kernelMin) / 1024));
  mem.writeU32(m.info + 16, m.cmdline);
  if (input.initrd && input.initrd.length > 0) {
    const start = placeInitrd(mem, input.initrd.length, kernelEnd);
    mem.write(start, input.initrd);
    writeString(mem, m.moduleName, input.initrdName ?? '', m.memoryMap - m.moduleName);
    mem.writeU32(m.modules, start);
    mem.writeU32(m.modules + 4, start + input.initrd.length);
    mem.writeU32(m.modules + 8, m.moduleName);
    flags |= INFO_MODULES;
    mem.writeU32(m.info + 20, 1);
    mem.writeU32(m.info + 24, m.modules);
  }
  if (input.e820.length > LAYOUT.memMapMaxEntries) throw new Error('too many memory map entries');
  // Each entry: its size (20, not counting itself), base, length, type.
  input.e820.forEach((e, i) => {
    const o = m.memoryMap + i * 24;
    mem.writeU32(o, 20);
    mem.writeU64(o + 4, e.addr);
    mem.writeU64(o + 12, e.size);
    mem.writeU32(o + 20, e.type);
  });
  mem.writeU32(m.info + 44, input.e820.length * 24);
  mem.writeU32(m.info + 48, m.memoryMap);
  mem.writeU32(m.info + 64, m.loaderName);
  mem.writeU32(m.info, flags);
  return { protocol: 'multiboot', mode: 'protected32', entry, rax: MULTIBOOT_BOOTLOADER_MAGIC, rbx: m.info, rsi: 0 };
}

/** An ELF32's PT_LOAD segments at their physical addresses; the entry is the ELF's. */
function planElf32(kernel: Uint8Array): { entry: number; pieces: LoadPiece[] } {
  if (!isElf(kernel)) throw new Error('multiboot kernel is not an ELF file and its header has no address fields (flag 16)');
  const elf = parseElf(kernel);
  if (elf.class !== 32 || elf.machine !== EM_386) {
    throw new Error('multiboot kernel is a 64-bit ELF: multiboot loads 32-bit ELF files (objcopy -O elf32-i386 makes one)');
  }
  const pieces: LoadPiece[] = [];
  for (const seg of elf.segments) {
    if (seg.type !== PT_LOAD || seg.memsz === 0) continue;
    if (seg.filesz > seg.memsz) throw new Error('kernel has a segment whose file size exceeds its memory size');
    pieces.push({ paddr: seg.paddr, memsz: seg.memsz, bytes: kernel.subarray(seg.offset, seg.offset + seg.filesz) });
  }
  if (pieces.length === 0) throw new Error('kernel ELF has no loadable segments');
  return { entry: elf.entry, pieces };
}

/** The a.out kludge: the file from the header's load address to load_end, then BSS to bss_end. */
function planByAddresses(kernel: Uint8Array, header: MultibootHeader): { entry: number; pieces: LoadPiece[] } {
  const a = header.addresses;
  if (!a) throw new Error('multiboot header is cut short: flag 16 with its address fields beyond the end of the file');
  if (a.loadAddr > a.headerAddr) throw new Error('multiboot header: load_addr is above header_addr');
  const fileStart = header.offset - (a.headerAddr - a.loadAddr);
  if (fileStart < 0) throw new Error('multiboot header: header_addr - load_addr points before the start of the file');
  const size = a.loadEndAddr === 0 ? kernel.length - fileStart : a.loadEndAddr - a.loadAddr;
  if (size <= 0 || fileStart + size > kernel.length) throw new Error('multiboot header: load_end_addr lies beyond the end of the file');
  const memsz = a.bssEndAddr === 0 ? size : a.bssEndAddr - a.loadAddr;
  if (memsz < size) throw new Error('multiboot header: bss_end_addr is below load_end_addr');
  return { entry: a.entryAddr, pieces: [{ paddr: a.loadAddr, memsz, bytes: kernel.subarray(fileStart, fileStart + size) }] };
}

/** A NUL-terminated string in at most `room` bytes (a longer one is cut). */
function writeString(mem: GuestMemory, at: number, s: string, room: number): void {
  mem.write(at, new TextEncoder().encode(s).subarray(0, room - 1));
}
