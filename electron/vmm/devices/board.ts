// The board: which device answers which ports, PCI slots and IRQ lines (docs/guest-contract.md),
// each registered once (PORT_DEVICES, VIRTIO_DEVICES), and where each device's state sits in the
// one shared device SAB (DEVICE_LAYOUT, computed from those lists). The main thread creates the
// SAB once per VM and hands it to every vCPU worker; each thread then calls attachDevices /
// attachPci with its own I/O callbacks and gets its own PortBus and PCI functions over the same state.

import { AcpiPm, ACPI_PM_BASE, ACPI_PM_LENGTH, ACPI_PM_STATE_WORDS, SCI_IRQ } from './acpi-pm.ts';
import { DebugExit, DEBUG_EXIT_LENGTH, DEBUG_EXIT_PORT } from './debug-exit.ts';
import { readAllOnes } from './floating-bus.ts';
import { FwCfg, fwCfgItems, FW_CFG_LENGTH, FW_CFG_PORT, FW_CFG_STATE_WORDS, type FwCfgMachine } from './fw-cfg.ts';
import { I8042, I8042_COMMAND_PORT, I8042_DATA_PORT } from './i8042.ts';
import { PmTimer, PM_TMR_LENGTH, PM_TMR_PORT } from './pm-timer.ts';
import {
  PcTestdev, PC_TESTDEV_FLUSH_PORT, PC_TESTDEV_IRQ_LINES, PC_TESTDEV_IRQ_PORT, PC_TESTDEV_SCRATCH_BYTE_PORT, PC_TESTDEV_SCRATCH_PORT,
  PC_TESTDEV_STATE_WORDS,
} from './pc-testdev.ts';
import type { BoardProperties } from '../machine/machine-types.ts';
import { PortBus, UNHANDLED_TABLE_WORDS } from './port-bus.ts';
import { POST_PORT, POST_STATE_WORDS, PostPort } from './post-port.ts';
import { SharedLock } from './shared-lock.ts';
import { layOut } from './state-layout.ts';
import { Uart16550, UART_STATE_WORDS } from './uart16550.ts';
import { PCI_CONFIG_WORDS } from './pci/pci-config.ts';
import { HostBridge, PCI_CONFIG_ADDRESS_PORT, PCI_CONFIG_DATA_PORT, PCI_HOST_STATE_WORDS, PciHost, type PciFunction } from './pci/pci-host.ts';
import { VirtioPci } from './virtio/virtio-pci.ts';
import { MSIX_BAR_SIZE, REGS_BAR_SIZE, virtioStateWords } from './virtio/virtio-pci-regs.ts';
import { withDeviceConfig, type VirtioDeviceType } from './virtio/virtio-device-type.ts';
import { VIRTIO_RNG_SHAPE, virtioRngType, type EntropyIo } from './virtio/virtio-rng.ts';
import { VIRTIO_NET } from './virtio/virtio-net.ts';
import type { NetConfig } from '../config/net-config.ts';
import { BLK_STAT_SLOTS, VIRTIO_BLK_SHAPE, virtioBlkType, type BlkFileIo } from './virtio/virtio-blk.ts';
import type { DiskBackend } from './virtio/disk-image.ts';
import { MAX_DISKS } from '../config/limits.ts';

export const COM1_BASE = 0x3f8;
export const COM1_IRQ = 4;
export const COM2_BASE = 0x2f8;
export const COM2_IRQ = 3;
/** Disk i sits in PCI slot DISK_SLOT_BASE + i (slots below are left to other virtio devices). */
export const DISK_SLOT_BASE = 8;

/** A device on the port bus, registered once in PORT_DEVICES. */
interface PortDeviceRegistration {
  /** Int32 words of shared state in the device SAB (0: it keeps none). */
  readonly words: number;
  /** Power-on state, written once per VM (createDeviceState). */
  readonly init?: (state: Int32Array) => void;
  /**
   * Maps its ports on one thread's bus, over its shared words, with that thread's callbacks and
   * the VM's board (the same plain data on every thread: where a configured device sits).
   */
  readonly attach: (bus: PortMap, state: Int32Array, io: DeviceIo, board: BoardConfig) => void;
}

/** All a registration does with the bus: claim ports (boardPortUser records them through it). */
type PortMap = Pick<PortBus, 'map'>;

