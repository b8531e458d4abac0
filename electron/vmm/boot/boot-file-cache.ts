// The boot files of the last starts, kept in memory for the next start of a long-lived process
// (the app, `unhalt serve`): a warm start then costs one stat per file instead of an open, two
// stats, the reads and a close, each a trip to the thread pool. An entry is used only while the file
// on disk is the one that was read (same device, inode, size, modification and change times, to
// the nanosecond): a kernel rebuilt in place is read again. Only small files are kept (the probe
// guest is 90 KiB); a Linux kernel and its initrd are read each time, as their boot dwarfs it.
import { stat } from 'node:fs/promises';
import { readBootFiles, type BootFileSpec, type BootFiles } from './boot-files.ts';

/** Boot files larger than this (kernel and initrd together) are never kept. */
export const MAX_CACHED_BOOT_BYTES = 4 * 1024 * 1024;
/** Distinct boot-file sets kept (least recently used dropped). */
const MAX_ENTRIES = 4;

interface Entry { identity: string; files: BootFiles }
const entries = new Map<string, Entry>();

/**
 * A file's times have the kernel's clock-tick granularity (1-10 ms): a file changed less than
 * this long before it was looked at could change again under the same times, so it is not kept
 * (git's "racily clean" entries, the same way).
 */
const RACY_MS = 50;

/**
 * What makes a file the same file: a changed byte changes mtime/ctime, a replaced file its
 * inode. Undefined: not to be kept (missing, not a file, or changed too recently to tell).
 */
async function identityOf(path: string): Promise<string | undefined> {
  try {
    const s = await stat(path, { bigint: true });
    if (!s.isFile() || Number(s.ctimeNs / 1_000_000n) > Date.now() - RACY_MS) return undefined;
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
  } catch {
    return undefined; // readBootFiles says what is wrong with it
  }
}

/** readBootFiles, from memory when the files have not changed since the last read. */
export async function readBootFilesCached(spec: BootFileSpec): Promise<BootFiles> {
  const key = `${spec.memoryMiB}\0${spec.kernelPath}\0${spec.initrdPath ?? ''}`;
  const ids = await Promise.all([identityOf(spec.kernelPath), spec.initrdPath === undefined ? '' : identityOf(spec.initrdPath)]);
  const identity = ids.every((id) => id !== undefined) ? ids.join('\0') : undefined;
  const hit = entries.get(key);
  if (identity !== undefined && hit?.identity === identity) {
    // Most recently used last.
    entries.delete(key);
    entries.set(key, hit);
    return hit.files;
  }
  const files = await readBootFiles(spec);
  entries.delete(key);
  const bytes = files.kernel.bytes.length + (files.initrd?.length ?? 0);
  // Read after the stat: a file changed in between gets a new identity at the next start.
  if (identity !== undefined && bytes <= MAX_CACHED_BOOT_BYTES) {
    entries.set(key, { identity, files });
    while (entries.size > MAX_ENTRIES) entries.delete(entries.keys().next().value!);
  }
  return files;
}

/** Forgets every kept file (tests; a process that wants the memory back). */
export function clearBootFileCache(): void {
  entries.clear();
}
