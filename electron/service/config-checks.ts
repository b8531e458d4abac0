// What the service checks about a VM configuration beyond its schema (validateConfig): that its
// numbers fit this host, and that a custom kernel and initrd are real files of the right kind.
// Files are only inspected here; their content never goes back through the API — messages name
// the path the user gave and what is wrong with it, nothing read from it.
import { accessSync, closeSync, constants, openSync, readSync, statSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { allowedHostCpus } from '../../native/kvm/affinity.ts';
import { detectKernelFormat } from '../vmm/boot/kernel-format.ts';
import type { VmConfig } from '../vmm/config/vm-config.ts';
import { hostMemoryBytes } from '../vmm/host.ts';
import { ApiError } from './errors.ts';
import { clip } from './validate.ts';

/** Kernels and initrds larger than this are refused (guest RAM could not hold them anyway). */
export const MAX_BOOT_FILE_BYTES = 1024 * 1024 * 1024;
/** Enough of a kernel to find its format: the bzImage header, or an ELF's headers and notes. */
const KERNEL_PROBE_BYTES = 64 * 1024 * 1024;

export function checkBootFiles(c: VmConfig): void {
  if (c.kernel !== undefined) {
    const size = checkFile(c.kernel, 'kernel');
    const format = detectKernelFormat(readHead(c.kernel, Math.min(size, KERNEL_PROBE_BYTES)));
    if (format === 'unknown') throw new ApiError('invalid', `kernel ${clip(c.kernel, 200)} is neither a PVH ELF nor a Linux bzImage`);
    if (format === 'elf-without-pvh') {
      throw new ApiError('invalid', `kernel ${clip(c.kernel, 200)} is an ELF without a PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY); build it with CONFIG_PVH=y or use its bzImage`);
    }
  }
  if (c.initrd !== undefined) checkFile(c.initrd, 'initrd');
}

function checkFile(path: string, what: string): number {
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
  try {
    accessSync(path, constants.R_OK);
  } catch {
    throw new ApiError('invalid', `${what} is not readable: ${shown}`);
  }
  return st.size;
}

function readHead(path: string, n: number): Uint8Array {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      const r = readSync(fd, buf, got, n - got, got);
      if (r === 0) break;
      got += r;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
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
