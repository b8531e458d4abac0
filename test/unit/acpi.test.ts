import { describe, it, expect } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildAcpiTables, amlPkgLength } from '../../electron/vmm/firmware/acpi.ts';

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
});