/** A 16550 at `base` on ISA line `irq`; `emitOf` picks the ring its transmitted bytes go to. */
function uart(base: number, irq: number, emitOf: (io: DeviceIo) => (byte: number) => void): PortDeviceRegistration {
  return {
    words: UART_STATE_WORDS,
    init: (state) => Uart16550.initState(state),
    attach: (bus, state, io) => {
      const com = new Uart16550(state, { emit: emitOf(io), setIrq: (level) => io.setIrq(irq, level) });
      bus.map({ base, length: 8, byteWide: true, read: (o) => com.read(o), write: (o, _s, v) => com.write(o, v) });
    },
  };
}

/**
 * The port devices, in the order every thread maps them (docs/guest-contract.md). A new one is
 * one entry: DEVICE_LAYOUT gives it its words, attachDevices puts it on every thread's bus.
 */
export const PORT_DEVICES = Object.freeze({
  com1: uart(COM1_BASE, COM1_IRQ, (io) => (b) => io.emitConsole(b)),
  com2: uart(COM2_BASE, COM2_IRQ, (io) => (b) => io.emitAgent(b)),
  i8042: {
    words: 0,
    attach: (bus, _state, io) => {
      const kbc = new I8042(io);
      bus.map({ base: I8042_DATA_PORT, length: 1, byteWide: true, read: () => kbc.read(I8042_DATA_PORT), write: (_o, _s, v) => kbc.write(I8042_DATA_PORT, v) });
      bus.map({ base: I8042_COMMAND_PORT, length: 1, byteWide: true, read: () => kbc.read(I8042_COMMAND_PORT), write: (_o, _s, v) => kbc.write(I8042_COMMAND_PORT, v) });
    },
  },
  acpiPm: {
    words: ACPI_PM_STATE_WORDS,
    attach: (bus, state, io) => {
      const pm = new AcpiPm(state, { onPowerOff: () => io.onPowerOff(), setSci: (level) => io.setIrq(SCI_IRQ, level) });
      bus.map({ base: ACPI_PM_BASE, length: ACPI_PM_LENGTH, read: (o, s) => pm.read(o, s), write: (o, s, v) => pm.write(o, s, v) });
    },
  },
  debugExit: {
    words: 0,
    attach: (bus, _state, io, board) => {
      // The board's own at 0xf4 powers off; one the VM asked for reports the value written.
      const asked = board.debugExit;
      const exit = new DebugExit(io, asked !== undefined);
      bus.map({
        base: asked?.iobase ?? DEBUG_EXIT_PORT, length: asked?.iosize ?? DEBUG_EXIT_LENGTH,
        read: () => exit.read(), write: (_o, _s, v) => exit.write(v),
      });
    },
  },
  // QEMU's pc-testdev, when the VM asked for it (--device pc-testdev). Its words are in every VM's
  // SAB (64 KiB) so the layout stays one; its MMIO window is served by BoardMmio.
  pcTestdev: {
    words: PC_TESTDEV_STATE_WORDS,
    attach: (bus, state, io, board) => {
      if (!board.pcTestdev) return;
      const dev = new PcTestdev(state, io);
      const scratch = { read: (o: number, s: number) => dev.readScratch(o, s), write: (o: number, s: number, v: number) => dev.writeScratch(o, s, v) };
      bus.map({ base: PC_TESTDEV_SCRATCH_PORT, length: 4, ...scratch });
      bus.map({ base: PC_TESTDEV_FLUSH_PORT, length: 4, read: () => 0, write: () => {} });
      bus.map({ base: PC_TESTDEV_SCRATCH_BYTE_PORT, length: 4, byteWide: true, ...scratch });
      bus.map({ base: PC_TESTDEV_IRQ_PORT, length: PC_TESTDEV_IRQ_LINES, byteWide: true, read: () => 0, write: (o, _s, v) => dev.writeIrqLine(o, v) });
    },
  },
  post: {
    words: POST_STATE_WORDS,
    attach: (bus, state) => {
      const post = new PostPort(state);
      bus.map({ base: POST_PORT, length: 1, byteWide: true, lockFree: true, read: () => post.read(), write: (_o, _s, v) => post.write(v) });
    },
  },
  // The versioned devices (machine-types.ts, MachineType.board): mapped only on a board whose
  // version has them, so a VM pinned to an older version sees exactly the ports it always had.
  pmTimer: {
    words: 0,
    attach: (bus, _state, _io, board) => {
      if (!board.pmTimer) return;
      const timer = new PmTimer();
      bus.map({ base: PM_TMR_PORT, length: PM_TMR_LENGTH, lockFree: true, read: (o, s) => timer.read(o, s), write: () => {} });
    },
  },
  fwCfg: {
    words: FW_CFG_STATE_WORDS,
    init: (state) => FwCfg.initState(state),
    attach: (bus, state, _io, board) => {
      if (!board.fwCfg) return;
      const fw = new FwCfg(state, fwCfgItems(board.fwCfg));
      bus.map({ base: FW_CFG_PORT, length: FW_CFG_LENGTH, read: (o, s) => fw.read(o, s), write: (o, s, v) => fw.write(o, s, v) });
    },
  },
} satisfies Record<string, PortDeviceRegistration>);

