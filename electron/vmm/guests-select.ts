// Which built-in guest a VM gets, and the files and command line a Linux guest boots with.
import type { HostKind } from './host.ts';
import { ConfigError, type VmConfig } from './config/vm-config.ts';
import {
  LINUX_BZIMAGE, LINUX_INITRD, LINUX_KIT_BUILD_HINT, LINUX_KIT_DIR, LINUX_VMLINUX, linuxCmdline, linuxKitBuilt,
} from './guests-linux.ts';
import { existsSync } from 'node:fs';

export interface GuestFiles {
  kernel: string;
  initrd?: string;
  cmdline: string;
}

export function linuxGuestFiles(c: VmConfig, kind: HostKind): GuestFiles {
  if (!linuxKitBuilt()) throw new ConfigError(`the Linux guest kit is not built (${LINUX_KIT_DIR}): ${LINUX_KIT_BUILD_HINT}`);
  // On PVM the bzImage spends ~125 s unpacking itself in emulated ring 0; the vmlinux inside it
  // boots through PVH and skips that. On real hardware the bzImage is the usual path.
  const kernel = kind === 'pvm' && existsSync(LINUX_VMLINUX) ? LINUX_VMLINUX : LINUX_BZIMAGE;
  const files: GuestFiles = { kernel, cmdline: linuxCmdline({ append: c.append, hostKind: kind, pvmProfile: c.pvmProfile }) };
  files.initrd = c.initrd ?? LINUX_INITRD;
  return files;
}

/**
 * The guest a new VM gets when the user names none, and why: one answer and one wording for the
 * command line (`unhalt run`'s note) and the app (HostInfo.defaultGuest).
 */
export function defaultGuest(kind: HostKind, linuxBuilt = linuxKitBuilt()): { kind: 'probe' | 'linux'; reason: string } {
  if (kind === 'pvm') return { kind: 'probe', reason: 'this host is PVM, where a stock Linux kernel cannot finish booting' };
  if (!linuxBuilt) return { kind: 'probe', reason: `the Linux guest kit is not built (${LINUX_KIT_BUILD_HINT})` };
  return { kind: 'linux', reason: 'hardware-backed KVM and the Linux guest kit is built' };
}
