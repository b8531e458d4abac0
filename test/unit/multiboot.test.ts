// The multiboot (v1) loader against hand-made kernels: an ELF32 and an a.out-kludge image, the
// info block a kernel reads, and a broken kernel refused in one line.
import { describe, expect, it } from 'vitest';
import { detectKernelFormat } from '../../electron/vmm/boot/kernel-format.ts';
import { E820_RAM, LAYOUT } from '../../electron/vmm/boot/layout.ts';
import { findMultibootHeader, loadMultiboot, MULTIBOOT_BOOTLOADER_MAGIC, MULTIBOOT_HEADER_MAGIC, MULTIBOOT_LAYOUT, planMultiboot } from '../../electron/vmm/boot/multiboot.ts';
import { memoryMap, multibootCmdline } from '../../electron/vmm/builder/guest-image.ts';
import { GuestMemory, MiB } from '../../electron/vmm/memory/guest-memory.ts';

const CODE = [0xf4, 0xeb, 0xfd]; // hlt; jmp $-1

/** A multiboot header (magic, flags, checksum, then the address fields when given). */
function header(flags: number, addresses: number[] = []): Uint8Array {
  const b = new DataView(new ArrayBuffer(12 + 4 * addresses.length));
  b.setUint32(0, MULTIBOOT_HEADER_MAGIC, true);
  b.setUint32(4, flags, true);
  b.setUint32(8, (-(MULTIBOOT_HEADER_MAGIC + flags)) >>> 0, true);
  addresses.forEach((a, i) => b.setUint32(12 + 4 * i, a, true));
  return new Uint8Array(b.buffer);
}

/** An ELF32 (i386; `machine` 62 claims x86-64) with one segment: header + code at `paddr`, `bss` zero bytes after. */
function elf32(paddr: number, { flags = 0, bss = 0, machine = 3 } = {}): Uint8Array {
  const body = new Uint8Array([...header(flags), ...CODE]);
  const file = new Uint8Array(0x100 + body.length);
  const v = new DataView(file.buffer);
  file.set([0x7f, 0x45, 0x4c, 0x46, 1, 1, 1]);
  v.setUint16(16, 2, true); // ET_EXEC
  v.setUint16(18, machine, true);
  v.setUint32(24, paddr + 12, true); // entry: the code after the header
  v.setUint32(28, 52, true); // phoff
  v.setUint16(42, 32, true);
  v.setUint16(44, 1, true);
  v.setUint32(52, 1, true); // PT_LOAD
  v.setUint32(56, 0x100, true);
  v.setUint32(60, paddr, true);
  v.setUint32(64, paddr, true);
  v.setUint32(68, body.length, true);
  v.setUint32(72, body.length + bss, true);
  file.set(body, 0x100);
  return file;
}

const e820 = (mem: GuestMemory) => memoryMap(mem);

