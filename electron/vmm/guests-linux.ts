// The built-in Linux guest: Debian's cloud kernel and our initramfs, built by
// native/guest/linux/build-kit.mjs into assets/guests/linux/. Also its default command line and
// the PVM profile (what keeps a stock kernel away from instructions PVM's emulator lacks).
import { existsSync, readFileSync } from 'node:fs';
import type { HostKind } from './host.ts';
import { GUEST_DIR } from './guests.ts';

export const LINUX_KIT_DIR = `${GUEST_DIR}linux/`;
/** Debian's /boot/vmlinuz-*: booted through the Linux 64-bit boot protocol. */
export const LINUX_BZIMAGE = `${LINUX_KIT_DIR}bzImage`;
/** The ELF inside the bzImage: booted through PVH (CONFIG_PVH=y). */
export const LINUX_VMLINUX = `${LINUX_KIT_DIR}vmlinux`;
/** busybox, /init and the agent (cpio newc, gzip). */
export const LINUX_INITRD = `${LINUX_KIT_DIR}initramfs.cpio.gz`;
export const LINUX_KIT_STAMP = `${LINUX_KIT_DIR}kit.json`;
export const LINUX_KIT_BUILD_HINT = 'run "npm run build:linux" (fetches Debian\'s cloud kernel and busybox with apt-get)';
/**
 * The Linux workloads built for this host (native/guest/linux/build-workloads.mjs, also run by
 * build:linux): the bare-metal reference, printing the agent's `@u1` lines on stdout.
 */
export const LINUX_HOST_WORKLOAD = `${LINUX_KIT_DIR}host/unhalt-workload`;
/** The guest agent built for this host; `--stdio` serves its ttyS1 commands on stdin/stdout. */
export const LINUX_HOST_AGENT = `${LINUX_KIT_DIR}host/unhalt-agent`;
/**
 * The workloads disk (native/guest/linux/build-workloads-disk.mjs): Debian's perf, cyclictest,
 * iperf3, stress-ng and sockperf with their libraries on an ext4 image the kit's /init mounts read-only at
 * /opt/workloads; `unhalt bench` attaches it for the tool workloads.
 */
export const LINUX_WORKLOADS_DISK = `${LINUX_KIT_DIR}workloads.ext4`;
/** The same tree unpacked: bin/TOOL runs each tool with its bundled libraries (on the host too). */
export const LINUX_WORKLOADS_TREE = `${LINUX_KIT_DIR}workloads/`;
export const LINUX_WORKLOADS_DISK_HINT = 'run "npm run build:linux" (or node native/guest/linux/build-workloads-disk.mjs; fetches the Debian packages with apt-get)';
export const LINUX_HOST_BUILD_HINT = 'run "node native/guest/linux/build-workloads.mjs" (needs gcc; "npm run build:linux" builds it too)';

export function linuxKitBuilt(): boolean {
  return existsSync(LINUX_BZIMAGE) && existsSync(LINUX_INITRD);
}

export interface LinuxKitInfo {
  kernel: { package: string; version: string; file: string };
  busybox: { package: string; version: string };
  builtAt: string;
}

/** What the kit was built from (kit.json), or undefined when it is not built. */
export function linuxKitInfo(): LinuxKitInfo | undefined {
  try {
    return JSON.parse(readFileSync(LINUX_KIT_STAMP, 'utf8')) as LinuxKitInfo;
  } catch {
    return undefined;
  }
}

/**
 * The default command line: the console on ttyS0 with an early console so lines arrive as they
 * are printed; on a panic reboot at once (the VM then ends instead of hanging); skip the IO-APIC
 * timer check that virtual machines need not pass. PCI is on: the kernel finds the host bridge
 * (DSDT \_SB.PCI0, configuration mechanism #1) and any virtio-pci device by itself.
 */
export const LINUX_DEFAULT_CMDLINE = 'console=ttyS0 earlycon=uart8250,io,0x3f8 panic=-1 reboot=acpi no_timer_check';

/**
 * On PVM hosts (guest ring 0 emulated): measured with QEMU and kvmtool on Debian's 6.1 kernel,
 * these get it past CMPXCHG16B and XRSTOR, which the emulator lacks (hiding XSAVE in CPUID
 * alone does not). It still dies at the int3 self-test after `x86/fpu:`.
 */
export const PVM_PROFILE_PARAMS = 'clearcpuid=cx16 noxsave';

/** Appends words of `extra` that the command line does not already have (by parameter name). */
export function appendParams(cmdline: string, extra: string): string {
  const words = cmdline.split(/\s+/).filter(Boolean);
  const names = new Set(words.map((w) => w.split('=')[0]));
  const add = extra.split(/\s+/).filter((w) => w && !names.has(w.split('=')[0]));
  return [...words, ...add].join(' ');
}

/**
 * The command line a Linux guest boots with: the user's (or the default), plus the PVM profile
 * on PVM hosts unless turned off.
 */
export function linuxCmdline(opts: { append?: string; hostKind: HostKind; pvmProfile?: boolean }): string {
  const base = opts.append ?? LINUX_DEFAULT_CMDLINE;
  return opts.hostKind === 'pvm' && opts.pvmProfile !== false ? appendParams(base, PVM_PROFILE_PARAMS) : base.trim();
}
