// A minimal ELF reader: header, program headers and notes. Enough to load PVH kernels.
export interface ElfSegment {
  type: number;
  offset: number;
  paddr: number;
  vaddr: number;
  filesz: number;
  memsz: number;
}

export interface ElfNote {
  name: string;
  type: number;
  desc: Uint8Array;
}

export interface ElfFile {
  class: 32 | 64;
  machine: number;
  entry: number;
  segments: ElfSegment[];
  notes: ElfNote[];
}

export const PT_LOAD = 1;
export const PT_NOTE = 4;
export const EM_386 = 3;
export const EM_X86_64 = 62;

export function isElf(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && bytes[0] === 0x7f && bytes[1] === 0x45 && bytes[2] === 0x4c && bytes[3] === 0x46;
}

/** Parses an ELF image; throws with a message naming what is wrong. */
export function parseElf(bytes: Uint8Array, what = 'kernel'): ElfFile {
  if (!isElf(bytes)) throw new Error(`${what} is not an ELF file`);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const cls = bytes[4];
  if (cls !== 1 && cls !== 2) throw new Error(`${what}: unknown ELF class ${cls}`);
  if (bytes[5] !== 1) throw new Error(`${what}: big-endian ELF is not x86`);
  const is64 = cls === 2;
  const need = (end: number, part: string) => {
    if (end > bytes.length) throw new Error(`${what}: truncated ELF file (${part} beyond end of file)`);
  };
  need(is64 ? 64 : 52, 'header');
  const machine = v.getUint16(18, true);
  if (machine !== EM_X86_64 && machine !== EM_386) throw new Error(`${what}: ELF for machine ${machine}, not x86`);
  const entry = is64 ? Number(v.getBigUint64(24, true)) : v.getUint32(24, true);
  const phoff = is64 ? Number(v.getBigUint64(32, true)) : v.getUint32(28, true);
  const phentsize = v.getUint16(is64 ? 54 : 42, true);
  const phnum = v.getUint16(is64 ? 56 : 44, true);
  if (phnum === 0) throw new Error(`${what}: ELF file has no program headers`);
  if (phentsize < (is64 ? 56 : 32)) throw new Error(`${what}: bad ELF program header size ${phentsize}`);
  need(phoff + phnum * phentsize, 'program headers');
  const segments: ElfSegment[] = [];
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    const seg: ElfSegment = is64
      ? {
          type: v.getUint32(o, true), offset: Number(v.getBigUint64(o + 8, true)),
          vaddr: Number(v.getBigUint64(o + 16, true)), paddr: Number(v.getBigUint64(o + 24, true)),
          filesz: Number(v.getBigUint64(o + 32, true)), memsz: Number(v.getBigUint64(o + 40, true)),
        }
      : {
          type: v.getUint32(o, true), offset: v.getUint32(o + 4, true), vaddr: v.getUint32(o + 8, true),
          paddr: v.getUint32(o + 12, true), filesz: v.getUint32(o + 16, true), memsz: v.getUint32(o + 20, true),
        };
    if (seg.type === PT_LOAD || seg.type === PT_NOTE) need(seg.offset + seg.filesz, `segment ${i}`);
    segments.push(seg);
  }
  const notes: ElfNote[] = [];
  for (const seg of segments.filter((s) => s.type === PT_NOTE)) {
    let o = seg.offset;
    const end = seg.offset + seg.filesz;
    while (o + 12 <= end) {
      const namesz = v.getUint32(o, true);
      const descsz = v.getUint32(o + 4, true);
      const type = v.getUint32(o + 8, true);
      const nameStart = o + 12;
      const descStart = nameStart + align4(namesz);
      if (descStart + descsz > end) break;
      const name = new TextDecoder().decode(bytes.subarray(nameStart, nameStart + Math.max(0, namesz - 1)));
      notes.push({ name, type, desc: bytes.subarray(descStart, descStart + descsz) });
      o = descStart + align4(descsz);
    }
  }
  return { class: is64 ? 64 : 32, machine, entry, segments, notes };
}

function align4(n: number): number {
  return (n + 3) & ~3;
}
