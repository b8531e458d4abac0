// The PVH loader against the real probe guest ELF and hand-made files.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { detectKernelFormat, describeUnknownKernel } from '../../electron/vmm/boot/kernel-format.ts';
import { LAYOUT } from '../../electron/vmm/boot/layout.ts';
import { HVM_START_MAGIC, loadPvh } from '../../electron/vmm/boot/pvh.ts';
import { PROBE_KERNEL, probeBuilt } from '../../electron/vmm/guests.ts';
import { GuestMemory, MiB } from '../../electron/vmm/memory/guest-memory.ts';
import { memoryMap } from '../../electron/vmm/builder/guest-image.ts';

describe.skipIf(!probeBuilt())('PVH loader', () => {
  const kernel = readFileSync(PROBE_KERNEL);

  it('recognises the probe guest as a PVH ELF', () => {
    expect(detectKernelFormat(kernel)).toBe('pvh-elf');
  });

  it('copies segments, writes hvm_start_info, the command line, memory map and initrd module', () => {
    const mem = new GuestMemory(64 * MiB);
    const initrd = new Uint8Array(10_000).fill(7);
    const plan = loadPvh(mem, { kernel, initrd, cmdline: 'scenario=hello', rsdpAddress: 0xe0000, e820: memoryMap(mem) });
    expect(plan).toMatchObject({ protocol: 'pvh', mode: 'protected32', rbx: LAYOUT.startInfo });
    expect(plan.entry).toBeGreaterThanOrEqual(0x100000);
    const si = LAYOUT.startInfo;
    expect(mem.readU32(si)).toBe(HVM_START_MAGIC);
    expect(mem.readU32(si + 4)).toBe(1);
    expect(mem.readU32(si + 12)).toBe(1); // one module
    expect(Number(mem.readU64(si + 24))).toBe(LAYOUT.cmdline);
    expect(new TextDecoder().decode(mem.read(LAYOUT.cmdline, 14))).toBe('scenario=hello');
    expect(Number(mem.readU64(si + 32))).toBe(0xe0000);
    expect(mem.readU32(si + 48)).toBe(memoryMap(mem).length);
    const initrdAddr = Number(mem.readU64(LAYOUT.modList));
    expect(initrdAddr % 4096).toBe(0);
    expect(initrdAddr + 10_000).toBeLessThanOrEqual(64 * MiB);
    expect(mem.read(initrdAddr, 10_000).every((b) => b === 7)).toBe(true);
    // The entry instruction bytes landed at their physical address.
    expect(mem.read(plan.entry, 4).some((b) => b !== 0)).toBe(true);
  });

  it('refuses an initrd that does not fit and a command line that is too long', () => {
    const mem = new GuestMemory(16 * MiB);
    expect(() => loadPvh(mem, { kernel, initrd: new Uint8Array(20 * MiB), cmdline: '', rsdpAddress: 0, e820: [] }))
      .toThrow(/initrd of 20.0 MiB does not fit/);
    expect(() => loadPvh(mem, { kernel, cmdline: 'x'.repeat(5000), rsdpAddress: 0, e820: [] }))
      .toThrow(/command line is 5000 bytes; at most 4095 fit/);
  });

  it('refuses truncated ELF files', () => {
    const mem = new GuestMemory(16 * MiB);
    expect(() => loadPvh(mem, { kernel: kernel.subarray(0, 200), cmdline: '', rsdpAddress: 0, e820: [] })).toThrow(/truncated/);
  });
});

describe('kernel format detection', () => {
  it('names what a file is not', () => {
    expect(detectKernelFormat(new TextEncoder().encode('#!/bin/sh\necho hi\n'))).toBe('unknown');
    expect(describeUnknownKernel(new TextEncoder().encode('#!/bin/sh\n'))).toMatch(/neither a PVH ELF, a Linux bzImage nor a multiboot kernel .*text/);
    expect(describeUnknownKernel(new Uint8Array(0))).toMatch(/empty/);
    const bz = new Uint8Array(0x300);
    bz.set([0x48, 0x64, 0x72, 0x53], 0x202);
    expect(detectKernelFormat(bz)).toBe('bzimage');
  });
});

describe('guest memory', () => {
  it('is registered at a 2 MiB-aligned host address and split around the MMIO hole', () => {
    const mem = new GuestMemory(4096 * MiB);
    expect(mem.regions).toHaveLength(2);
    expect(mem.regions[0]!.hostAddress % (2 * MiB)).toBe(0);
    expect(mem.regions[0]!.size).toBe(3072 * MiB);
    expect(mem.regions[1]!.guestPhysAddr).toBe(4096 * MiB);
    mem.writeU32(4096 * MiB + 8, 0xdeadbeef);
    expect(mem.readU32(4096 * MiB + 8)).toBe(0xdeadbeef);
    expect(() => mem.read(3072 * MiB, 4)).toThrow(/outside guest RAM/);
  });
});
