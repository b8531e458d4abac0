// The builder: turns a resolved MachineSpec and its boot files into a built machine — a KVM VM
// with its memory registered, in-kernel irqchip and PIT, every vCPU created with its CPUID, MSRs,
// LAPIC and (vCPU 0) boot state, the board's device state, the KVM stats fds — and nothing
// running. The runtime (vm.ts) runs what this returns; a test can build one, inspect it and
// close it without a vCPU ever entering the guest (test/kvm/machine-builder.test.ts).
// Whatever fails, everything already opened is closed before the error is thrown.
import { CAP } from '../../../native/kvm/abi.ts';
import { IrqLine, type Kvm, type Vcpu, type Vm } from '../../../native/kvm/kvm.ts';
import { closeFd } from '../../../native/kvm/libc.ts';
import type { BootFiles } from '../boot/boot-files.ts';
import { readBootFilesCached } from '../boot/boot-file-cache.ts';
import { checkInitrd } from '../boot/initrd.ts';
import { LAYOUT } from '../boot/layout.ts';
import { buildCpuid, hostKvmFeatures } from '../cpu/cpuid.ts';
import { setBootCpuState, setBootMsrs, setLapicLints } from '../cpu/boot-state.ts';
import { createDeviceState, versionedBoard, type BoardConfig } from '../devices/board.ts';
import { OpenDisk } from '../devices/virtio/disk-image.ts';
import { createEventFd } from '../../../native/kvm/eventfd.ts';
import { netConfigBytes } from '../devices/virtio/virtio-net.ts';
import { MiB, type GuestMemory } from '../memory/guest-memory.ts';
import type { MachineSpec } from '../machine-spec.ts';
import { probeHost } from '../machine/host-caps.ts';
import { buildGuestImage, kernelFormatOf, type GuestImage } from './guest-image.ts';
import { createVmShell, takeVmShell } from './vm-shells.ts';
import { traceStep } from '../start-trace.ts';

/** A machine ready to run: every resource it holds is released by close(). */
export class BuiltMachine {
  readonly spec: Readonly<MachineSpec>;
  readonly image: GuestImage;
  readonly kvm: Kvm;
  readonly vm: Vm;
  readonly vcpus: readonly Vcpu[];
  /** The board's device state (devices/board.ts), shared by every thread that touches a device. */
  readonly deviceSab: SharedArrayBuffer;
  /** KVM_IRQ_LINE on this VM, usable from any thread. */
  readonly irq: IrqLine;
  /** Which PCI devices the board carries and their eventfds (plain data for every thread). */
  readonly board: BoardConfig;
  /** Written to wake the I/O thread after a command for it (pause, resume, stop; -1 without virtio devices). */
  readonly ioWakeFd: number;
  /** KVM binary stats fds of the VM and each vCPU (-1 where the host's KVM has none). */
  readonly statsFds: { readonly vm: number; readonly vcpus: readonly number[] };
  /** The disks' images, open and locked while the machine exists. */
  readonly disks: readonly OpenDisk[];
  private closed = false;

  constructor(parts: Omit<BuiltMachine, 'memory' | 'close' | 'isClosed'>) {
    this.spec = parts.spec;
    this.image = parts.image;
    this.kvm = parts.kvm;
    this.vm = parts.vm;
    this.vcpus = parts.vcpus;
    this.deviceSab = parts.deviceSab;
    this.irq = parts.irq;
    this.board = parts.board;
    this.ioWakeFd = parts.ioWakeFd;
    this.statsFds = parts.statsFds;
    this.disks = parts.disks;
  }

  get memory(): GuestMemory {
    return this.image.memory;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * Closes every fd, then gives guest RAM's pages back (its SAB goes with the last reference). The
   * VM fd goes last and off this thread: its close destroys the VM in the kernel (Vm.closeInBackground).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const fd of [...this.statsFds.vcpus, this.statsFds.vm]) if (fd >= 0) closeFd(fd);
    for (const fd of [...this.board.virtio.map((d) => d.eventFd), this.ioWakeFd]) if (fd >= 0) closeFd(fd);
    for (const v of this.vcpus) v.close();
    // The I/O thread has ended (the runtime stops it first, runtime/io-thread.ts): nothing serves the disks any more.
    for (const d of this.disks) d.close();
    this.kvm.close();
    if (this.memory.isLocked) this.memory.unlock();
    await this.vm.closeInBackground();
    // KVM has let go of guest RAM: its pages go back now, not when a GC collects the SAB.
    this.memory.discard();
  }
}

/** The KVM capabilities every machine needs, with the name a refusal gives. */
/** Reads the boot files (asynchronously, refusing what cannot fit; small unchanged ones from memory) and builds the machine. */
export async function buildMachineFromFiles(spec: MachineSpec): Promise<BuiltMachine> {
  const files = await readBootFilesCached(spec);
  traceStep('builder: boot files read');
  if (files.initrd) await checkInitrd(files.initrd, spec.initrdPath!);
  return buildMachine(spec, files);
}

