// What a 64-bit little-endian ELF object needs from the dynamic loader: its PT_INTERP (the
// loader's path) and the DT_NEEDED / DT_RUNPATH / DT_RPATH entries of its dynamic section, read
// straight from the file (no readelf/ldd: ldd would resolve against the HOST's libraries, and the
// workloads disk must resolve against its own Debian packages). Used by build-workloads-disk.mjs.
import { readFileSync } from 'node:fs';

const PT_INTERP = 3;
const PT_DYNAMIC = 2;
const PT_LOAD = 1;
const DT_NEEDED = 1;
const DT_STRTAB = 5;
const DT_RPATH = 15;
const DT_RUNPATH = 29;

/**
 * { interp, needed: [soname], runpath: [dir] } of an ELF64 LE file, or undefined when the file is
 * not one (a shell script, a static ELF has neither interp nor needed and gives empty lists).
 */
export function elfDynamic(path) {
  const b = readFileSync(path);
  if (b.length < 64 || b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2 || b[5] !== 1) return undefined;
  const phoff = Number(b.readBigUInt64LE(32));
  const phentsize = b.readUInt16LE(54);
  const phnum = b.readUInt16LE(56);
  const loads = [];
  let interp;
  let dyn;
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    const type = b.readUInt32LE(o);
    const offset = Number(b.readBigUInt64LE(o + 8));
    const vaddr = Number(b.readBigUInt64LE(o + 16));
    const filesz = Number(b.readBigUInt64LE(o + 32));
    if (type === PT_LOAD) loads.push({ offset, vaddr, filesz });
    else if (type === PT_INTERP) interp = b.subarray(offset, offset + filesz).toString('latin1').replace(/\0.*$/s, '');
    else if (type === PT_DYNAMIC) dyn = { offset, filesz };
  }
  const out = { interp, needed: [], runpath: [] };
  if (!dyn) return out;
  // DT_STRTAB holds a virtual address: map it to a file offset through the PT_LOAD segments.
  const toOffset = (addr) => {
    const seg = loads.find((l) => addr >= l.vaddr && addr < l.vaddr + l.filesz);
    if (!seg) throw new Error(`${path}: dynamic string table at 0x${addr.toString(16)} is outside every PT_LOAD segment`);
    return addr - seg.vaddr + seg.offset;
  };
  const entries = [];
  let strtab;
  for (let o = dyn.offset; o + 16 <= dyn.offset + dyn.filesz; o += 16) {
    const tag = Number(b.readBigInt64LE(o));
    const val = Number(b.readBigUInt64LE(o + 8));
    if (tag === 0) break;
    if (tag === DT_STRTAB) strtab = toOffset(val);
    else entries.push([tag, val]);
  }
  if (strtab === undefined) return out;
  const str = (at) => b.subarray(strtab + at, b.indexOf(0, strtab + at)).toString('latin1');
  for (const [tag, val] of entries) {
    if (tag === DT_NEEDED) out.needed.push(str(val));
    else if (tag === DT_RUNPATH || tag === DT_RPATH) out.runpath.push(...str(val).split(':').filter(Boolean));
  }
  return out;
}