/** A virtio-pci device a board can carry, registered once in VIRTIO_DEVICES. */
interface VirtioDeviceRegistration {
  /** Its PCI slot; instance i of a device with `instances` sits in slot + i. */
  readonly slot: number;
  /** Up to how many a board carries, named kind + index (blk0, blk1, ...); absent: one, named kind. */
  readonly instances?: number;
  readonly queues: number;
  /** Words of the type's own after the transport's, 8-byte aligned (Float64 counters). */
  readonly ownWords?: number;
  /**
   * Its device type, over its own words (`own`: where they start in the SAB). `io` carries the
   * host calls its queues need only on the thread that serves them (the I/O thread).
   */
  readonly type: (entry: PciDeviceEntry, own: { sab: SharedArrayBuffer; byteOffset: number }, io: PciIo) => VirtioDeviceType;
}

/**
 * The virtio devices a board can carry. A new one is one entry: DEVICE_LAYOUT gives it its words,
 * attachPci its slot and transport on every thread; a back end with state of its own (a network
 * link) is added on the I/O thread's side, in virtio/back-ends.ts.
 */
export const VIRTIO_DEVICES = Object.freeze({
  rng: { slot: 1, queues: VIRTIO_RNG_SHAPE.queues, type: (_entry, _own, io) => virtioRngType(io.entropy) },
  net: { slot: 3, queues: VIRTIO_NET.queues, type: () => VIRTIO_NET },
  blk: {
    slot: DISK_SLOT_BASE,
    instances: MAX_DISKS,
    queues: VIRTIO_BLK_SHAPE.queues,
    ownWords: 2 * BLK_STAT_SLOTS,
    type: (entry, own, io) => {
      if (!entry.disk) throw new Error(`${entry.name}: no disk image`);
      return virtioBlkType(entry.disk, new Float64Array(own.sab, own.byteOffset, BLK_STAT_SLOTS), io.blkFileIo);
    },
  },
} satisfies Record<string, VirtioDeviceRegistration>);
type VirtioKind = keyof typeof VIRTIO_DEVICES;
// The lists as their common shape, for the code that walks them.
const portRegistrations: Readonly<Record<keyof typeof PORT_DEVICES, PortDeviceRegistration>> = PORT_DEVICES;
const virtioRegistrations: Readonly<Record<VirtioKind, VirtioDeviceRegistration>> = VIRTIO_DEVICES;
/** A device a board carries at most one of, named by its kind (MachineSpec.virtio). */
export type VirtioDeviceName = { [K in VirtioKind]: (typeof VIRTIO_DEVICES)[K] extends { instances: number } ? never : K }[VirtioKind];
/** An instance of a device a board carries several of: blk0 is the first --disk, the guest's vda. */
export type IndexedDeviceName = `${Exclude<VirtioKind, VirtioDeviceName>}${number}`;
export type PciDeviceName = VirtioDeviceName | IndexedDeviceName;

/** Transport words of one instance, then (8-byte aligned) the type's own; the stride is even too. */
function virtioWords(d: VirtioDeviceRegistration): { ownAt: number; stride: number } {
  const ownAt = (virtioStateWords(d.queues) + 1) & ~1;
  return { ownAt, stride: (ownAt + (d.ownWords ?? 0) + 1) & ~1 };
}

/**
 * Word (Int32) offsets of each part of the device SAB, computed once from the lists above: the
 * bus lock, the unhandled-port table, each port device, the PCI host and bridge, each virtio
 * device (all its instances). Every thread reads offsets from here, so they can only agree.
 */
