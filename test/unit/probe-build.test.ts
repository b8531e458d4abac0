// The probe guest ELF: built by native/guest/build.mjs, booted through its PVH note.
// Parses the bytes directly: ELF64 header, program headers, the XEN_ELFNOTE_PHYS32_ENTRY note.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const elfPath = `${root}assets/guests/probe.elf`;

const PT_LOAD = 1;
const PT_NOTE = 4;
const XEN_ELFNOTE_PHYS32_ENTRY = 18;

interface Phdr { type: number; flags: number; offset: number; vaddr: number; paddr: number; filesz: number; memsz: number; align: number }

function phdrs(elf: Buffer): Phdr[] {
  const phoff = Number(elf.readBigUInt64LE(32));
  const phentsize = elf.readUInt16LE(54);
  const phnum = elf.readUInt16LE(56);
  const out: Phdr[] = [];
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    out.push({
      type: elf.readUInt32LE(o),
      flags: elf.readUInt32LE(o + 4),
      offset: Number(elf.readBigUInt64LE(o + 8)),
      vaddr: Number(elf.readBigUInt64LE(o + 16)),
      paddr: Number(elf.readBigUInt64LE(o + 24)),
      filesz: Number(elf.readBigUInt64LE(o + 32)),
      memsz: Number(elf.readBigUInt64LE(o + 40)),
      align: Number(elf.readBigUInt64LE(o + 48)),
    });
  }
  return out;
}

interface Note { name: string; type: number; desc: Buffer }

function notes(elf: Buffer, p: Phdr): Note[] {
  const out: Note[] = [];
  const align4 = (n: number) => (n + 3) & ~3;
  let o = p.offset;
  const end = p.offset + p.filesz;
  while (o + 12 <= end) {
    const namesz = elf.readUInt32LE(o);
    const descsz = elf.readUInt32LE(o + 4);
    const type = elf.readUInt32LE(o + 8);
    const nameAt = o + 12;
    const descAt = nameAt + align4(namesz);
    out.push({ name: elf.toString('latin1', nameAt, nameAt + namesz), type, desc: elf.subarray(descAt, descAt + descsz) });
    o = descAt + align4(descsz);
  }
  return out;
}

describe('probe guest ELF', () => {
  let elf: Buffer;

  beforeAll(() => {
    // Incremental: a no-op when assets/guests/probe.elf is newer than its sources.
    execFileSync(process.execPath, [`${root}native/guest/build.mjs`, '--quiet'], { stdio: 'inherit' });
    elf = readFileSync(elfPath);
  }, 60_000);

  it('is an ELF64 x86-64 executable', () => {
    expect(elf.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(elf[4]).toBe(2); // ELFCLASS64
    expect(elf[5]).toBe(1); // little endian
    expect(elf.readUInt16LE(16)).toBe(2); // ET_EXEC
    expect(elf.readUInt16LE(18)).toBe(62); // EM_X86_64
  });

  it('loads at physical 1 MiB', () => {
    const loads = phdrs(elf).filter((p) => p.type === PT_LOAD);
    expect(loads.length).toBeGreaterThan(0);
    const first = loads.find((p) => p.paddr === 0x100000);
    expect(first).toBeDefined();
    expect(first!.flags & 1).toBe(1); // executable
    for (const p of loads) {
      expect(p.paddr).toBe(p.vaddr); // identity mapped
      expect(p.paddr).toBeGreaterThanOrEqual(0x100000);
      expect(p.memsz).toBeGreaterThanOrEqual(p.filesz);
      expect(p.offset + p.filesz).toBeLessThanOrEqual(elf.length);
    }
  });

  it('carries the PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY) pointing into the first segment', () => {
    const noteSegs = phdrs(elf).filter((p) => p.type === PT_NOTE);
    expect(noteSegs.length).toBeGreaterThan(0);
    const all = noteSegs.flatMap((p) => notes(elf, p));
    const pvh = all.find((n) => n.name === 'Xen\0' && n.type === XEN_ELFNOTE_PHYS32_ENTRY);
    expect(pvh).toBeDefined();
    expect(pvh!.desc.length).toBe(4);
    const entry = pvh!.desc.readUInt32LE(0);
    const text = phdrs(elf).find((p) => p.type === PT_LOAD && p.paddr === 0x100000)!;
    expect(entry).toBeGreaterThanOrEqual(text.paddr);
    expect(entry).toBeLessThan(text.paddr + text.filesz);
    expect(entry).toBe(Number(elf.readBigUInt64LE(24))); // e_entry names the same place
    // QEMU pads the note name to the segment's p_align: it must be 4.
    for (const p of noteSegs) expect(p.align).toBe(4);
  });
});
