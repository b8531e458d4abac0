import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { buildAcpiTables, amlPkgLength, eisaId } from '../../electron/vmm/firmware/acpi.ts';
import { PCI_MMIO_WINDOW } from '../../electron/vmm/devices/board.ts';
import { acpiTablesFor } from '../../electron/vmm/builder/guest-image.ts';
import { LAYOUT } from '../../electron/vmm/boot/layout.ts';
import { MACHINE_TYPES, machineType } from '../../electron/vmm/machine/machine-types.ts';

const BASE = 0xe0000;

function sum(b: Uint8Array): number {
  let s = 0;
  for (const x of b) s = (s + x) & 0xff;
  return s;
}

function ascii(b: Uint8Array, o: number, n: number): string {
  return String.fromCharCode(...b.subarray(o, o + n));
}

// A guest's-eye parser: everything is reached from the RSDP through guest-physical addresses.
function parse(cpus: number) {
  const { bytes, rsdpAddress } = buildAcpiTables({ cpus, baseAddress: BASE });
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const at = (addr: number) => addr - BASE;
  const table = (addr: number) => {
    const o = at(addr);
    expect(o).toBeGreaterThanOrEqual(0);
    const length = dv.getUint32(o + 4, true);
    expect(o + length).toBeLessThanOrEqual(bytes.length);
    const t = bytes.subarray(o, o + length);
    expect(sum(t)).toBe(0);
    expect(ascii(t, 10, 6)).toBe('UNHALT');
    return { o, t, sig: ascii(t, 0, 4), length, revision: t[8] };
  };
  const r = at(rsdpAddress);
  expect(ascii(bytes, r, 8)).toBe('RSD PTR ');
  expect(sum(bytes.subarray(r, r + 20))).toBe(0);
  expect(dv.getUint32(r + 20, true)).toBe(36);
  expect(sum(bytes.subarray(r, r + 36))).toBe(0);
  expect(bytes[r + 15]).toBe(2);
  expect(ascii(bytes, r + 9, 6)).toBe('UNHALT');
  const xsdt = table(Number(dv.getBigUint64(r + 24, true)));
  expect(xsdt.sig).toBe('XSDT');
  const entries: ReturnType<typeof table>[] = [];
  for (let i = 36; i < xsdt.length; i += 8) entries.push(table(Number(dv.getBigUint64(xsdt.o + i, true))));
  return { bytes, dv, rsdpAddress, entries, table, at };
}

