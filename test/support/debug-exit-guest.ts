// A PVH kernel of a few instructions that writes one value to one port and halts: what a
// kvm-unit-test does at its end (`out` to isa-debug-exit), without the suite. Made as bytes
// here, so a test needs no compiler and no change to the probe guest.
import { writeFileSync } from 'node:fs';

const LOAD_AT = 0x100000;
const XEN_ELFNOTE_PHYS32_ENTRY = 18;

/** Writes the kernel to `path`: `out port, value` at `width` bytes (1, 2 or 4), then hlt forever. */
export function writeDebugExitKernel(path: string, port: number, value: number, width: 1 | 2 | 4 = 4): void {
  const mov = (op: number, n: number) => [op, n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, (n >>> 24) & 0xff];
  const out = width === 1 ? [0xee] : width === 2 ? [0x66, 0xef] : [0xef];
  // 32-bit protected mode, paging off (PVH): mov edx, port; mov eax, value; out dx, al|ax|eax; hlt; jmp hlt.
  const code = [...mov(0xba, port), ...mov(0xb8, value), ...out, 0xf4, 0xeb, 0xfd];
  const phoff = 52, phnum = 2, noteAt = phoff + phnum * 32, noteSize = 20, codeAt = noteAt + noteSize;
  const b = Buffer.alloc(codeAt + code.length);
  b.set([0x7f, 0x45, 0x4c, 0x46, 1, 1, 1], 0); // ELF32, little-endian, version 1
  b.writeUInt16LE(2, 16); // ET_EXEC
  b.writeUInt16LE(3, 18); // EM_386
  b.writeUInt32LE(1, 20);
  b.writeUInt32LE(LOAD_AT, 24);
  b.writeUInt32LE(phoff, 28);
  b.writeUInt16LE(52, 40);
  b.writeUInt16LE(32, 42);
  b.writeUInt16LE(phnum, 44);
  const phdr = (i: number, type: number, offset: number, addr: number, size: number) => {
    const o = phoff + i * 32;
    [type, offset, addr, addr, size, size, 5, 4].forEach((v, k) => b.writeUInt32LE(v, o + 4 * k));
  };
  phdr(0, 1, codeAt, LOAD_AT, code.length); // PT_LOAD
  phdr(1, 4, noteAt, 0, noteSize); // PT_NOTE
  [4, 4, XEN_ELFNOTE_PHYS32_ENTRY].forEach((v, k) => b.writeUInt32LE(v, noteAt + 4 * k));
  b.write('Xen\0', noteAt + 12, 'latin1');
  b.writeUInt32LE(LOAD_AT, noteAt + 16);
  b.set(code, codeAt);
  writeFileSync(path, b);
}
