// The builder's KVM-free half (electron/vmm/builder/guest-image.ts): a machine's memory at
// power-on — ACPI tables, the kernel by its boot protocol, the memory map — built and inspected
// without /dev/kvm, and the refusals that come before anything is allocated.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { E820_RAM, E820_RESERVED, LAYOUT } from '../../electron/vmm/boot/layout.ts';
import { buildGuestImage, kernelFormatOf } from '../../electron/vmm/builder/guest-image.ts';
import { PROBE_KERNEL, probeBuilt } from '../../electron/vmm/guests.ts';
import { HIGH_MEMORY_START, MiB } from '../../electron/vmm/memory/guest-memory.ts';

const spec = { cpus: 3, memoryMiB: 64, kernelPath: '/guests/probe.elf', cmdline: 'scenario=echo' };
const files = (bytes: Uint8Array, fileSize = bytes.length) => ({ kernel: { bytes, fileSize } });

describe.skipIf(!probeBuilt())('guest image (the builder without KVM)', () => {
  const kernel = new Uint8Array(readFileSync(PROBE_KERNEL));

  it('loads the probe ELF by PVH, with ACPI tables for every vCPU and the command line in place', () => {
    const image = buildGuestImage(spec, files(kernel));
    expect(image.format).toBe('pvh');
    expect(image.boot).toMatchObject({ protocol: 'pvh', mode: 'protected32', rbx: LAYOUT.startInfo });
    expect(image.memory.size).toBe(64 * MiB);
    // The RSDP is where the tables say, and the MADT names one local APIC per vCPU.
    const rsdp = new TextDecoder().decode(image.memory.read(image.rsdpAddress, 8));
    expect(rsdp).toBe('RSD PTR ');
    const tables = image.memory.read(LAYOUT.acpi, LAYOUT.acpiEnd - LAYOUT.acpi);
    const apic = Buffer.from(tables).indexOf('APIC');
    expect(apic).toBeGreaterThanOrEqual(0);
    let lapics = 0;
    const madtLength = Buffer.from(tables).readUInt32LE(apic + 4);
    for (let off = apic + 44; off < apic + madtLength; off += tables[off + 1]!) if (tables[off] === 0) lapics++;
    expect(lapics).toBe(3);
    expect(new TextDecoder().decode(image.memory.read(LAYOUT.cmdline, 13))).toBe('scenario=echo');
    expect(image.e820).toEqual([
      { addr: 0, size: LAYOUT.lowEnd, type: E820_RAM },
      { addr: LAYOUT.acpi, size: LAYOUT.acpiEnd - LAYOUT.acpi, type: E820_RESERVED },
      { addr: LAYOUT.kernelMin, size: 64 * MiB - LAYOUT.kernelMin, type: E820_RAM },
    ]);
  });

  it('puts RAM past the MMIO hole above 4 GiB in the memory map', () => {
    const image = buildGuestImage({ ...spec, memoryMiB: 3072 + 64 }, files(kernel));
    expect(image.e820.at(-1)).toEqual({ addr: HIGH_MEMORY_START, size: 64 * MiB, type: E820_RAM });
    expect(image.memory.regions.map((r) => r.size)).toEqual([3072 * MiB, 64 * MiB]);
  });

  it('refuses a file that is no kernel before allocating guest RAM, naming the file', () => {
    const junk = new Uint8Array(4096).fill(0x41);
    expect(() => kernelFormatOf(spec, files(junk))).toThrow(/^\/guests\/probe\.elf: /);
    // 1 TiB of guest RAM could not be allocated: the format refusal comes first.
    expect(() => buildGuestImage({ ...spec, memoryMiB: 1024 * 1024 }, files(junk))).toThrow(/^\/guests\/probe\.elf: /);
    expect(() => buildGuestImage(spec, files(new Uint8Array(0)))).toThrow(/empty/);
  });
});
