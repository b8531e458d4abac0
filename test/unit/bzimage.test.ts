import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BZIMAGE_LOAD_ADDRESS, loadBzImage, parseSetupHeader, type BzImageLayout } from '../../electron/vmm/boot/bzimage.ts';
import { detectKernelFormat } from '../../electron/vmm/boot/kernel-format.ts';
import { E820_RAM, E820_RESERVED, type E820Entry, LAYOUT } from '../../electron/vmm/boot/layout.ts';
import { parseElf } from '../../electron/vmm/boot/elf.ts';
import { pvhEntry } from '../../electron/vmm/boot/pvh.ts';
import {
  LINUX_BZIMAGE, LINUX_DEFAULT_CMDLINE, LINUX_INITRD, LINUX_VMLINUX, PVM_PROFILE_PARAMS, appendParams, linuxCmdline,
} from '../../electron/vmm/guests-linux.ts';
import { GuestMemory, MiB } from '../../electron/vmm/memory/guest-memory.ts';

const RSDP = 0xe0000;
const ZP = LAYOUT.zeroPage;

function e820For(mem: GuestMemory): E820Entry[] {
  return [
    { addr: 0, size: LAYOUT.lowEnd, type: E820_RAM },
    { addr: LAYOUT.acpi, size: LAYOUT.acpiEnd - LAYOUT.acpi, type: E820_RESERVED },
    { addr: LAYOUT.kernelMin, size: mem.lowMemoryEnd - LAYOUT.kernelMin, type: E820_RAM },
  ];
}

/** A minimal bzImage: setup_sects sectors of setup, a 2.15 header, and a protected-mode part. */
function synthetic(opts: { version?: number; xloadflags?: number; loadflags?: number; setupSects?: number; pmSize?: number;
  cmdlineSize?: number; initSize?: number; initrdAddrMax?: number } = {}): Uint8Array {
  const setupSects = opts.setupSects ?? 1;
  const setupSize = ((setupSects || 4) + 1) * 512;
  const pmSize = opts.pmSize ?? 8192;
  const b = new Uint8Array(setupSize + pmSize);
  const v = new DataView(b.buffer);
  b[0x1f1] = setupSects;
  v.setUint32(0x1f4, pmSize / 16, true);
  v.setUint16(0x1fe, 0xaa55, true);
  b[0x200] = 0xeb;
  b[0x201] = 0x6a; // header ends at 0x26c, as in 2.15 kernels
  v.setUint32(0x202, 0x53726448, true);
  v.setUint16(0x206, opts.version ?? 0x020f, true);
  b[0x211] = opts.loadflags ?? 0x01;
  v.setUint32(0x214, 0x100000, true);
  v.setUint32(0x22c, opts.initrdAddrMax ?? 0x7fffffff, true);
  v.setUint32(0x230, 0x200000, true);
  b[0x234] = 1;
  v.setUint16(0x236, opts.xloadflags ?? 0x7f, true);
  v.setUint32(0x238, opts.cmdlineSize ?? 2047, true);
  v.setBigUint64(0x258, 0x1000000n, true);
  v.setUint32(0x260, opts.initSize ?? 0x400000, true);
  for (let i = 0; i < pmSize; i++) b[setupSize + i] = (i * 7 + 3) & 0xff;
  return b;
}

const u8 = (mem: GuestMemory, a: number) => mem.read(a, 1)[0]!;
const u16 = (mem: GuestMemory, a: number) => mem.read(a, 2).reduce((s, x, i) => s + x * 256 ** i, 0);
const u32 = (mem: GuestMemory, a: number) => mem.readU32(a);