describe('ACPI tables', () => {
  it('chains RSDP -> XSDT -> FADT, MADT with valid checksums', () => {
    const { entries, bytes, rsdpAddress } = parse(4);
    expect(entries.map((e) => e.sig)).toEqual(['FACP', 'APIC']);
    expect(rsdpAddress % 16).toBe(0);
    expect(BASE + bytes.length).toBeLessThanOrEqual(0x100000);
  });

  it('FADT: rev 6, 276 bytes, PM1a blocks, SCI 9, DSDT and FACS reachable, not hw-reduced', () => {
    const { entries, dv, table, at, bytes } = parse(2);
    const f = entries[0];
    expect(f.length).toBe(276);
    expect(f.revision).toBe(6);
    const o = f.o;
    expect(dv.getUint16(o + 46, true)).toBe(9); // SCI_INT
    expect(dv.getUint32(o + 48, true)).toBe(0); // SMI_CMD
    expect(dv.getUint32(o + 56, true)).toBe(0x600);
    expect(dv.getUint32(o + 64, true)).toBe(0x604);
    expect(dv.getUint32(o + 76, true)).toBe(0); // no PM timer
    expect(bytes[o + 88]).toBe(4);
    expect(bytes[o + 89]).toBe(2);
    expect(dv.getUint16(o + 109, true) & 0x2).toBe(0x2); // 8042 present
    expect(dv.getUint32(o + 112, true) & (1 << 20)).toBe(0); // not HW_REDUCED
    // X_PM1a_EVT_BLK / X_PM1a_CNT_BLK: system I/O, widths matching the legacy lengths.
    expect([bytes[o + 148], bytes[o + 149], Number(dv.getBigUint64(o + 152, true))]).toEqual([1, 32, 0x600]);
    expect([bytes[o + 172], bytes[o + 173], Number(dv.getBigUint64(o + 176, true))]).toEqual([1, 16, 0x604]);
    const dsdtAddr = dv.getUint32(o + 40, true);
    expect(Number(dv.getBigUint64(o + 140, true))).toBe(dsdtAddr);
    expect(table(dsdtAddr).sig).toBe('DSDT');
    const facs = at(dv.getUint32(o + 36, true));
    expect(ascii(bytes, facs, 4)).toBe('FACS');
    expect(facs % 64).toBe(0);
  });

  it('DSDT is exactly Name(_S5_, Package(){5, 5, 0, 0})', () => {
    const { entries, dv, table } = parse(1);
    const dsdt = table(dv.getUint32(entries[0].o + 40, true));
    expect([...dsdt.t.subarray(36)]).toEqual([
      0x08, 0x5f, 0x53, 0x35, 0x5f, // NameOp "_S5_"
      0x12, 0x08, 0x04, // PackageOp, PkgLength 8, 4 elements
      0x0a, 0x05, 0x0a, 0x05, 0x00, 0x00, // BytePrefix 5, BytePrefix 5, Zero, Zero
    ]);
  });

  for (const cpus of [1, 4, 255]) {
    it(`MADT for ${cpus} CPU(s): one enabled LAPIC per CPU, IOAPIC, two overrides`, () => {
      const { entries, dv, bytes } = parse(cpus);
      const m = entries[1];
      expect(dv.getUint32(m.o + 36, true)).toBe(0xfee00000);
      expect(dv.getUint32(m.o + 40, true)).toBe(1);
      const lapics: number[] = [];
      const ioapics: [number, number, number][] = [];
      const overrides: [number, number, number][] = [];
      for (let o = m.o + 44; o < m.o + m.length; o += bytes[o + 1]) {
        const type = bytes[o];
        if (type === 0) {
          expect(bytes[o + 2]).toBe(bytes[o + 3]); // UID = APIC ID
          expect(dv.getUint32(o + 4, true)).toBe(1);
          lapics.push(bytes[o + 3]);
        } else if (type === 1) {
          ioapics.push([bytes[o + 2], dv.getUint32(o + 4, true), dv.getUint32(o + 8, true)]);
        } else if (type === 2) {
          overrides.push([bytes[o + 3], dv.getUint32(o + 4, true), dv.getUint16(o + 8, true)]);
        }
      }
      expect(lapics).toEqual([...Array(cpus).keys()]);
      expect(ioapics).toEqual([[cpus, 0xfec00000, 0]]);
      expect(overrides).toEqual([[0, 2, 0x0005], [9, 9, 0x000d]]);
      expect(BASE + bytes.length).toBeLessThanOrEqual(0x100000);
    });
  }

  it('rejects CPU counts outside 1..255', () => {
    expect(() => buildAcpiTables({ cpus: 0, baseAddress: BASE })).toThrow(RangeError);
    expect(() => buildAcpiTables({ cpus: 256, baseAddress: BASE })).toThrow(RangeError);
  });

  it('with a PCI window, the DSDT also holds \\_SB.PCI0 (PNP0A03) after \\_S5, and the tables still fit below 1 MiB', () => {
    const { bytes, tables } = buildAcpiTables({ cpus: 255, baseAddress: BASE, pciMmioWindow: PCI_MMIO_WINDOW });
    const d = tables.find((t) => t.signature === 'DSDT')!;
    const aml = bytes.subarray(d.address - BASE + 36, d.address - BASE + d.length);
    expect([...aml.subarray(0, 5)]).toEqual([0x08, 0x5f, 0x53, 0x35, 0x5f]); // \_S5 first: the probe's scan finds it
    const text = String.fromCharCode(...aml);
    for (const name of ['\\_SB_', 'PCI0', '_HID', '_SEG', '_BBN', '_CRS']) expect(text).toContain(name);
    expect(BASE + bytes.length).toBeLessThanOrEqual(0x100000);
    expect(eisaId('PNP0A03')).toBe(0x030ad041);
    expect(eisaId('PNP0A08')).toBe(0x080ad041);
  });

  it('encodes AML PkgLength in 1..4 bytes', () => {
    expect(amlPkgLength(7)).toEqual([8]);
    expect(amlPkgLength(62)).toEqual([63]);
    expect(amlPkgLength(63)).toEqual([0x41, 0x04]); // 65 = 0x41: lead nibble 1, next byte 4
    expect(amlPkgLength(0x1000)).toEqual([0x83, 0x00, 0x01]); // 0x1003: 3 bytes, low nibble 3
  });

  // iasl/acpiexec (acpica-tools) are an independent check when installed.
  const hasAcpica = (() => {
    try {
      execFileSync('acpiexec', ['-v'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();

  it.skipIf(!hasAcpica)('passes iasl -d and acpiexec evaluates \\_S5_', () => {
    const dir = mkdtempSync(join(tmpdir(), 'unhalt-acpi-'));
    try {
      const { bytes, tables } = buildAcpiTables({ cpus: 3, baseAddress: BASE });
      const files: string[] = [];
      for (const t of tables) {
        if (t.signature === 'RSD PTR ') continue; // iasl cannot disassemble a lone RSDP file
        const f = join(dir, `${t.signature.toLowerCase()}.dat`);
        writeFileSync(f, bytes.subarray(t.address - BASE, t.address - BASE + t.length));
        files.push(f);
        execFileSync('iasl', ['-d', f], { cwd: dir, stdio: 'pipe' });
      }
      const madt = readFileSync(join(dir, 'apic.dsl'), 'utf8');
      expect(madt.match(/\[Processor Local APIC\]/g)?.length).toBe(3);
      const fadt = readFileSync(join(dir, 'facp.dsl'), 'utf8');
      expect(fadt).toMatch(/Hardware Reduced \(V5\) : 0/);
      const out = execFileSync('acpiexec', ['-b', 'evaluate \\_S5_', ...files], { cwd: dir, encoding: 'utf8', stdio: 'pipe' });
      expect(out).not.toMatch(/mismatch|Invalid|checksum/i);
      expect(out).toMatch(/\[Package\] Contains 4 Elements:\s+\[Integer\] = 0+5\s+\[Integer\] = 0+5\s+\[Integer\] = 0+\s+\[Integer\] = 0+\s/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!hasAcpica)('iasl decodes PCI0\'s _CRS as the bus, the config ports, two I/O windows and the 32-bit memory window', () => {
    const dir = mkdtempSync(join(tmpdir(), 'unhalt-acpi-'));
    try {
      const { bytes, tables } = buildAcpiTables({ cpus: 2, baseAddress: BASE, pciMmioWindow: PCI_MMIO_WINDOW });
      const d = tables.find((t) => t.signature === 'DSDT')!;
      const f = join(dir, 'dsdt.dat');
      writeFileSync(f, bytes.subarray(d.address - BASE, d.address - BASE + d.length));
      execFileSync('iasl', ['-d', f], { cwd: dir, stdio: 'pipe' });
      const dsl = readFileSync(join(dir, 'dsdt.dsl'), 'utf8').replace(/\s+/g, ' ');
      expect(dsl).toContain('Device (PCI0)');
      expect(dsl).toContain('EisaId ("PNP0A03")');
      expect(dsl).toMatch(/WordBusNumber \(ResourceProducer, MinFixed, MaxFixed, PosDecode, 0x0000, \/\/ Granularity 0x0000, \/\/ Range Minimum 0x0000, \/\/ Range Maximum 0x0000, \/\/ Translation Offset 0x0001,/);
      expect(dsl).toMatch(/IO \(Decode16, 0x0CF8, \/\/ Range Minimum 0x0CF8, \/\/ Range Maximum 0x01, \/\/ Alignment 0x08,/);
      expect(dsl).toMatch(/WordIO \(ResourceProducer, MinFixed, MaxFixed, PosDecode, EntireRange, 0x0000, \/\/ Granularity 0x0000, \/\/ Range Minimum 0x0CF7,/);
      expect(dsl).toMatch(/0x0D00, \/\/ Range Minimum 0xFFFF, \/\/ Range Maximum 0x0000, \/\/ Translation Offset 0xF300,/);
      expect(dsl).toMatch(/DWordMemory \(ResourceProducer, PosDecode, MinFixed, MaxFixed, NonCacheable, ReadWrite, 0x00000000, \/\/ Granularity 0xE0000000, \/\/ Range Minimum 0xEFFFFFFF, \/\/ Range Maximum 0x00000000, \/\/ Translation Offset 0x10000000,/);
      const out = execFileSync('acpiexec', ['-b', 'evaluate \\_SB.PCI0._HID', f], { cwd: dir, encoding: 'utf8', stdio: 'pipe' });
      expect(out).not.toMatch(/mismatch|Invalid|checksum|AE_/i);
      expect(out).toMatch(/\[Integer\] = 0+30AD041/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // iasl as an independent reader of each version's FADT: where its PM timer is, or that there is none.
  it.skipIf(!hasAcpica)('iasl reads each machine type\'s FADT: PM timer block at 0x608 (24-bit) from unhalt-1.2, none before', () => {
    const dir = mkdtempSync(join(tmpdir(), 'unhalt-acpi-'));
    try {
      for (const m of MACHINE_TYPES) {
        const { bytes, tables } = acpiTablesFor(2, m.board.pmTimer);
        const f = tables.find((t) => t.signature === 'FACP')!;
        const file = join(dir, `${m.name}.dat`);
        writeFileSync(file, bytes.subarray(f.address - LAYOUT.acpi, f.address - LAYOUT.acpi + f.length));
        execFileSync('iasl', ['-d', file], { cwd: dir, stdio: 'pipe' });
        const dsl = readFileSync(join(dir, `${m.name}.dsl`), 'utf8');
        expect(dsl, m.name).toMatch(new RegExp(`PM Timer Block Address : ${m.board.pmTimer ? '00000608' : '00000000'}`));
        expect(dsl, m.name).toMatch(new RegExp(`PM Timer Block Length : ${m.board.pmTimer ? '04' : '00'}`));
        expect(dsl, m.name).toMatch(/32-bit PM Timer \(V1\) : 0/);
        const gas = /PM Timer Block : \[Generic Address Structure\]([\s\S]*?)Address : (\w+)/.exec(dsl);
        expect(gas?.[1], m.name).toMatch(m.board.pmTimer ? /Space ID : 01 \[SystemIO\][\s\S]*Bit Width : 20/ : /Space ID : 00/);
        expect(gas?.[2], m.name).toBe(m.board.pmTimer ? '0000000000000608' : '0000000000000000');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// The guest ABI per machine type (machine-types.ts): the whole ACPI block a guest of each version
// gets, as guest-image.ts builds it, by digest. A change that alters a released version's bytes
// fails here: the change belongs in a new machine type.
const GOLDEN_ACPI: Record<string, Record<number, string>> = {
  'unhalt-1.0': {
    1: '783c4629d8579a0cef057164fbd51c1c53fbe2c662b09275bf92ee7c3ec5a7b0',
    2: '5ebdaa042d2fa71cda06d5743ab979d0dadf728ffd40361758b7dddc27783793',
    4: 'ca631c9e9dbd9e881754a2e4ed758adc940b282ed58ca0b93cbc0c198188940c',
    255: '8d867145e0660ab6c7345d8a3085ac72cfd948ceac022070a58094dc7e5b0609',
  },
  'unhalt-1.1': {
    1: '783c4629d8579a0cef057164fbd51c1c53fbe2c662b09275bf92ee7c3ec5a7b0',
    2: '5ebdaa042d2fa71cda06d5743ab979d0dadf728ffd40361758b7dddc27783793',
    4: 'ca631c9e9dbd9e881754a2e4ed758adc940b282ed58ca0b93cbc0c198188940c',
    255: '8d867145e0660ab6c7345d8a3085ac72cfd948ceac022070a58094dc7e5b0609',
  },
  // ... plus the PM timer: PM_TMR_BLK 0x608, PM_TMR_LEN 4, X_PM_TMR_BLK.
  'unhalt-1.2': {
    1: '95ef2ddf051826da5e08aa21ca4c79a65d59789a77f14ec7ce62890892785bed',
    2: 'cef032c0505e81021249841b08e01504ec9d0c96bd9aaf3ea99904c570a37e77',
    4: '4aa51fa74ee07351ce10e01b55cc2e5bf3c3a81a05bec8a02b11dd6d60a06a55',
    255: '69443401b02cf5f20e49b566ac12caae813e16eb305b6302afb4d155b2ca4ad1',
  },
};

describe('ACPI tables per machine type', () => {
  it('has golden digests for every machine type (add a row with each new type)', () => {
    expect(MACHINE_TYPES.map((m) => m.name)).toEqual(Object.keys(GOLDEN_ACPI));
  });

  for (const [name, digests] of Object.entries(GOLDEN_ACPI)) {
    it(`${name} keeps its ACPI bytes`, () => {
      for (const [cpus, digest] of Object.entries(digests)) {
        const { bytes } = acpiTablesFor(Number(cpus), machineType(name)!.board.pmTimer);
        expect(createHash('sha256').update(bytes).digest('hex'), `${name}, ${cpus} CPUs`).toBe(digest);
      }
    });
  }

  it('FADT per version: only PM_TMR_BLK, PM_TMR_LEN, X_PM_TMR_BLK (and the checksum) tell them apart', () => {
    const fadtOf = (pmTimer: boolean) => {
      const { bytes, tables } = acpiTablesFor(2, pmTimer);
      const f = tables.find((t) => t.signature === 'FACP')!;
      return bytes.slice(f.address - LAYOUT.acpi, f.address - LAYOUT.acpi + f.length);
    };
    const without = fadtOf(false);
    const withTimer = fadtOf(true);
    const dv = new DataView(withTimer.buffer);
    expect(dv.getUint32(76, true)).toBe(0x608); // PM_TMR_BLK
    expect(withTimer[91]).toBe(4); // PM_TMR_LEN
    expect([...withTimer.subarray(208, 212)]).toEqual([1, 32, 0, 3]); // X_PM_TMR_BLK: system I/O, 32 bits, dword access
    expect(Number(dv.getBigUint64(212, true))).toBe(0x608);
    expect(dv.getUint32(112, true) & (1 << 8)).toBe(0); // TMR_VAL_EXT clear: a 24-bit counter
    expect(new DataView(without.buffer).getUint32(76, true)).toBe(0);
    expect(without[91]).toBe(0);
    expect([...without.subarray(208, 220)].every((b) => b === 0)).toBe(true);
    const differing = [...withTimer.keys()].filter((i) => withTimer[i] !== without[i]);
    const allowed = new Set([9, 76, 77, 91, 208, 209, 211, 212, 213]);
    expect(differing.filter((i) => !allowed.has(i))).toEqual([]);
    expect(sum(withTimer)).toBe(0);
  });
});

