// A VM as a QEMU command line: a POSIX shell script (comments, then one `exec qemu-system-x86_64`).
// QEMU has most of Unhalt's knobs under the same names, since Unhalt took them from QEMU:
// `-cpu host,kvm-pv-unhalt=on,...`, `-overcommit cpu-pm=on` and `mem-lock=on`. What it has
// not (per-VM halt polling, vCPU pinning) is said in the comments with what to do instead.
import { diskMode, type VmConfig } from '../config/vm-config.ts';
import { formatHostForward, macForVm, type NetConfig } from '../config/net-config.ts';
import { qemuDeviceOption } from '../config/device-config.ts';
import type { HostKind } from '../host.ts';
import { commentLine, describePins, type ExportPlan, haltPollAdvice, machineTypeNote, madeForLine, shellQuote } from './plan.ts';

export const QEMU_BINARY = 'qemu-system-x86_64';

type Option = [flag: string, value?: string];

/**
 * `-cpu host,...` with every paravirt feature at its value (the one mapping of features to QEMU;
 * the bench's side-by-side QEMU runs use it too), kvm-msi-ext-dest-id=off included (QEMU would
 * leave it off with the in-kernel irqchip anyway: written out, the header's "every feature" is
 * true). On PVM, arch-capabilities goes off: QEMU 7.2's -cpu host aborts there setting MSR 0x10a.
 */
export function qemuCpu(features: readonly { name: string; value: boolean }[], hostKind: HostKind): string {
  return ['host', ...(hostKind === 'pvm' ? ['arch-capabilities=off'] : []),
    ...features.map((f) => `${f.name}=${f.value ? 'on' : 'off'}`)].join(',');
}

/** `-overcommit` for cpu-pm and mem-lock, or undefined when both are off (QEMU's defaults). */
export function qemuOvercommit(c: Pick<VmConfig, 'cpuPm' | 'memLock'>): string | undefined {
  return c.cpuPm || c.memLock ? `cpu-pm=${c.cpuPm ? 'on' : 'off'},mem-lock=${c.memLock ? 'on' : 'off'}` : undefined;
}

/** The options in order, each flag with its value. */
function qemuOptions(plan: ExportPlan): Option[] {
  const c = plan.config;
  const opts: Option[] = [
    ['-name', `guest=${c.name},debug-threads=on`],
    ['-machine', 'q35'], ['-accel', 'kvm'], ['-cpu', qemuCpu(plan.features, plan.hostKind)],
    ['-smp', String(c.cpus)], ['-m', String(c.memoryMiB)],
  ];
  const overcommit = qemuOvercommit(c);
  if (overcommit) opts.push(['-overcommit', overcommit]);
  // Unhalt's board: no network, USB or display (disks only as configured below); a reset ends the VM, as in Unhalt.
  opts.push(['-nodefaults'], ['-no-user-config'], ['-display', 'none'], ['-no-reboot']);
  opts.push(['-kernel', plan.boot.kernelPath]);
  if (plan.boot.initrdPath) opts.push(['-initrd', plan.boot.initrdPath]);
  if (plan.boot.cmdline) opts.push(['-append', plan.boot.cmdline]);
  opts.push(['-serial', 'mon:stdio'], ['-serial', `file:${plan.agentLog ?? `${plan.slug}.ttyS1.log`}`]);
  // rng=on: virtio-rng on PCI, fed from the host's getrandom (QEMU's default rng-builtin backend, as Unhalt's device).
  if (c.rng) opts.push(['-device', 'virtio-rng-pci']);
  // disks: raw images on virtio-blk-pci, in order (the first is vda); QEMU locks them as Unhalt does.
  // snapshot=on is QEMU's own option of that name and meaning (its overlay in $TMPDIR, as ours).
  (c.disks ?? []).forEach((d, i) => {
    const mode = diskMode(d);
    const flag = mode === 'read-only' ? ',readonly=on' : mode === 'snapshot' ? ',snapshot=on' : '';
    opts.push(['-drive', `file=${d.path.replace(/,/g, ',,')},if=none,id=disk${i},format=raw${flag}`],
      ['-device', `virtio-blk-pci,drive=disk${i}`]);
  });
  // disable-legacy=on: a modern-only 1af4:1041 as Unhalt's card is (QEMU's default is the transitional 1af4:1000).
  if (c.net) opts.push(['-netdev', qemuNetdev(c.net)], ['-device', `virtio-net-pci,disable-legacy=on,netdev=n0,mac=${macForVm(c.name)}`]);
  // --device isa-debug-exit is QEMU's own device, under its own name and properties.
  for (const d of c.devices ?? []) opts.push(['-device', qemuDeviceOption(d)]);
  return opts;
}

/**
 * `-netdev` for a network: QEMU's user networking is libslirp too, with the same hostfwd syntax
 * (ipv6=off: Unhalt's user network is IPv4 only, QEMU's has IPv6 by default); a tap is the user's.
 */
export function qemuNetdev(n: NetConfig): string {
  if (n.mode === 'tap') return `tap,id=n0,ifname=${n.tap},script=no,downscript=no`;
  return ['user', 'id=n0', 'ipv6=off', ...n.hostfwd.map((f) => `hostfwd=${formatHostForward(f)}`)].join(',');
}

/** The argument vector, without the binary. */
export function qemuArgs(plan: ExportPlan): string[] {
  return qemuOptions(plan).flatMap(([flag, value]) => (value === undefined ? [flag] : [flag, value]));
}

export function qemuScript(plan: ExportPlan): string {
  const c = plan.config;
  const gaps: string[] = [];
  if (c.haltPollNs !== undefined) gaps.push(...haltPollAdvice(c.haltPollNs));
  if (plan.pins) {
    gaps.push(`pin: QEMU does not pin vCPU threads (${describePins(plan.pins)}). With debug-threads=on (below) each`,
      '  vCPU thread is named "CPU N/KVM": pin it with taskset -p -c CPU TID (TIDs in /proc/QEMU_PID/task/*/comm),',
      '  or let libvirt do it (<cputune><vcpupin>, the libvirt export).');
  }
  const lines = [
    '#!/bin/sh',
    `# VM "${c.name}" exported by Unhalt for QEMU with KVM: ${c.cpus} vCPU${c.cpus > 1 ? 's' : ''}, ${c.memoryMiB} MiB, guest ${c.guest}.`,
    ...machineTypeNote(plan, 'q35 with -nodefaults (QEMU\'s "q35" is an alias of its newest pc-q35-X.Y; name the version your fleet runs, from qemu-system-x86_64 -machine help, to freeze the board as well)'),
    ...plan.notes.map((n) => `Note: ${n}.`),
    madeForLine(plan),
    ...(gaps.length ? ['Knobs QEMU has no option for:', ...gaps.map((g) => `  ${g}`)] : ['Every knob of this VM has a QEMU option.']),
    'ttyS0 is this terminal (Ctrl-A x quits, Ctrl-A c switches to the monitor); ttyS1, the guest\'s agent channel, goes to a file.',
  ].map((l) => (l.startsWith('#') ? commentLine(l) : `# ${commentLine(l)}`));
  const body = qemuOptions(plan).map(([flag, value]) => (value === undefined ? flag : `${flag} ${shellQuote(value)}`));
  return `${lines.join('\n')}\nexec ${QEMU_BINARY} \\\n${body.map((b) => `  ${b}`).join(' \\\n')}\n`;
}

