// What the service checks about a VM configuration beyond its schema (validateConfig): that its
// numbers fit this host, and that a custom kernel and initrd are real files of the right kind.
// Files are only inspected here; their content never goes back through the API — messages name
// the path the user gave and what is wrong with it, nothing read from it. They must lie inside
// the allowed folders (allowed-folders.ts), fit in the VM's memory by their size alone, and are
// read asynchronously and only as far as a loader would (boot-files.ts): this runs on the thread
// that answers every client.
import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { allowedHostCpus } from '../../native/kvm/affinity.ts';
import type { AllowedFolder } from './api.ts';
import { readKernelImage, refuseUnfit } from '../vmm/boot/boot-files.ts';
import { detectKernelFormat } from '../vmm/boot/kernel-format.ts';
import type { VmConfig } from '../vmm/config/vm-config.ts';
import { hostMemoryBytes } from '../vmm/host.ts';
import { confineToAllowedFolders } from './allowed-folders.ts';
import { ApiError } from './errors.ts';
import { clip } from './validate.ts';

/** Kernels and initrds larger than this are refused (guest RAM could not hold them anyway). */
export const MAX_BOOT_FILE_BYTES = 1024 * 1024 * 1024;
const MiB = 1024 * 1024;

export async function checkBootFiles(c: VmConfig, folders: readonly AllowedFolder[]): Promise<void> {
  let kernelBytes = 0;
  if (c.kernel !== undefined) {
    checkFile(c.kernel, 'kernel', folders);
    const image = await inApiTerms(() => readKernelImage(c.kernel!, c.memoryMiB));
    kernelBytes = image.bytes.length;
    const format = detectKernelFormat(image.bytes);
    if (format === 'unknown') throw new ApiError('invalid', `kernel ${clip(c.kernel, 200)} is neither a PVH ELF nor a Linux bzImage`);
    if (format === 'elf-without-pvh') {
      throw new ApiError('invalid', `kernel ${clip(c.kernel, 200)} is an ELF without a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY); build it with CONFIG_PVH=y or use its bzImage`);
    }
  }
  if (c.initrd !== undefined) {
    const size = checkFile(c.initrd, 'initrd', folders);
    await inApiTerms(async () => refuseUnfit('initrd', clip(c.initrd!, 200), size, c.memoryMiB * MiB - kernelBytes));
  }
}

/** The boot-file reader's plain errors are about the user's file: 'invalid', not 'internal'. */
async function inApiTerms<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw e instanceof ApiError ? e : new ApiError('invalid', (e as Error).message);
  }
}

function checkFile(path: string, what: string, folders: readonly AllowedFolder[]): number {
  const shown = clip(path, 200);
  // Relative paths would depend on where the app or the server happened to be started.
  if (!isAbsolute(path)) throw new ApiError('invalid', `${what} must be an absolute path, got "${shown}"`);
  let st;
  try {
    st = statSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new ApiError('invalid', code === 'ENOENT' || code === 'ENOTDIR' ? `${what} not found: ${shown}` : `${what} ${shown} cannot be opened (${code})`);
  }
  if (!st.isFile()) throw new ApiError('invalid', `${what} is not a regular file: ${shown}`);
  if (st.size === 0) throw new ApiError('invalid', `${what} is empty: ${shown}`);
  if (st.size > MAX_BOOT_FILE_BYTES) throw new ApiError('invalid', `${what} ${shown} is ${Math.round(st.size / 1048576)} MiB; at most ${MAX_BOOT_FILE_BYTES / 1048576} MiB are allowed`);
  confineToAllowedFolders(path, what, folders);
  try {
    accessSync(path, constants.R_OK);
  } catch {
    throw new ApiError('invalid', `${what} is not readable: ${shown}`);
  }
  return st.size;
}

/** Refuses what this host could never run: more memory than it has, CPUs it lacks. */
export function checkHostLimits(c: VmConfig, maxVcpus: number | undefined): void {
  const hostMiB = Math.floor(hostMemoryBytes() / 1048576);
  if (c.memoryMiB > hostMiB) throw new ApiError('invalid', `memory ${c.memoryMiB} MiB is more than this host has (${hostMiB} MiB)`);
  if (maxVcpus !== undefined && c.cpus > maxVcpus) throw new ApiError('invalid', `cpus=${c.cpus} is more than this host's KVM allows (${maxVcpus})`);
  if (c.pin) {
    const allowed = allowedHostCpus();
    const missing = c.pin.filter((p) => !allowed.includes(p));
    if (missing.length) throw new ApiError('invalid', `pin: host CPU ${missing[0]} does not exist or is not available to Unhalt (available: ${allowed.join(',')})`);
  }
}

/** VMM start errors may describe a kernel file's first bytes: keep those on this side. */
export function sanitizeVmError(message: string): string {
  return message.replace(/\s*\(\d+ bytes, starts with [^)]*\)/g, '');
}