describe('bzImage setup header (synthetic)', () => {
  it('parses a 2.15 header', () => {
    const h = parseSetupHeader(synthetic());
    expect(h).toMatchObject({ version: 0x020f, setupSects: 1, setupSize: 1024, protectedModeSize: 8192, cmdlineSize: 2047,
      relocatable: true, kernelAlignment: 0x200000, prefAddress: 0x1000000, initSize: 0x400000, headerEnd: 0x26c });
  });

  it('treats setup_sects 0 as 4', () => {
    expect(parseSetupHeader(synthetic({ setupSects: 0 })).setupSize).toBe(5 * 512);
  });

  it.each([
    ['a boot protocol older than 2.12', { version: 0x020b }, /boot protocol 2\.11 is too old.*2\.12/],
    ['a kernel without a 64-bit entry', { xloadflags: 0 }, /XLF_KERNEL_64/],
    ['a zImage', { loadflags: 0 }, /zImage/],
  ])('refuses %s', (_what, opts, message) => {
    expect(() => parseSetupHeader(synthetic(opts))).toThrow(message);
  });

  it('refuses files without the magic', () => {
    const b = synthetic();
    b[0x202] = 0;
    expect(() => parseSetupHeader(b)).toThrow(/no "HdrS"/);
    const c = synthetic();
    c[0x1fe] = 0;
    expect(() => parseSetupHeader(c)).toThrow(/0xAA55/);
  });

  it('calls a cut file truncated, in one line', () => {
    const b = synthetic();
    for (const len of [0x100, 0x230, 1024 + 4000]) {
      let msg = '';
      try { parseSetupHeader(b.subarray(0, len)); } catch (e) { msg = (e as Error).message; }
      expect(msg).toMatch(/truncated bzImage/);
      expect(msg).not.toContain('\n');
    }
  });
});

describe('bzImage loader (synthetic)', () => {
  const mem = new GuestMemory(64 * MiB);

  it('writes the zero page, command line, e820 and kernel', () => {
    const kernel = synthetic();
    const initrd = new Uint8Array(3 * 4096 + 5).fill(0x5a);
    const out: { layout?: BzImageLayout } = {};
    const e820 = e820For(mem);
    const plan = loadBzImage(mem, { kernel, initrd, cmdline: 'console=ttyS0 quiet', e820, rsdpAddress: RSDP }, out);
    expect(plan).toEqual({ protocol: 'linux', mode: 'long64', entry: BZIMAGE_LOAD_ADDRESS + 0x200, rbx: 0, rsi: ZP });
    // The setup header as the file has it ...
    expect(u16(mem, ZP + 0x1fe)).toBe(0xaa55);
    expect(u32(mem, ZP + 0x202)).toBe(0x53726448);
    expect(u16(mem, ZP + 0x206)).toBe(0x020f);
    expect(u32(mem, ZP + 0x238)).toBe(2047);
    expect(u8(mem, ZP + 0x1ef)).toBe(0); // sentinel
    // ... and the loader's fields.
    expect(u8(mem, ZP + 0x210)).toBe(0xff); // type_of_loader
    expect(u8(mem, ZP + 0x211) & 0x81).toBe(0x81); // LOADED_HIGH | CAN_USE_HEAP
    expect(u32(mem, ZP + 0x214)).toBe(BZIMAGE_LOAD_ADDRESS);
    expect(u32(mem, ZP + 0x228)).toBe(LAYOUT.cmdline);
    expect(new TextDecoder().decode(mem.read(LAYOUT.cmdline, 20))).toBe('console=ttyS0 quiet\0');
    expect(mem.readU64(ZP + 0x070)).toBe(BigInt(RSDP));
    // e820
    expect(u8(mem, ZP + 0x1e8)).toBe(e820.length);
    e820.forEach((e, i) => {
      const o = ZP + 0x2d0 + i * 20;
      expect(mem.readU64(o)).toBe(BigInt(e.addr));
      expect(mem.readU64(o + 8)).toBe(BigInt(e.size));
      expect(u32(mem, o + 16)).toBe(e.type);
    });
    // initrd: page aligned, at the top of RAM, above what the kernel needs.
    const addr = u32(mem, ZP + 0x218);
    expect(addr % 4096).toBe(0);
    expect(addr + initrd.length).toBeLessThanOrEqual(mem.lowMemoryEnd);
    expect(addr).toBeGreaterThanOrEqual(out.layout!.runtimeEnd);
    expect(u32(mem, ZP + 0x21c)).toBe(initrd.length);
    expect(u32(mem, ZP + 0x0c0)).toBe(0);
    expect(u32(mem, ZP + 0x0c4)).toBe(0);
    expect(mem.read(addr, initrd.length)).toEqual(initrd);
    // the protected-mode kernel at 1 MiB
    expect(mem.read(BZIMAGE_LOAD_ADDRESS, 8192)).toEqual(kernel.subarray(1024));
    // The decompressor goes to pref_address (16 MiB) and needs init_size from there.
    expect(out.layout).toMatchObject({ runtimeStart: 0x1000000, runtimeEnd: 0x1400000 });
  });

  it('keeps the initrd below initrd_addr_max', () => {
    const out: { layout?: BzImageLayout } = {};
    loadBzImage(mem, { kernel: synthetic({ initrdAddrMax: 0x27fffff }), initrd: new Uint8Array(4096),
      cmdline: '', e820: e820For(mem), rsdpAddress: RSDP }, out);
    expect(out.layout!.initrdAddress! + 4096 - 1).toBeLessThanOrEqual(0x27fffff);
  });

  it('refuses a command line over cmdline_size, naming both lengths', () => {
    expect(() => loadBzImage(mem, { kernel: synthetic({ cmdlineSize: 255 }), cmdline: 'x'.repeat(256), e820: e820For(mem), rsdpAddress: RSDP }))
      .toThrow(/^command line is 256 bytes; this kernel takes at most 255 \(cmdline_size\)$/);
    expect(() => loadBzImage(mem, { kernel: synthetic({ cmdlineSize: 255 }), cmdline: 'x'.repeat(255), e820: e820For(mem), rsdpAddress: RSDP }))
      .not.toThrow();
  });

  it('refuses an initrd that does not fit', () => {
    let msg = '';
    try {
      loadBzImage(mem, { kernel: synthetic(), initrd: new Uint8Array(50 * MiB), cmdline: '', e820: e820For(mem), rsdpAddress: RSDP });
    } catch (e) { msg = (e as Error).message; }
    expect(msg).toMatch(/^initrd of 50\.0 MiB does not fit in guest memory above the kernel \(64 MiB\): give the VM more memory$/);
  });

  it('refuses a kernel whose init_size does not fit', () => {
    expect(() => loadBzImage(mem, { kernel: synthetic({ initSize: 60 * MiB }), cmdline: '', e820: e820For(mem), rsdpAddress: RSDP }))
      .toThrow(/needs guest RAM up to 76 MiB to decompress.*64 MiB: give it more memory/);
  });

  it('refuses more e820 entries than the zero page holds', () => {
    const e820 = Array.from({ length: 129 }, (_, i) => ({ addr: i * 4096, size: 4096, type: E820_RAM }));
    expect(() => loadBzImage(mem, { kernel: synthetic(), cmdline: '', e820, rsdpAddress: RSDP })).toThrow(/129 entries.*128/);
  });
});

