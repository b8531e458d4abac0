// The one check of a configuration's kernel, initrd and disk files, for every surface that starts or
// stores a VM (`unhalt run`, the service): a regular, readable, non-empty file of a size a guest
// could hold, and a kernel in a format Unhalt boots. Messages name the path the user gave and
// what is wrong with it — never anything read from the file (the service passes them to clients).
// Reads are asynchronous and only as far as a loader would read (boot-files.ts).
import { accessSync, constants, statSync } from 'node:fs';
import { ConfigError, diskMode, type VmConfig } from '../config/vm-config.ts';
import { readKernelImage, refuseUnfit } from './boot-files.ts';
import { parseElf } from './elf.ts';
import { detectKernelFormat, NOT_A_KERNEL } from './kernel-format.ts';
import { planMultiboot } from './multiboot.ts';
import { checkDiskImage } from '../devices/virtio/disk-image.ts';
import { shownPath } from '../config/shown-path.ts';

/** Kernels and initrds larger than this are refused (guest RAM could not hold them anyway). */
export const MAX_BOOT_FILE_BYTES = 1024 * 1024 * 1024;
const MiB = 1024 * 1024;

/** A policy of the caller about where files may come from (the service's allowed folders). */
export type ConfineFile = (path: string, what: 'kernel' | 'initrd' | 'disk') => void;

export { shownPath };

/** That `path` is a file a boot could load (not its content); returns its size. Throws ConfigError. */
export function statBootFile(path: string, what: 'kernel' | 'initrd', confine?: ConfineFile): number {
  const shown = shownPath(path);
  // The caller's policy first: outside the allowed folders is refused alike whether a file is
  // there or not, so nothing outside can be probed for existence, type or size.
  confine?.(path, what);
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ConfigError(code === 'ENOENT' || code === 'ENOTDIR' ? `${what} not found: ${shown}` : `${what} ${shown} cannot be opened (${code})`);
  }
  if (!st.isFile()) throw new ConfigError(`${what} is not a regular file: ${shown}`);
  if (st.size === 0) throw new ConfigError(`${what} is empty: ${shown}`);
  if (st.size > MAX_BOOT_FILE_BYTES) throw new ConfigError(`${what} ${shown} is ${Math.round(st.size / MiB)} MiB; at most ${MAX_BOOT_FILE_BYTES / MiB} MiB are allowed`);
  try {
    accessSync(path, constants.R_OK);
  } catch {
    throw new ConfigError(`${what} is not readable: ${shown}`);
  }
  return st.size;
}

/** The kernel and initrd a configuration names (built-in guests' own files are not checked here). */
export async function checkBootFiles(c: Pick<VmConfig, 'kernel' | 'initrd' | 'memoryMiB' | 'disks'>, confine?: ConfineFile): Promise<void> {
  // Disk images: the image rules (devices/virtio/disk-image.ts), confined as a boot file is (after
  // the stat, before anything is read).
  for (const d of c.disks ?? []) {
    checkDiskImage({ path: d.path, readonly: diskMode(d) === 'read-only', snapshot: diskMode(d) === 'snapshot' }, confine && ((p) => confine(p, 'disk')));
  }
  let kernelBytes = 0;
  if (c.kernel !== undefined) {
    statBootFile(c.kernel, 'kernel', confine);
    const image = await asConfigError(() => readKernelImage(c.kernel!, c.memoryMiB));
    kernelBytes = image.bytes.length;
    const format = detectKernelFormat(image.bytes);
    const shown = shownPath(c.kernel);
    if (format === 'unknown') throw new ConfigError(`kernel ${shown} is ${NOT_A_KERNEL}`);
    if (format === 'multiboot') {
      try {
        planMultiboot(image.bytes);
      } catch (e) {
        throw new ConfigError(`kernel ${shown}: ${(e as Error).message.replace(/^kernel /, '')}`);
      }
    }
    if (format === 'elf-without-pvh') {
      // An ELF that does not even parse (truncated, not x86) says what is wrong with it.
      try {
        parseElf(image.bytes, 'kernel');
      } catch (e) {
        throw new ConfigError(`kernel ${shown}: ${(e as Error).message.replace(/^kernel: /, '')}`);
      }
      throw new ConfigError(`kernel ${shown} is an ELF without a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY); build it with CONFIG_PVH=y or use its bzImage`);
    }
  }
  if (c.initrd !== undefined) {
    const size = statBootFile(c.initrd, 'initrd', confine);
    await asConfigError(async () => refuseUnfit('initrd', shownPath(c.initrd!), size, c.memoryMiB * MiB - kernelBytes));
  }
}

/** The boot-file reader's plain errors are about the user's file. */
async function asConfigError<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof ConfigError ? e : new ConfigError((e as Error).message);
  }
}