export const DEVICE_LAYOUT = layOut([
  ['lock', 1],
  ['unhandled', UNHANDLED_TABLE_WORDS],
  ...entries(portRegistrations).map(([name, d]) => [name, d.words] as const),
  ['pciHost', PCI_HOST_STATE_WORDS],
  ['hostBridge', PCI_CONFIG_WORDS],
  ...entries(virtioRegistrations).map(([name, d]) => [name, { words: (d.instances ?? 1) * virtioWords(d).stride, align: 2 }] as const),
]);

// Catch a registration that puts two functions in one PCI slot (checked once at load; 0 is the bridge).
const slotsTaken = new Set([0]);
for (const [name, d] of entries(virtioRegistrations)) {
  for (let i = 0; i < (d.instances ?? 1); i++) {
    if (slotsTaken.has(d.slot + i) || d.slot + i > 31) throw new Error(`VIRTIO_DEVICES: ${name} has no free PCI slot ${d.slot + i}`);
    slotsTaken.add(d.slot + i);
  }
}

/** Where the board entry named `name` sits: its registration, its first state word, its slot. */
function placement(name: PciDeviceName): { device: VirtioDeviceRegistration; stateWord: number; slot: number } {
  const [, kind = '', index = ''] = /^([a-z]+)(\d*)$/.exec(name) ?? [];
  const device = Object.hasOwn(virtioRegistrations, kind) ? virtioRegistrations[kind as VirtioKind] : undefined;
  const i = Number(index);
  if (!device || (index === '') !== (device.instances === undefined) || !(i < (device.instances ?? 1))) throw new RangeError(`no PCI slot for ${name}`);
  return { device, stateWord: DEVICE_LAYOUT[kind as VirtioKind] + i * virtioWords(device).stride, slot: device.slot + i };
}

export interface DeviceIo {
  /** A byte the guest sent on ttyS0 (the console). Called under the bus lock. */
  emitConsole(byte: number): void;
  /** A byte the guest sent on ttyS1 (the agent channel). Called under the bus lock. */
  emitAgent(byte: number): void;
  /** Drive an ISA IRQ line (KVM_IRQ_LINE): a UART only on a change, pc-testdev on each guest write. */
  setIrq(line: number, level: boolean): void;
  /** ACPI S5 or the board's own isa-debug-exit: the guest shut down. */
  onPowerOff(): void;
  /** A write of `value` to the isa-debug-exit the VM asked for (BoardConfig.debugExit). */
  onDebugExit(value: number): void;
  /** i8042 reset: the run ends. */
  onReset(): void;
}

/**
 * The 32-bit PCI memory window (below the I/O APIC, above any RAM: guest RAM below 4 GiB ends at
 * 3 GiB), in the DSDT's PCI0._CRS. BARs are assigned in it at power-on, one 64 KiB block per slot.
 */
export const PCI_MMIO_WINDOW = Object.freeze({ base: 0xe0000000, size: 0x10000000 });
const SLOT_BLOCK = 0x10000;

/** One PCI device of a board (plain data, the same in every thread: fds are process-wide). */
export interface PciDeviceEntry {
  name: PciDeviceName;
  eventFd: number;
  /** Device-specific configuration the guest reads (fixed at build: a MAC and link status). */
  deviceConfig?: number[];
  /** virtio-net: its MAC and back end (the I/O thread opens it). */
  net?: NetBackEndSpec;
  /** The disks (name blk0, blk1, ...): the open image their back end serves. */
  disk?: DiskBackend;
}

/**
 * Which PCI devices a VM's board carries and how their notifications reach the I/O thread; plain
 * data, the same in every thread. The host bridge is always there.
 */
export interface BoardConfig {
  virtio: PciDeviceEntry[];
  /** The VM's isa-debug-exit (--device), in place of the board's own at 0xf4; absent: that one. */
  debugExit?: { iobase: number; iosize: number };
  /** QEMU's pc-testdev (--device pc-testdev): its ports, IRQ lines and MMIO window. */
  pcTestdev?: boolean;
  /** KVM has ioeventfds: the width they match (0 = any, KVM_CAP_IOEVENTFD_ANY_LENGTH); absent: none. */
  ioeventfdLength?: number;
  /** QEMU's fw_cfg at 0x510 (unhalt-1.2+) and what its items say; absent: no fw_cfg. */
  fwCfg?: FwCfgMachine;
  /** The ACPI PM timer at 0x608 (unhalt-1.2+). */
  pmTimer?: boolean;
}

