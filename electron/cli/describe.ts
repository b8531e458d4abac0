// Human-readable resolved configuration (`unhalt run --dry-run`) and machine list (`unhalt machines`).
import { USER_NET, type NetConfig } from '../vmm/config/net-config.ts';
import { commandLine } from '../vmm/config/cli-args.ts';
import type { ResolvedMachine } from '../vmm/config/resolve.ts';
import { diskModeNote, type VmConfig } from '../vmm/config/vm-config.ts';
import { PV_FEATURES } from '../vmm/machine/features.ts';
import { PVM_PROFILE_PARAMS } from '../vmm/guests-linux.ts';
import { disableExitNames } from '../vmm/machine/host-caps.ts';
import { DISK_SLOT_BASE, VIRTIO_DEVICES } from '../vmm/devices/board.ts';
import { MACHINE_ALIAS, MACHINE_TYPES, NEWEST_MACHINE } from '../vmm/machine/machine-types.ts';

const hex = (n: number) => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;

export function describeResolution(c: VmConfig, r: ResolvedMachine): string {
  const { spec, resolution: res } = r;
  const lines = [
    `name:          ${c.name}`,
    `guest:         ${c.guest}  (kernel ${spec.kernelPath}${spec.initrdPath ? `, initrd ${spec.initrdPath}` : ''})`,
    `command line:  ${spec.cmdline || '(empty)'}`,
    ...(c.guest === 'linux' && spec.cmdline.includes(PVM_PROFILE_PARAMS)
      ? [`               (PVM profile added: ${PVM_PROFILE_PARAMS}; --pvm-profile off drops it)`] : []),
    `cpus:          ${spec.cpus}`,
    `memory:        ${spec.memoryMiB} MiB${c.memLock ? ' (locked)' : ''}`,
    `machine:       ${res.machine}`,
    `CPUID 0x40000001: eax=${hex(res.kvmFeatures)} edx=${hex(res.kvmHints)}`,
    'features:',
    ...res.features.map((f) => `  ${f.name.padEnd(22)} ${f.value ? 'on ' : 'off'}  (${f.source === 'machine-type' ? `${res.machine} default` : f.source === 'explicit' ? 'set explicitly' : 'turned off by cpu-pm=on'})`),
    `exits disabled: ${res.disableExits ? disableExitNames(res.disableExits).join(', ') : 'none (cpu-pm=off)'}`,
    `mwait in guest: ${res.mwait ? 'yes' : 'no'}`,
    `halt polling:  ${spec.haltPollNs === undefined ? 'host default' : `max ${spec.haltPollNs} ns`}`,
    ...(c.guestHaltPollNs === undefined ? [] : [`guest polling: ${guestPollText(c.guestHaltPollNs, res.features.some((f) => f.name === 'kvm-poll-control' && f.value))}`]),
    `PCI devices:   host bridge 00:00.0${(spec.virtio ?? []).map((d) => `, virtio-${d} 00:${VIRTIO_DEVICES[d].slot.toString(16).padStart(2, '0')}.0`).join('')}`
      + (spec.disks ?? []).map((d, i) => `, virtio-blk 00:${(DISK_SLOT_BASE + i).toString(16).padStart(2, '0')}.0 (${[d.path, diskModeNote(d)].filter(Boolean).join(', ')})`).join(''),
    ...(spec.net ? [`network:       ${describeNet(spec.net.backEnd)}, MAC ${spec.net.mac}`] : []),
    ...(spec.board?.fwCfg || spec.board?.pmTimer
      ? [`board devices: ${[spec.board.fwCfg ? 'fw_cfg 0x510-0x511' : '', spec.board.pmTimer ? 'ACPI PM timer 0x608' : ''].filter(Boolean).join(', ')} (${res.machine})`] : []),
    ...(spec.debugExit ? [`isa-debug-exit: ports 0x${spec.debugExit.iobase.toString(16)}-0x${(spec.debugExit.iobase + spec.debugExit.iosize - 1).toString(16)}; a guest write of V ends the run with exit status (V << 1) | 1`] : []),
    ...(spec.pcTestdev ? ['pc-testdev:    ports 0xe0-0xeb, IRQ-line ports 0x2000-0x2017, MMIO 0xff000000-0xff00ffff'] : []),
    `pinning:       ${spec.pin ? spec.pin.map((h, i) => `vCPU${i}->CPU${h}`).join(' ') : 'none'}`,
    ...res.notes.map((n) => `note: ${n}`),
    ...res.warnings.map((w) => `warning: ${w}`),
    `equivalent:    ${commandLine(c)}`,
  ];
  return `${lines.join('\n')}\n`;
}

/** Who polls when the guest's cpuidle-haltpoll is forced: kvm-poll-control decides whether the host still does. */
export function guestPollText(ns: number, pollControl: boolean): string {
  return `cpuidle-haltpoll forced, guest_halt_poll_ns ${ns} (the kernel parameters above); `
    + (pollControl ? 'kvm-poll-control on: the guest turns host polling off for its vCPUs' : 'kvm-poll-control off: host and guest both poll');
}

function describeNet(n: NetConfig): string {
  if (n.mode === 'tap') return `tap ${n.tap}`;
  const fwd = n.hostfwd.map((f) => `${f.protocol} ${f.hostAddress}:${f.hostPort} -> ${f.guestAddress}:${f.guestPort}`);
  return `user (libslirp: ${USER_NET.network}/24, gateway ${USER_NET.gateway}, DNS ${USER_NET.nameserver}, DHCP from ${USER_NET.dhcpStart})${fwd.length ? `; forwards ${fwd.join(', ')}` : ''}`;
}

export function describeMachines(): string {
  const out: string[] = [];
  for (const m of MACHINE_TYPES) {
    out.push(`${m.name}${m.name === NEWEST_MACHINE ? ` (alias: ${MACHINE_ALIAS})` : ''}: ${m.summary}`);
    out.push(`  changes: ${m.changes}`);
    out.push(`  ${PV_FEATURES.map((f) => `${f.name}=${m.defaults[f.name] ? 'on' : 'off'}`).join(' ')}`);
    out.push(`  board: fw_cfg=${m.board.fwCfg ? 'on' : 'off'} pm-timer=${m.board.pmTimer ? 'on' : 'off'}`);
  }
  return `${out.join('\n')}\n`;
}