const kitBuilt = existsSync(LINUX_BZIMAGE);
if (!kitBuilt) console.log(`bzimage.test: skipping the real Debian bzImage checks: ${LINUX_BZIMAGE} is not built (npm run build:linux)`);

describe.skipIf(!kitBuilt)('the real Debian bzImage', () => {
  const kernel = kitBuilt ? new Uint8Array(readFileSync(LINUX_BZIMAGE)) : new Uint8Array();

  it('has a 64-bit, relocatable 2.12+ header', () => {
    expect(detectKernelFormat(kernel)).toBe('bzimage');
    const h = parseSetupHeader(kernel);
    expect(h.version).toBeGreaterThanOrEqual(0x020c);
    expect(h.xloadflags & 1).toBe(1);
    expect(h.loadflags & 1).toBe(1);
    expect(h.relocatable).toBe(true);
    expect(h.cmdlineSize).toBeGreaterThanOrEqual(2047);
    expect(h.initrdAddrMax).toBeGreaterThanOrEqual(0x37ffffff);
    expect(h.kernelVersion).toMatch(/^\d+\.\d+\.\d+-\S+-cloud-amd64 /);
    expect(h.setupSize + h.protectedModeSize).toBeLessThanOrEqual(kernel.length);
    expect(h.payloadLength).toBeGreaterThan(1 * MiB);
  });

  it('loads with the kit initramfs into 256 MiB', () => {
    const mem = new GuestMemory(256 * MiB);
    const initrd = existsSync(LINUX_INITRD) ? new Uint8Array(readFileSync(LINUX_INITRD)) : new Uint8Array(1 * MiB).fill(1);
    const out: { layout?: BzImageLayout } = {};
    const plan = loadBzImage(mem, { kernel, initrd, cmdline: LINUX_DEFAULT_CMDLINE, e820: e820For(mem), rsdpAddress: RSDP }, out);
    const h = out.layout!.header;
    expect(plan.entry).toBe(0x100200);
    // The header is copied as is, except for the loader's own fields (0x210..0x22b).
    expect(mem.read(ZP + 0x1f1, 0x210 - 0x1f1)).toEqual(kernel.subarray(0x1f1, 0x210));
    expect(mem.read(ZP + 0x22c, h.headerEnd - 0x22c)).toEqual(kernel.subarray(0x22c, h.headerEnd));
    expect(u8(mem, ZP + 0x210)).toBe(0xff);
    expect(mem.readU64(ZP + 0x070)).toBe(BigInt(RSDP));
    expect(u32(mem, ZP + 0x21c)).toBe(initrd.length);
    expect(mem.read(u32(mem, ZP + 0x218), 16)).toEqual(initrd.subarray(0, 16));
    expect(mem.read(0x100000, 4096)).toEqual(kernel.subarray(h.setupSize, h.setupSize + 4096));
    expect(out.layout!.runtimeStart).toBe(h.prefAddress);
    expect(out.layout!.runtimeEnd).toBe(h.prefAddress + h.initSize);
  });

  it('refuses the command line past its cmdline_size', () => {
    const mem = new GuestMemory(256 * MiB);
    const size = parseSetupHeader(kernel).cmdlineSize;
    expect(() => loadBzImage(mem, { kernel, cmdline: 'a'.repeat(size + 1), e820: e820For(mem), rsdpAddress: RSDP }))
      .toThrow(`command line is ${size + 1} bytes; this kernel takes at most ${size} (cmdline_size)`);
  });

  it('calls it truncated when cut', () => {
    for (const cut of [0x300, 20000, Math.floor(kernel.length / 2)]) {
      expect(() => parseSetupHeader(kernel.subarray(0, cut))).toThrow(/truncated bzImage/);
    }
  });

  it('refuses an initrd larger than guest memory allows', () => {
    const mem = new GuestMemory(128 * MiB);
    expect(() => loadBzImage(mem, { kernel, initrd: new Uint8Array(100 * MiB), cmdline: '', e820: e820For(mem), rsdpAddress: RSDP }))
      .toThrow(/^initrd of 100\.0 MiB does not fit in guest memory above the kernel \(128 MiB\)/);
  });

  it('says how much memory the kernel needs to decompress', () => {
    const mem = new GuestMemory(48 * MiB);
    expect(() => loadBzImage(mem, { kernel, cmdline: '', e820: e820For(mem), rsdpAddress: RSDP }))
      .toThrow(/this kernel needs guest RAM up to \d+ MiB to decompress/);
  });

  it.skipIf(!existsSync(LINUX_VMLINUX))('vmlinux extracted from it is a PVH ELF', () => {
    const elf = readFileSync(LINUX_VMLINUX);
    expect(detectKernelFormat(elf)).toBe('pvh-elf');
    const entry = pvhEntry(parseElf(elf));
    expect(entry).toBeGreaterThanOrEqual(0x1000000);
  });
});

describe('Linux command line', () => {
  it('adds the PVM profile on PVM hosts only, unless turned off', () => {
    expect(linuxCmdline({ hostKind: 'hardware' })).toBe(LINUX_DEFAULT_CMDLINE);
    expect(linuxCmdline({ hostKind: 'pvm' })).toBe(`${LINUX_DEFAULT_CMDLINE} ${PVM_PROFILE_PARAMS}`);
    expect(linuxCmdline({ hostKind: 'pvm', pvmProfile: false })).toBe(LINUX_DEFAULT_CMDLINE);
    expect(linuxCmdline({ hostKind: 'pvm', append: 'console=ttyS0 noxsave' })).toBe('console=ttyS0 noxsave clearcpuid=cx16');
  });

  it('keeps the user\'s own value of a parameter', () => {
    expect(appendParams('a clearcpuid=sse4_2', 'clearcpuid=cx16 noxsave')).toBe('a clearcpuid=sse4_2 noxsave');
  });
});