describe('multiboot loader', () => {
  it('finds the header in the first 8 KiB, 4-byte aligned, only with a checksum that adds up', () => {
    const f = new Uint8Array(8192 + 64);
    f.set(header(0), 4096);
    expect(findMultibootHeader(f)).toEqual({ offset: 4096, flags: 0 });
    const bad = header(0);
    bad[8]! ^= 1;
    const g = new Uint8Array(8192);
    g.set(bad, 16);
    expect(findMultibootHeader(g)).toBeUndefined();
    const late = new Uint8Array(16384);
    late.set(header(0), 8192);
    expect(findMultibootHeader(late)).toBeUndefined();
  });

  it('loads an ELF32 and hands over EAX 0x2BADB002 and EBX the info block: memory, command line, module, memory map, loader name', () => {
    const mem = new GuestMemory(64 * MiB);
    const kernel = elf32(0x400000, { bss: 0x10000 });
    mem.fill(0x400000 + 0x100, 0x10000); // BSS must come out zeroed even over old bytes
    mem.write(0x400020, new Uint8Array(64).fill(0xaa));
    const env = new TextEncoder().encode('NR_CPUS=2\nMEMSIZE=64\n');
    const cmdline = multibootCmdline({ kernelPath: '/k/smptest.flat', cmdline: 'a b' });
    expect(cmdline).toBe('/k/smptest.flat a b');
    const plan = loadMultiboot(mem, { kernel, initrd: env, initrdName: '/k/env', cmdline, e820: e820(mem) });
    expect(plan).toEqual({ protocol: 'multiboot', mode: 'protected32', entry: 0x40000c, rax: MULTIBOOT_BOOTLOADER_MAGIC, rbx: MULTIBOOT_LAYOUT.info, rsi: 0 });
    expect(Array.from(mem.read(0x40000c, 3))).toEqual(CODE);
    expect(mem.read(0x400000 + 15, 0x10000).every((b) => b === 0)).toBe(true);
    const info = MULTIBOOT_LAYOUT.info;
    expect(info).toBeGreaterThanOrEqual(0x1000); // page 0 stays the kernel's
    const flags = mem.readU32(info);
    expect(flags).toBe(1 | 4 | 8 | 64 | 512);
    expect(mem.readU32(info + 4)).toBe(639);
    expect(mem.readU32(info + 8)).toBe((64 * MiB - MiB) / 1024);
    const text = (at: number) => new TextDecoder().decode(mem.read(at, 256)).split('\0')[0];
    expect(text(mem.readU32(info + 16))).toBe('/k/smptest.flat a b');
    expect(mem.readU32(info + 20)).toBe(1);
    const mod = mem.readU32(info + 24);
    const [start, end] = [mem.readU32(mod), mem.readU32(mod + 4)];
    expect(start % 4096).toBe(0);
    expect(new TextDecoder().decode(mem.read(start, end - start))).toBe('NR_CPUS=2\nMEMSIZE=64\n');
    expect(text(mem.readU32(mod + 8))).toBe('/k/env');
    const map = e820(mem);
    expect(mem.readU32(info + 44)).toBe(map.length * 24);
    const at = mem.readU32(info + 48);
    map.forEach((e, i) => {
      expect(mem.readU32(at + 24 * i)).toBe(20);
      expect(Number(mem.readU64(at + 24 * i + 4))).toBe(e.addr);
      expect(Number(mem.readU64(at + 24 * i + 12))).toBe(e.size);
      expect(mem.readU32(at + 24 * i + 20)).toBe(e.type);
    });
    expect(map.some((e) => e.type === E820_RAM)).toBe(true);
    expect(text(mem.readU32(info + 64))).toBe('Unhalt');
  });

  it('without a module: no modules flag, no module list', () => {
    const mem = new GuestMemory(16 * MiB);
    loadMultiboot(mem, { kernel: elf32(0x200000), cmdline: '/k', e820: e820(mem) });
    expect(mem.readU32(MULTIBOOT_LAYOUT.info) & 8).toBe(0);
    expect(mem.readU32(MULTIBOOT_LAYOUT.info + 20)).toBe(0);
  });

  it('loads an a.out-kludge image by its header\'s addresses (flag 16), BSS zeroed', () => {
    const loadAddr = 0x300000;
    const head = header(1 << 16, [loadAddr + 64, loadAddr, 0, loadAddr + 0x2000, loadAddr + 96]);
    const file = new Uint8Array(128);
    file.set(head, 64);
    file.set(CODE, 96);
    expect(detectKernelFormat(file)).toBe('multiboot');
    const mem = new GuestMemory(16 * MiB);
    mem.write(loadAddr + 200, new Uint8Array(8).fill(0x55));
    const plan = loadMultiboot(mem, { kernel: file, cmdline: 'k', e820: e820(mem) });
    expect(plan.entry).toBe(loadAddr + 96);
    expect(Array.from(mem.read(loadAddr + 96, 3))).toEqual(CODE);
    expect(mem.read(loadAddr + 128, 0x2000 - 128).every((b) => b === 0)).toBe(true);
  });

  it('tells formats apart: a multiboot ELF32, and PVH before multiboot', () => {
    expect(detectKernelFormat(elf32(0x400000))).toBe('multiboot');
    const plainElf = elf32(0x400000);
    plainElf.fill(0, 0x100, 0x10c); // no header
    expect(detectKernelFormat(plainElf)).toBe('elf-without-pvh');
  });

  it('refuses a broken kernel in one line that names the cause', () => {
    const cases: [Uint8Array, RegExp][] = [
      [elf32(0x400000, { machine: 62 }), /is a 64-bit ELF: multiboot loads 32-bit ELF files/],
      [elf32(0x400000, { flags: 1 << 3 }), /requires features no loader here offers \(header flags 0x8\)/],
      [elf32(0x8000), /below 1 MiB, where boot structures live/],
      [Uint8Array.from([...header(0), ...CODE]), /not an ELF file and its header has no address fields \(flag 16\)/],
      [Uint8Array.from(header(1 << 16)), /cut short/],
      [Uint8Array.from([...header(1 << 16, [0x100000, 0x100000, 0x200000, 0, 0x100000])]), /load_end_addr lies beyond the end of the file/],
    ];
    for (const [kernel, message] of cases) {
      expect(() => planMultiboot(kernel)).toThrow(message);
      expect(String((() => { try { planMultiboot(kernel); } catch (e) { return (e as Error).message; } })())).not.toContain('\n');
    }
    const mem = new GuestMemory(8 * MiB);
    expect(() => loadMultiboot(mem, { kernel: elf32(0x400000, { bss: 8 * MiB }), cmdline: '', e820: e820(mem) })).toThrow(/does not fit in guest RAM below 4 GiB \(8 MiB there\): give the VM more memory/);
    expect(() => loadMultiboot(mem, { kernel: elf32(0x400000), cmdline: 'x'.repeat(5000), e820: e820(mem) })).toThrow(/at most 4095 fit/);
    expect(LAYOUT.cmdlineMax).toBe(4096);
  });
});