/** The board devices a machine type version adds (MachineType.board); absent or false: not there. */
export type VersionedDevices = Partial<BoardProperties>;

/** The BoardConfig fields of a version's devices, for a VM of `cpus` vCPUs and `ramBytes` of RAM. */
export function versionedBoard(devices: VersionedDevices | undefined, machine: FwCfgMachine): Pick<BoardConfig, 'fwCfg' | 'pmTimer'> {
  return {
    ...(devices?.fwCfg ? { fwCfg: { cpus: machine.cpus, ramBytes: machine.ramBytes } } : {}),
    ...(devices?.pmTimer ? { pmTimer: true } : {}),
  };
}

export interface NetBackEndSpec {
  mac: string;
  backEnd: NetConfig;
}

export const NO_PCI_DEVICES: BoardConfig = Object.freeze({ virtio: [] });

/** Host-side effects of the PCI devices, wired by each thread. */
export interface PciIo {
  /** KVM_SIGNAL_MSI on the VM fd. */
  signalMsi(address: number, data: number): void;
  /** Add 1 to an eventfd (a notify that came as an MMIO exit, for the I/O thread). */
  signalEventFd(fd: number): void;
  /** KVM_IOEVENTFD assign / deassign on the VM fd (only called when BoardConfig.ioeventfdLength is set). */
  setIoeventfd(address: number, length: number, fd: number, assign: boolean): void;
  /** The disks' file calls: only the I/O thread, which serves their queues, passes them. */
  blkFileIo?: BlkFileIo;
  /** virtio-rng's getrandom: likewise. */
  entropy?: EntropyIo;
}

/** Where slot `slot`'s BARs sit at power-on. */
export function slotBars(slot: number): { regs: number; msix: number } {
  const regs = PCI_MMIO_WINDOW.base + slot * SLOT_BLOCK;
  return { regs, msix: regs + REGS_BAR_SIZE * 2 };
}
if (REGS_BAR_SIZE * 2 + MSIX_BAR_SIZE > SLOT_BLOCK) throw new Error('a slot\'s BARs do not fit its block');

/** Allocates and initializes the device state of one VM. */
export function createDeviceState(board: BoardConfig = NO_PCI_DEVICES): SharedArrayBuffer {
  const sab = new SharedArrayBuffer(DEVICE_LAYOUT.words * 4);
  for (const [name, d] of entries(portRegistrations)) d.init?.(view(sab, DEVICE_LAYOUT[name], d.words));
  const noIo: PciIo = { signalMsi: () => {}, signalEventFd: () => {}, setIoeventfd: () => {} };
  const pci = attachPci(sab, board, noIo);
  pci.bridge.config.reset();
  for (const d of pci.virtio) d.device.powerOn();
  return sab;
}

/** One thread's view of the PCI bus: the host (ports and BARs), the bridge, the virtio functions. */
export interface PciBoard {
  host: PciHost;
  bridge: HostBridge;
  virtio: { name: PciDeviceName; device: VirtioPci; eventFd: number }[];
  lock: SharedLock;
}

/** This thread's PCI functions over shared device state. */
export function attachPci(stateSab: SharedArrayBuffer, board: BoardConfig, io: PciIo): PciBoard {
  const bridge = new HostBridge(new Uint8Array(stateSab, DEVICE_LAYOUT.hostBridge * 4, PCI_CONFIG_WORDS * 4));
  const slots: (PciFunction | undefined)[] = [bridge];
  const virtio = board.virtio.map((entry) => {
    const { name, eventFd, deviceConfig } = entry;
    const d = placement(name);
    if (slots[d.slot]) throw new Error(`PCI slot ${d.slot} given twice (${name})`);
    const length = board.ioeventfdLength;
    const own = { sab: stateSab, byteOffset: (d.stateWord + virtioWords(d.device).ownAt) * 4 };
    const ownType = d.device.type(entry, own, io);
    const type = deviceConfig ? withDeviceConfig(ownType, deviceConfig) : ownType;
    const device = new VirtioPci(view(stateSab, d.stateWord, virtioStateWords(d.device.queues)), type, slotBars(d.slot), {
      signalMsi: (a, v) => io.signalMsi(a, v),
      notify: () => io.signalEventFd(eventFd),
      ...(length !== undefined ? { setIoeventfd: (address: number, _q: number, assign: boolean) => io.setIoeventfd(address, length, eventFd, assign) } : {}),
    });
    slots[d.slot] = device;
    return { name, device, eventFd };
  });
  return { host: new PciHost(view(stateSab, DEVICE_LAYOUT.pciHost, PCI_HOST_STATE_WORDS), slots), bridge, virtio, lock: lockOf(stateSab) };
}

