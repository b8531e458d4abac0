// The Linux x86 boot protocol, 64-bit entry (Documentation/arch/x86/boot.rst): copy the
// protected-mode kernel of a bzImage to 1 MiB, fill a zero page (struct boot_params) with the
// setup header, an e820 map, the command line, the initrd and the RSDP, and enter startup_64
// (load address + 0x200) in long mode with rsi = zero page. QEMU and linux-loader (Firecracker,
// Cloud Hypervisor) load the protected-mode part at 1 MiB (code32_start) the same way; the
// kernel's decompressor then relocates itself to max(aligned load address, pref_address).
import type { GuestMemory } from '../memory/guest-memory.ts';
import type { BootPlan } from './boot-plan.ts';
import { placeInitrd } from './pvh.ts';
import { type E820Entry, LAYOUT } from './layout.ts';

// Offsets in the bzImage file and, identically, in struct boot_params.
const OFF = {
  // boot_params
  acpiRsdpAddr: 0x070, // u64, protocol 2.14
  extRamdiskImage: 0x0c0,
  extRamdiskSize: 0x0c4,
  extCmdLinePtr: 0x0c8,
  e820Entries: 0x1e8, // u8
  sentinel: 0x1ef,
  e820Table: 0x2d0, // 128 x { u64 addr, u64 size, u32 type }
  // setup header (starts at 0x1f1)
  setupSects: 0x1f1,
  syssize: 0x1f4, // u32, protected-mode size in 16-byte paragraphs
  bootFlag: 0x1fe,
  jump: 0x200, // 0xEB, header length - 2 at 0x201
  header: 0x202,
  version: 0x206,
  typeOfLoader: 0x210,
  loadflags: 0x211,
  code32Start: 0x214,
  ramdiskImage: 0x218,
  ramdiskSize: 0x21c,
  heapEndPtr: 0x224,
  cmdLinePtr: 0x228,
  initrdAddrMax: 0x22c,
  kernelAlignment: 0x230,
  relocatableKernel: 0x234,
  xloadflags: 0x236,
  cmdlineSize: 0x238,
  payloadOffset: 0x248,
  payloadLength: 0x24c,
  prefAddress: 0x258,
  initSize: 0x260,
} as const;

const SETUP_HEADER_START = 0x1f1;
/** sizeof(struct boot_params) .. the setup header never extends past _pad7 at 0x290. */
const SETUP_HEADER_MAX_END = 0x290;
const ZERO_PAGE_SIZE = 0x1000;
export const E820_MAX_ENTRIES_ZEROPAGE = 128;
export const MIN_BOOT_PROTOCOL = 0x020c;
const HDRS = 0x53726448; // "HdrS"
const LOADED_HIGH = 0x01;
const CAN_USE_HEAP = 0x80;
const XLF_KERNEL_64 = 0x01;
const XLF_CAN_BE_LOADED_ABOVE_4G = 0x02;
const LOADER_TYPE_UNDEFINED = 0xff;
/** Where the protected-mode kernel goes: code32_start's default, as QEMU and linux-loader do. */
export const BZIMAGE_LOAD_ADDRESS = 0x100000;
const STARTUP_64_OFFSET = 0x200;

export interface SetupHeader {
  /** Boot protocol version, e.g. 0x020f for 2.15. */
  version: number;
  setupSects: number;
  /** File offset of the protected-mode kernel: (setup_sects || 4) + 1 sectors. */
  setupSize: number;
  /** Size of the protected-mode kernel in bytes (syssize * 16). */
  protectedModeSize: number;
  loadflags: number;
  xloadflags: number;
  code32Start: number;
  initrdAddrMax: number;
  kernelAlignment: number;
  relocatable: boolean;
  cmdlineSize: number;
  payloadOffset: number;
  payloadLength: number;
  prefAddress: number;
  initSize: number;
  /** End of the setup header in the file (0x202 + the jump's displacement), capped at 0x290. */
  headerEnd: number;
  /** The kernel's version string (from kernel_version), when present. */
  kernelVersion?: string;
}

function versionText(v: number): string {
  return `${v >> 8}.${(v & 0xff).toString().padStart(2, '0')}`;
}