/** Builds the machine `spec` describes from boot files already read. */
export async function buildMachine(spec: MachineSpec, files: BootFiles): Promise<BuiltMachine> {
  // The kernel's format first: a file that is no kernel is refused before KVM is touched.
  kernelFormatOf(spec, files);
  const opened: { close(): void }[] = [];
  const statsFds = { vm: -1, vcpus: [] as number[] };
  const eventFds: number[] = [];
  const disks: OpenDisk[] = [];
  let memory: GuestMemory | undefined;
  try {
    // The disks next: a missing, wrong or locked image is refused before KVM is touched.
    for (const d of spec.disks ?? []) {
      const disk = OpenDisk.open(d, spec.name);
      disks.push(disk);
      opened.push(disk);
    }
    // KVM opened, its required capabilities checked, the VM set up with guest RAM: made ahead
    // by a long-lived service (vm-shells.ts), else here. vCPU and host limits were checked
    // before the build by the shared rules (config/rules.ts via resolve.ts).
    const shell = takeVmShell(spec.memoryMiB) ?? await createVmShell(spec.memoryMiB);
    const { kvm, vm } = shell;
    opened.push(kvm, vm);
    memory = shell.memory;
    traceStep('builder: KVM VM set up');
    const image = buildGuestImage(spec, files, shell.memory);
    const mem = image.memory;
    traceStep('builder: guest image loaded');
    if (spec.haltPollNs !== undefined) vm.enableCap(CAP.HALT_POLL, [spec.haltPollNs]);
    // KVM accepts this only before the first vCPU exists.
    if (spec.disableExits) vm.enableCap(CAP.X86_DISABLE_EXITS, [spec.disableExits]);

    const statsEnabled = kvm.checkExtension(CAP.BINARY_STATS_FD) > 0;
    if (statsEnabled) statsFds.vm = vm.statsFd();
    // The host's CPUID as KVM offers it does not change while the process lives: probed once.
    const supported = probeHost().supportedCpuid;
    const host = hostKvmFeatures(supported);
    const kvmFeatures = spec.kvmFeatures ?? host.features;
    const kvmHints = spec.kvmHints ?? host.hints;
    const tscDeadline = kvm.checkExtension(CAP.TSC_DEADLINE_TIMER) > 0;
    const vcpus: Vcpu[] = [];
    for (let i = 0; i < spec.cpus; i++) {
      const vcpu = vm.createVcpu(i);
      vcpus.push(vcpu);
      opened.push(vcpu);
      statsFds.vcpus.push(statsEnabled ? vcpu.statsFd() : -1);
      vcpu.setCpuid2(buildCpuid(supported, { vcpuId: i, cpus: spec.cpus, kvmFeatures, kvmHints, tscDeadline, mwait: spec.mwait ?? false }));
      setBootMsrs(vcpu);
      setLapicLints(vcpu);
      if (i === 0) setBootCpuState(vcpu, mem, image.boot);
    }
    traceStep('builder: vCPUs created');
    const board = boardFor(spec, (cap) => vm.checkExtension(cap), eventFds, disks);
    const ioWakeFd = board.virtio.length ? createEventFd() : -1;
    if (ioWakeFd >= 0) eventFds.push(ioWakeFd);
    // Last, on a thread of its own (GuestMemory.lock): every KVM ioctl above is done by then.
    if (spec.memLock) await mem.lock();
    return new BuiltMachine({
      spec, image, kvm, vm, vcpus, deviceSab: createDeviceState(board), irq: new IrqLine(vm.fd), board, ioWakeFd, statsFds, disks,
    });
  } catch (e) {
    for (const fd of [...statsFds.vcpus, statsFds.vm, ...eventFds]) if (fd >= 0) closeFd(fd);
    for (const r of opened.reverse()) r.close();
    if (memory?.isLocked) memory.unlock();
    throw e;
  }
}

/**
 * The board's PCI devices: one eventfd per virtio device (its I/O thread's wake-up), MSIs through
 * KVM_SIGNAL_MSI (required), notifications by ioeventfd where KVM has them; where the VM's
 * isa-debug-exit sits, if it asked for one; its pc-testdev; and the devices its machine type version adds.
 */
function boardFor(spec: MachineSpec, check: (cap: number) => number, eventFds: number[], disks: readonly OpenDisk[]): BoardConfig {
  const ports: Pick<BoardConfig, 'debugExit' | 'pcTestdev' | 'fwCfg' | 'pmTimer'> = {
    ...(spec.debugExit ? { debugExit: { ...spec.debugExit } } : {}),
    ...(spec.pcTestdev ? { pcTestdev: true } : {}),
    ...versionedBoard(spec.board, { cpus: spec.cpus, ramBytes: spec.memoryMiB * MiB }),
  };
  const names = spec.virtio ?? [];
  if (names.length === 0 && disks.length === 0) return { virtio: [], ...ports };
  if (check(CAP.SIGNAL_MSI) <= 0) throw new Error('this host\'s KVM cannot inject MSIs (no KVM_CAP_SIGNAL_MSI): virtio devices need it; turn them off');
  const virtio: BoardConfig['virtio'] = names.map((name) => {
    const eventFd = createEventFd();
    eventFds.push(eventFd);
    if (name === 'net' && spec.net) return { name, eventFd, deviceConfig: netConfigBytes(spec.net.mac), net: spec.net };
    return { name, eventFd };
  });
  disks.forEach((d, i) => {
    const eventFd = createEventFd();
    eventFds.push(eventFd);
    virtio.push({ name: `blk${i}`, eventFd, disk: d.backend });
  });
  const board: BoardConfig = { virtio, ...ports };
  if (!spec.testHooks?.noIoeventfd && check(CAP.IOEVENTFD) > 0) board.ioeventfdLength = check(CAP.IOEVENTFD_ANY_LENGTH) > 0 ? 0 : 2;
  return board;
}