/**
 * Guest-physical accesses outside RAM: pc-testdev's window (if the VM has one), else a BAR's
 * registers under the bus lock, else all ones.
 */
export class BoardMmio {
  private readonly pci: PciBoard;
  private readonly testdev: PcTestdev | undefined;
  constructor(pci: PciBoard, testdev?: PcTestdev) {
    this.pci = pci;
    this.testdev = testdev;
  }
  read(address: number, data: Uint8Array, size: number): void {
    if (this.testdev && PcTestdev.inWindow(address)) return this.testdev.mmioRead(address, data, size);
    this.pci.lock.lock();
    try {
      if (!this.pci.host.mmioRead(address, data, size)) readAllOnes(data, size);
    } finally {
      this.pci.lock.unlock();
    }
  }
  write(address: number, data: Uint8Array, size: number): void {
    if (this.testdev && PcTestdev.inWindow(address)) return this.testdev.mmioWrite(address, data, size);
    this.pci.lock.lock();
    try {
      this.pci.host.mmioWrite(address, data, size);
    } finally {
      this.pci.lock.unlock();
    }
  }
}

/** A vCPU worker's devices: the port bus with the PCI host's ports on it, and MMIO to the BARs. */
export function attachBoard(stateSab: SharedArrayBuffer, io: DeviceIo & PciIo, board: BoardConfig): { pio: PortBus; mmio: BoardMmio; pci: PciBoard } {
  const pio = attachDevices(stateSab, io, board);
  const pci = attachPci(stateSab, board, io);
  mapPciConfigPorts(pio, pci.host);
  // Its window's bytes are shared words like its ports' register: a second view, one device.
  const testdev = board.pcTestdev ? new PcTestdev(view(stateSab, DEVICE_LAYOUT.pcTestdev, PC_TESTDEV_STATE_WORDS), io) : undefined;
  return { pio, mmio: new BoardMmio(pci, testdev), pci };
}

/** PCI configuration mechanism #1: its address and data ports on the host. */
function mapPciConfigPorts(bus: PortMap, host: PciHost): void {
  bus.map({ base: PCI_CONFIG_ADDRESS_PORT, length: 4, read: (o, s) => host.readAddress(o, s), write: (o, s, v) => host.writeAddress(o, s, v) });
  bus.map({ base: PCI_CONFIG_DATA_PORT, length: 4, read: (o, s) => host.readData(o, s), write: (o, s, v) => host.writeData(o, s, v) });
}

/** This thread's port bus over shared device state, with this thread's I/O callbacks. */
export function attachDevices(stateSab: SharedArrayBuffer, io: DeviceIo, board: BoardConfig = NO_PCI_DEVICES): PortBus {
  const bus = new PortBus(lockOf(stateSab), view(stateSab, DEVICE_LAYOUT.unhandled, UNHANDLED_TABLE_WORDS));
  for (const [name, d] of entries(portRegistrations)) d.attach(bus, view(stateSab, DEVICE_LAYOUT[name], d.words), io, board);
  return bus;
}

/**
 * Which of the board's other devices answers a port in `base`..`base + length - 1` (a configured
 * isa-debug-exit placed there would collide when a vCPU maps its bus), named with its ports, or
 * undefined. Taken from the registrations themselves, so the list cannot drift from the board.
 */
export function boardPortUser(base: number, length: number, devices?: VersionedDevices, pcTestdev = false): string | undefined {
  for (const { name, base: b, length: l } of boardPorts(devices, pcTestdev)) {
    if (base < b + l && b < base + length) return `${name} (ports 0x${b.toString(16)}-0x${(b + l - 1).toString(16)})`;
  }
  return undefined;
}