/** Parses and checks a bzImage's setup header; throws a one-line error saying what is wrong. */
export function parseSetupHeader(bytes: Uint8Array, what = 'kernel'): SetupHeader {
  if (bytes.length < 0x206) {
    throw new Error(`${what}: truncated bzImage (${bytes.length} bytes, the setup header alone needs 0x206)`);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (v.getUint32(OFF.header, true) !== HDRS) throw new Error(`${what}: not a Linux bzImage (no "HdrS" at 0x202)`);
  if (v.getUint16(OFF.bootFlag, true) !== 0xaa55) throw new Error(`${what}: not a Linux bzImage (boot flag at 0x1fe is not 0xAA55)`);
  const version = v.getUint16(OFF.version, true);
  if (version < MIN_BOOT_PROTOCOL) {
    throw new Error(`${what}: Linux boot protocol ${versionText(version)} is too old; the 64-bit entry needs 2.12 or later (Linux 3.8+)`);
  }
  const headerEnd = Math.min(0x202 + bytes[OFF.jump + 1]!, SETUP_HEADER_MAX_END);
  if (bytes.length < Math.max(headerEnd, OFF.initSize + 4)) {
    throw new Error(`${what}: truncated bzImage (${bytes.length} bytes, ends inside the setup header)`);
  }
  const setupSects = bytes[OFF.setupSects]!;
  const setupSize = ((setupSects || 4) + 1) * 512;
  const protectedModeSize = v.getUint32(OFF.syssize, true) * 16;
  const h: SetupHeader = {
    version, setupSects, setupSize, protectedModeSize,
    loadflags: bytes[OFF.loadflags]!,
    xloadflags: v.getUint16(OFF.xloadflags, true),
    code32Start: v.getUint32(OFF.code32Start, true),
    initrdAddrMax: v.getUint32(OFF.initrdAddrMax, true),
    kernelAlignment: v.getUint32(OFF.kernelAlignment, true),
    relocatable: bytes[OFF.relocatableKernel] !== 0,
    cmdlineSize: v.getUint32(OFF.cmdlineSize, true),
    payloadOffset: v.getUint32(OFF.payloadOffset, true),
    payloadLength: v.getUint32(OFF.payloadLength, true),
    prefAddress: Number(v.getBigUint64(OFF.prefAddress, true)),
    initSize: v.getUint32(OFF.initSize, true),
    headerEnd,
  };
  // kernel_version: a pointer (minus 0x200) to a NUL-terminated string inside the setup code.
  const kvOff = v.getUint16(0x20e, true);
  if (kvOff !== 0 && kvOff + 0x200 < Math.min(bytes.length, setupSize)) {
    const start = kvOff + 0x200;
    let end = start;
    while (end < Math.min(bytes.length, start + 256) && bytes[end] !== 0) end++;
    h.kernelVersion = new TextDecoder().decode(bytes.subarray(start, end));
  }
  if (!(h.xloadflags & XLF_KERNEL_64)) throw new Error(`${what}: this bzImage has no 64-bit entry point (XLF_KERNEL_64 not set): a 32-bit kernel`);
  if (!(h.loadflags & LOADED_HIGH)) throw new Error(`${what}: this is a zImage (LOADED_HIGH not set), not a bzImage`);
  if (protectedModeSize === 0) throw new Error(`${what}: bzImage header says the protected-mode kernel is empty (syssize 0)`);
  if (bytes.length < setupSize + protectedModeSize) {
    throw new Error(`${what}: truncated bzImage (${bytes.length} bytes; its header says ${setupSize + protectedModeSize})`);
  }
  if (h.payloadLength > 0 && setupSize + h.payloadOffset + h.payloadLength > bytes.length) {
    throw new Error(`${what}: truncated bzImage (the compressed kernel ends at byte ${setupSize + h.payloadOffset + h.payloadLength} of ${bytes.length})`);
  }
  return h;
}

export interface BzImageInput {
  kernel: Uint8Array;
  initrd?: Uint8Array;
  cmdline: string;
  e820: readonly E820Entry[];
  rsdpAddress: number;
}

/** Where things went (for tests, logs and `--dry-run`). */
export interface BzImageLayout {
  header: SetupHeader;
  loadAddress: number;
  /** Where the decompressor will put the kernel, and the end of what it needs (init_size). */
  runtimeStart: number;
  runtimeEnd: number;
  initrdAddress?: number;
}

export function loadBzImage(mem: GuestMemory, input: BzImageInput, out?: { layout?: BzImageLayout }): BootPlan {
  const h = parseSetupHeader(input.kernel);
  const cmdline = new TextEncoder().encode(input.cmdline);
  const cmdlineMax = Math.min(h.cmdlineSize, LAYOUT.cmdlineMax - 1);
  if (cmdline.length > cmdlineMax) {
    throw new Error(`command line is ${cmdline.length} bytes; this kernel takes at most ${cmdlineMax} (cmdline_size)`);
  }
  if (input.e820.length > E820_MAX_ENTRIES_ZEROPAGE) {
    throw new Error(`memory map has ${input.e820.length} entries; the zero page holds ${E820_MAX_ENTRIES_ZEROPAGE}`);
  }

  // The protected-mode kernel, at 1 MiB.
  const loadAddress = BZIMAGE_LOAD_ADDRESS;
  const pm = input.kernel.subarray(h.setupSize, h.setupSize + h.protectedModeSize);
  // The decompressor moves to max(load address aligned up to kernel_alignment, pref_address)
  // (a non-relocatable kernel: pref_address) and needs init_size bytes from there.
  const align = h.relocatable && h.kernelAlignment > 0 ? h.kernelAlignment : 1;
  const aligned = Math.ceil(loadAddress / align) * align;
  const runtimeStart = h.relocatable ? Math.max(aligned, h.prefAddress || loadAddress) : (h.prefAddress || loadAddress);
  const runtimeEnd = runtimeStart + Math.max(h.initSize, pm.length);
  const kernelEnd = Math.max(loadAddress + pm.length, runtimeEnd);
  const needMiB = Math.ceil(kernelEnd / 1048576);
  if (kernelEnd > mem.lowMemoryEnd) {
    throw new Error(`this kernel needs guest RAM up to ${needMiB} MiB to decompress (init_size ${h.initSize} bytes at `
      + `0x${runtimeStart.toString(16)}); the VM has ${mem.size / 1048576} MiB: give it more memory`);
  }
  mem.write(loadAddress, pm);

  // Command line.
  mem.fill(LAYOUT.cmdline, LAYOUT.cmdlineMax);
  mem.write(LAYOUT.cmdline, cmdline);

  // Zero page: zeros, then the setup header exactly as the file has it, then our fields.
  const zp = LAYOUT.zeroPage;
  mem.fill(zp, ZERO_PAGE_SIZE);
  mem.write(zp + SETUP_HEADER_START, input.kernel.subarray(SETUP_HEADER_START, h.headerEnd));
  mem.write(zp + OFF.typeOfLoader, Uint8Array.of(LOADER_TYPE_UNDEFINED));
  mem.write(zp + OFF.loadflags, Uint8Array.of((h.loadflags | CAN_USE_HEAP) & 0xff));
  mem.writeU16(zp + OFF.heapEndPtr, 0xfe00);
  mem.writeU32(zp + OFF.code32Start, loadAddress);
  mem.writeU32(zp + OFF.cmdLinePtr, LAYOUT.cmdline);
  mem.writeU32(zp + OFF.extCmdLinePtr, 0);
  if (h.version >= 0x020e) mem.writeU64(zp + OFF.acpiRsdpAddr, input.rsdpAddress);

  let initrdAddress: number | undefined;
  if (input.initrd && input.initrd.length > 0) {
    initrdAddress = placeKernelInitrd(mem, input.initrd.length, kernelEnd, h);
    mem.write(initrdAddress, input.initrd);
    mem.writeU32(zp + OFF.ramdiskImage, initrdAddress % 2 ** 32);
    mem.writeU32(zp + OFF.ramdiskSize, input.initrd.length % 2 ** 32);
    mem.writeU32(zp + OFF.extRamdiskImage, Math.floor(initrdAddress / 2 ** 32));
    mem.writeU32(zp + OFF.extRamdiskSize, Math.floor(input.initrd.length / 2 ** 32));
  }

  mem.write(zp + OFF.e820Entries, Uint8Array.of(input.e820.length));
  input.e820.forEach((e, i) => {
    const o = zp + OFF.e820Table + i * 20;
    mem.writeU64(o, e.addr);
    mem.writeU64(o + 8, e.size);
    mem.writeU32(o + 16, e.type);
  });

  if (out) out.layout = { header: h, loadAddress, runtimeStart, runtimeEnd, ...(initrdAddress !== undefined ? { initrdAddress } : {}) };
  return { protocol: 'linux', mode: 'long64', entry: loadAddress + STARTUP_64_OFFSET, rbx: 0, rsi: zp };
}

/**
 * The initrd goes at the top of RAM below initrd_addr_max (low RAM first, as QEMU does); a
 * kernel that can take it above 4 GiB (XLF_CAN_BE_LOADED_ABOVE_4G) gets it at the top of high
 * RAM when it does not fit low.
 */
function placeKernelInitrd(mem: GuestMemory, size: number, kernelEnd: number, h: SetupHeader): number {
  const maxAddr = h.initrdAddrMax || 0x37ffffff; // protocol < 2.03 default
  try {
    return placeInitrd(mem, size, kernelEnd, maxAddr);
  } catch (e) {
    const high = mem.regions[1];
    if (high && (h.xloadflags & XLF_CAN_BE_LOADED_ABOVE_4G) && size <= high.size) {
      return Math.floor((high.guestPhysAddr + high.size - size) / 4096) * 4096;
    }
    throw e;
  }
}
