// Reading a kernel and an initrd for a boot, without ever reading what cannot be loaded and
// without blocking the calling thread (the service's main thread answers every client):
// - sizes come from fstat first, so an initrd or bzImage larger than the guest's RAM is refused
//   before a byte of it is read ("does not fit");
// - of an ELF kernel only what its program headers load (and their notes) is read — not a
//   gigabyte of trailing data;
// - a file of unknown format is judged by its first bytes only;
// - every read is asynchronous (fs.promises), so a slow or huge file never freezes clients.
import { open, type FileHandle } from 'node:fs/promises';
import { isElf } from './elf.ts';
import { findMultibootHeader, MULTIBOOT_ADDRESS_FIELDS } from './multiboot.ts';

const MiB = 1024 * 1024;
/** Enough to hold an ELF header with its program headers, or a bzImage's setup header. */
export const KERNEL_HEAD_BYTES = 64 * 1024;

export interface KernelImage {
  /** The bytes a loader needs: the loaded extent of an ELF, the whole bzImage, a head otherwise. */
  bytes: Uint8Array;
  /** The file's size on disk (messages name it; `bytes` may be shorter). */
  fileSize: number;
}

export interface BootFiles {
  kernel: KernelImage;
  initrd?: Uint8Array;
}

export interface BootFileSpec {
  kernelPath: string;
  initrdPath?: string;
  memoryMiB: number;
}

/** Reads what a boot loads, refusing what cannot fit in `memoryMiB` before reading it. */
export async function readBootFiles(spec: BootFileSpec): Promise<BootFiles> {
  const kernel = await readKernelImage(spec.kernelPath, spec.memoryMiB);
  if (spec.initrdPath === undefined) return { kernel };
  return { kernel, initrd: await readInitrd(spec.initrdPath, spec.memoryMiB, kernel.bytes.length) };
}

/** The part of a kernel file that a loader uses (see KernelImage.bytes). */
export async function readKernelImage(path: string, memoryMiB?: number): Promise<KernelImage> {
  const fh = await openFile(path, 'kernel');
  try {
    const fileSize = (await fh.stat()).size;
    const head = await readRange(fh, 0, Math.min(fileSize, KERNEL_HEAD_BYTES));
    let want: number;
    if (isElf(head)) {
      want = Math.min(fileSize, await elfExtent(fh, head));
    } else if (isBzImage(head) || (findMultibootHeader(head)?.flags ?? 0) & MULTIBOOT_ADDRESS_FIELDS) {
      // A bzImage is loaded whole (its compressed kernel unpacks itself inside the guest); so is a
      // multiboot kernel that is no ELF (its header's addresses say which part loads).
      want = fileSize;
    } else {
      return { bytes: head, fileSize };
    }
    // Before reading past the head: a size that cannot fit is refused from fstat alone.
    if (memoryMiB !== undefined) refuseUnfit('kernel', path, want, memoryMiB * MiB);
    const bytes = want <= head.length ? head.subarray(0, want) : await readRange(fh, 0, want);
    return { bytes, fileSize };
  } finally {
    await fh.close();
  }
}

async function readInitrd(path: string, memoryMiB: number, kernelBytes: number): Promise<Uint8Array> {
  const fh = await openFile(path, 'initrd');
  try {
    const size = (await fh.stat()).size;
    refuseUnfit('initrd', path, size, memoryMiB * MiB - kernelBytes);
    return await readRange(fh, 0, size);
  } finally {
    await fh.close();
  }
}

/** The same "does not fit" rule for every check that knows a size before reading. */
export function refuseUnfit(what: 'kernel' | 'initrd', path: string, bytes: number, roomBytes: number): void {
  if (bytes <= roomBytes) return;
  throw new Error(`${what} ${path} is ${(bytes / MiB).toFixed(1)} MiB and does not fit in the guest's memory `
    + `(${(Math.max(0, roomBytes) / MiB).toFixed(1)} MiB left for it): give the VM more memory or use a smaller ${what}`);
}

export function isBzImage(b: Uint8Array): boolean {
  // Linux boot protocol: "HdrS" at 0x202.
  return b.length > 0x206 && b[0x202] === 0x48 && b[0x203] === 0x64 && b[0x204] === 0x72 && b[0x205] === 0x53;
}

/**
 * The end of what an ELF's loader reads: its program header table and every segment's file
 * bytes. A header that does not parse gives the whole head back, so parseElf names the problem.
 */
async function elfExtent(fh: FileHandle, head: Uint8Array): Promise<number> {
  if (head.length < 64) return head.length;
  const v = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const is64 = head[4] === 2;
  const phoff = is64 ? Number(v.getBigUint64(32, true)) : v.getUint32(28, true);
  const phentsize = v.getUint16(is64 ? 54 : 42, true);
  const phnum = v.getUint16(is64 ? 56 : 44, true);
  const tableEnd = phoff + phentsize * phnum;
  if (phentsize < (is64 ? 56 : 32) || !Number.isSafeInteger(tableEnd)) return head.length;
  const table = tableEnd <= head.length ? head : await readRange(fh, 0, tableEnd);
  if (table.length < tableEnd) return table.length;
  const t = new DataView(table.buffer, table.byteOffset, table.byteLength);
  let end = tableEnd;
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    const offset = is64 ? Number(t.getBigUint64(o + 8, true)) : t.getUint32(o + 4, true);
    const filesz = is64 ? Number(t.getBigUint64(o + 32, true)) : t.getUint32(o + 16, true);
    end = Math.max(end, offset + filesz);
  }
  return Math.max(end, head.length);
}

async function openFile(path: string, what: string): Promise<FileHandle> {
  let fh: FileHandle;
  try {
    fh = await open(path, 'r');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new Error(`${what} not found: ${path}`);
    if (code === 'EISDIR') throw new Error(`${what} is a directory, not a file: ${path}`);
    if (code === 'EACCES') throw new Error(`${what} is not readable: ${path}`);
    throw new Error(`cannot read ${what} ${path}: ${(e as Error).message}`);
  }
  const st = await fh.stat();
  if (!st.isFile()) {
    await fh.close();
    throw new Error(st.isDirectory() ? `${what} is a directory, not a file: ${path}` : `${what} is not a regular file: ${path}`);
  }
  return fh;
}

async function readRange(fh: FileHandle, position: number, length: number): Promise<Uint8Array> {
  const buf = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return buf.subarray(0, got);
}
