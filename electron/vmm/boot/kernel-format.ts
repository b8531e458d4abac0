// Tells what a kernel file is, so a wrong file gets a message that names what it is not.
import { isElf, parseElf } from './elf.ts';
import { findMultibootHeader } from './multiboot.ts';
import { pvhEntry } from './pvh.ts';

export type KernelFormat = 'pvh-elf' | 'multiboot' | 'elf-without-pvh' | 'bzimage' | 'unknown';

/** An ELF with a PVH note boots by PVH even if it is multiboot too (as Xen's kernels are). */
export function detectKernelFormat(bytes: Uint8Array): KernelFormat {
  if (isElf(bytes)) {
    try {
      if (pvhEntry(parseElf(bytes)) !== undefined) return 'pvh-elf';
    } catch {
      return 'elf-without-pvh';
    }
    return findMultibootHeader(bytes) ? 'multiboot' : 'elf-without-pvh';
  }
  // Linux boot protocol: "HdrS" at 0x202, boot flag 0xAA55 at 0x1FE.
  if (bytes.length > 0x206 && bytes[0x202] === 0x48 && bytes[0x203] === 0x64 && bytes[0x204] === 0x72
    && bytes[0x205] === 0x53) return 'bzimage';
  return findMultibootHeader(bytes) ? 'multiboot' : 'unknown';
}

/** What every refusal of a file that is no kernel says it is not. */
export const NOT_A_KERNEL = 'neither a PVH ELF, a Linux bzImage nor a multiboot kernel';

/** `bytes` may be only the file's head; `fileSize` is what the message reports. */
export function describeUnknownKernel(bytes: Uint8Array, fileSize = bytes.length): string {
  if (fileSize === 0) return 'the kernel file is empty';
  const head = Array.from(bytes.subarray(0, 8), (b) => b.toString(16).padStart(2, '0')).join(' ');
  const text = /^[\x09\x0a\x0d\x20-\x7e]+$/.test(new TextDecoder().decode(bytes.subarray(0, 64)));
  return `the kernel file is ${NOT_A_KERNEL} (${fileSize} bytes, starts with `
    + `${text ? 'text' : head})`;
}