const boardPortLists = new Map<string, { name: string; base: number; length: number }[]>();
/** How a refusal names a port device whose registration key is not its user-facing name. */
const PORT_DEVICE_NAMES: Record<string, string> = { pcTestdev: 'pc-testdev' };
function boardPorts(devices: VersionedDevices | undefined, pcTestdev: boolean): { name: string; base: number; length: number }[] {
  const board: BoardConfig = { virtio: [], ...versionedBoard(devices, { cpus: 1, ramBytes: 0 }), ...(pcTestdev ? { pcTestdev } : {}) };
  const key = JSON.stringify(board);
  const known = boardPortLists.get(key);
  if (known) return known;
  const list: { name: string; base: number; length: number }[] = [];
  const nop = () => {};
  const io: DeviceIo = { emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop };
  const record = (name: string): PortMap => ({ map: (d) => { list.push({ name: PORT_DEVICE_NAMES[name] ?? name, base: d.base, length: d.length }); } });
  for (const [name, d] of entries(portRegistrations)) {
    if (name !== 'debugExit') d.attach(record(name), new Int32Array(d.words), io, board);
  }
  // A recorder only reads the ranges; it never calls a device, so no host is needed behind them.
  mapPciConfigPorts(record('PCI configuration'), undefined as unknown as PciHost);
  boardPortLists.set(key, list);
  return list;
}

/**
 * Host side of the serial lines: queues console/agent input into COM1 (0) or COM2 (1) under
 * the bus lock and raises the RX interrupt. The FIFO is 16 bytes: `inject` returns how many
 * bytes were taken; keep the rest and retry (e.g. on the next output drain or a short timer).
 * Used on the main thread, so it never waits for the lock: while a vCPU holds it, `inject`
 * takes nothing and `space` reads 0, and the caller retries (InputQueue does, 2 ms later).
 */
export class SerialInput {
  private readonly lock: SharedLock;
  private readonly uarts: [Uart16550, Uart16550];

  constructor(stateSab: SharedArrayBuffer, setIrq: (line: number, level: boolean) => void) {
    this.lock = lockOf(stateSab);
    // The host never transmits; a guest byte looped back stays inside the UART.
    const emit = (): void => {};
    this.uarts = [
      new Uart16550(view(stateSab, DEVICE_LAYOUT.com1, UART_STATE_WORDS), { emit, setIrq: (l) => setIrq(COM1_IRQ, l) }),
      new Uart16550(view(stateSab, DEVICE_LAYOUT.com2, UART_STATE_WORDS), { emit, setIrq: (l) => setIrq(COM2_IRQ, l) }),
    ];
  }

  inject(which: 0 | 1, bytes: Uint8Array): number {
    if (bytes.length === 0) return 0;
    const uart = this.uarts[which];
    return this.lock.tryWithLock(() => uart.enqueueRx(bytes)) ?? 0;
  }

  /** Bytes the UART can take right now. */
  space(which: 0 | 1): number {
    const uart = this.uarts[which];
    return this.lock.tryWithLock(() => uart.rxSpace()) ?? 0;
  }
}

/**
 * Host side of the ACPI power button (a graceful shutdown request). Used on the main thread:
 * it waits for the bus lock asynchronously (SharedLock.lockAsync), never blocking.
 */
export class PowerButton {
  private readonly lock: SharedLock;
  private readonly pm: AcpiPm;

  constructor(stateSab: SharedArrayBuffer, setIrq: (line: number, level: boolean) => void) {
    this.lock = lockOf(stateSab);
    this.pm = new AcpiPm(view(stateSab, DEVICE_LAYOUT.acpiPm, ACPI_PM_STATE_WORDS), {
      onPowerOff: () => {}, // only the guest's own PM1_CNT write powers off
      setSci: (level) => setIrq(SCI_IRQ, level),
    });
  }

  /** Presses the button; resolves with whether the guest's OS had enabled power-button events. */
  press(): Promise<boolean> {
    return this.lock.withLockAsync(() => this.pressLocked());
  }

  /** press() if the bus lock is free right now; undefined (nothing pressed) if a vCPU holds it. */
  tryPress(): boolean | undefined {
    return this.lock.tryWithLock(() => this.pressLocked());
  }

  private pressLocked(): boolean {
    this.pm.pressPowerButton();
    return this.pm.powerButtonEnabled();
  }
}

/** Object.entries with the keys' own type (the registration lists are frozen literals). */
function entries<T extends object>(o: T): [keyof T & string, T[keyof T]][] {
  return Object.entries(o) as [keyof T & string, T[keyof T]][];
}

function view(sab: SharedArrayBuffer, word: number, words: number): Int32Array {
  return new Int32Array(sab, word * 4, words);
}

function lockOf(sab: SharedArrayBuffer): SharedLock {
  return new SharedLock(view(sab, DEVICE_LAYOUT.lock, 1), 0);
}
