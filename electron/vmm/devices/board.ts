// The board: which device answers which ports and IRQ lines (docs/guest-contract.md), and
// where each device's state sits in the one shared device SAB. The main thread creates the
// SAB once per VM and hands it to every vCPU worker; each thread then calls attachDevices
// with its own I/O callbacks and gets its own PortBus over the same state.

import { AcpiPm, ACPI_PM_BASE, ACPI_PM_LENGTH, ACPI_PM_STATE_WORDS, SCI_IRQ } from './acpi-pm.ts';
import { DebugExit, DEBUG_EXIT_LENGTH, DEBUG_EXIT_PORT } from './debug-exit.ts';
import { readAllOnes } from './floating-bus.ts';
import { I8042, I8042_COMMAND_PORT, I8042_DATA_PORT } from './i8042.ts';
import { PortBus, UNHANDLED_TABLE_WORDS } from './port-bus.ts';
import { POST_PORT, POST_STATE_WORDS, PostPort } from './post-port.ts';
import { SharedLock } from './shared-lock.ts';
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
import { MAX_DISKS } from '../vm-limits.ts';

export const COM1_BASE = 0x3f8;
export const COM1_IRQ = 4;
export const COM2_BASE = 0x2f8;
export const COM2_IRQ = 3;

/** Word (Int32) offsets of each part of the device SAB: the only place they are defined. */
export const DEVICE_LAYOUT = Object.freeze({
  lock: 0, // 1 word: the bus lock
  unhandled: 8, // UNHANDLED_TABLE_WORDS (33): unhandled-port table
  com1: 48, // UART_STATE_WORDS (32)
  com2: 80, // UART_STATE_WORDS (32)
  acpiPm: 112, // ACPI_PM_STATE_WORDS (4)
  post: 116, // POST_STATE_WORDS (1)
  pciHost: 120, // PCI_HOST_STATE_WORDS (1): CONFIG_ADDRESS
  hostBridge: 124, // PCI_CONFIG_WORDS (64)
  virtioRng: 188, // virtioStateWords(1) (108)
  virtioNet: 296, // virtioStateWords(2) (128)
  virtioBlk: 424, // MAX_DISKS (8) x DISK_WORDS (126): each disk's transport, then its Float64 counters
  words: 1432,
});
/** Words of one disk's part of DEVICE_LAYOUT.virtioBlk: the transport's, then BLK_STAT_SLOTS Float64s (8-byte aligned). */
const DISK_WORDS = (virtioStateWords(VIRTIO_BLK_SHAPE.queues) + 2 * BLK_STAT_SLOTS + 1) & ~1;
/** Disk i sits in PCI slot DISK_SLOT_BASE + i (slots below are left to other virtio devices). */
export const DISK_SLOT_BASE = 8;

// Catch a layout edit that makes two parts overlap (checked once at load).
const parts: [number, number][] = [
  [DEVICE_LAYOUT.lock, 1],
  [DEVICE_LAYOUT.unhandled, UNHANDLED_TABLE_WORDS],
  [DEVICE_LAYOUT.com1, UART_STATE_WORDS],
  [DEVICE_LAYOUT.com2, UART_STATE_WORDS],
  [DEVICE_LAYOUT.acpiPm, ACPI_PM_STATE_WORDS],
  [DEVICE_LAYOUT.post, POST_STATE_WORDS],
  [DEVICE_LAYOUT.pciHost, PCI_HOST_STATE_WORDS],
  [DEVICE_LAYOUT.hostBridge, PCI_CONFIG_WORDS],
  [DEVICE_LAYOUT.virtioRng, virtioStateWords(VIRTIO_RNG_SHAPE.queues)],
  [DEVICE_LAYOUT.virtioNet, virtioStateWords(VIRTIO_NET.queues)],
  [DEVICE_LAYOUT.virtioBlk, MAX_DISKS * DISK_WORDS],
];
if (DEVICE_LAYOUT.virtioBlk % 2 !== 0 || DISK_SLOT_BASE + MAX_DISKS > 32) throw new Error('DEVICE_LAYOUT: disks misplaced');
for (let i = 0; i < parts.length; i++) {
  const end = i + 1 < parts.length ? parts[i + 1][0] : DEVICE_LAYOUT.words;
  if (parts[i][0] + parts[i][1] > end) throw new Error('DEVICE_LAYOUT parts overlap');
}

export interface DeviceIo {
  /** A byte the guest sent on ttyS0 (the console). Called under the bus lock. */
  emitConsole(byte: number): void;
  /** A byte the guest sent on ttyS1 (the agent channel). Called under the bus lock. */
  emitAgent(byte: number): void;
  /** Drive an ISA IRQ line (KVM_IRQ_LINE); only called when the level changes. */
  setIrq(line: number, level: boolean): void;
  /** ACPI S5 or isa-debug-exit: the guest shut down. */
  onPowerOff(): void;
  /** i8042 reset: the run ends. */
  onReset(): void;
}

/**
 * The 32-bit PCI memory window (below the I/O APIC, above any RAM: guest RAM below 4 GiB ends at
 * 3 GiB), in the DSDT's PCI0._CRS. BARs are assigned in it at power-on, one 64 KiB block per slot.
 */
export const PCI_MMIO_WINDOW = Object.freeze({ base: 0xe0000000, size: 0x10000000 });
const SLOT_BLOCK = 0x10000;

/** The virtio devices a board can carry: type, where its state lives, its PCI slot. */
export const VIRTIO_DEVICES = Object.freeze({
  rng: { type: virtioRngType(), stateWord: DEVICE_LAYOUT.virtioRng, slot: 1 },
  net: { type: VIRTIO_NET, stateWord: DEVICE_LAYOUT.virtioNet, slot: 3 },
} satisfies Record<string, { type: VirtioDeviceType; stateWord: number; slot: number }>);
export type VirtioDeviceName = keyof typeof VIRTIO_DEVICES;
/** Disk i's device name (blk0 is the first --disk: the guest's vda). */
export type DiskDeviceName = `blk${number}`;
export type PciDeviceName = VirtioDeviceName | DiskDeviceName;

/** Where a board entry's device sits: its type, state words and slot. */
function placement(entry: BoardConfig['virtio'][number], stateSab: SharedArrayBuffer, io: PciIo): { type: VirtioDeviceType; stateWord: number; slot: number } {
  // The thread that serves a queue passes the host calls its type makes (getrandom, file I/O).
  if (entry.name === 'rng') return { ...VIRTIO_DEVICES.rng, type: virtioRngType(io.entropy) };
  if (!entry.disk) return VIRTIO_DEVICES[entry.name as VirtioDeviceName];
  const i = Number(entry.name.slice(3));
  if (!(i >= 0 && i < MAX_DISKS)) throw new RangeError(`no disk slot for ${entry.name}`);
  const stateWord = DEVICE_LAYOUT.virtioBlk + i * DISK_WORDS;
  const stats = new Float64Array(stateSab, (stateWord + virtioStateWords(VIRTIO_BLK_SHAPE.queues)) * 4, BLK_STAT_SLOTS);
  return { type: virtioBlkType(entry.disk, stats, io.blkFileIo), stateWord, slot: DISK_SLOT_BASE + i };
}

/**
 * Which PCI devices a VM's board carries and how their notifications reach the I/O thread; plain
 * data, the same in every thread (fds are process-wide). The host bridge is always there.
 */
export interface BoardConfig {
  virtio: {
    name: PciDeviceName;
    eventFd: number;
    /** Device-specific configuration the guest reads (fixed at build: a MAC and link status). */
    deviceConfig?: number[];
    /** virtio-net: its MAC and back end (the I/O thread opens it). */
    net?: NetBackEndSpec;
    /** The disks (name blk0, blk1, ...): the open image their back end serves. */
    disk?: DiskBackend;
  }[];
  /** KVM has ioeventfds: the width they match (0 = any, KVM_CAP_IOEVENTFD_ANY_LENGTH); absent: none. */
  ioeventfdLength?: number;
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
  Uart16550.initState(view(sab, DEVICE_LAYOUT.com1, UART_STATE_WORDS));
  Uart16550.initState(view(sab, DEVICE_LAYOUT.com2, UART_STATE_WORDS));
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
    const d = placement(entry, stateSab, io);
    if (slots[d.slot]) throw new Error(`PCI slot ${d.slot} given twice (${name})`);
    const length = board.ioeventfdLength;
    const type = deviceConfig ? withDeviceConfig(d.type, deviceConfig) : d.type;
    const device = new VirtioPci(view(stateSab, d.stateWord, virtioStateWords(d.type.queues)), type, slotBars(d.slot), {
      signalMsi: (a, v) => io.signalMsi(a, v),
      notify: () => io.signalEventFd(eventFd),
      ...(length !== undefined ? { setIoeventfd: (address: number, _q: number, assign: boolean) => io.setIoeventfd(address, length, eventFd, assign) } : {}),
    });
    slots[d.slot] = device;
    return { name, device, eventFd };
  });
  return { host: new PciHost(view(stateSab, DEVICE_LAYOUT.pciHost, PCI_HOST_STATE_WORDS), slots), bridge, virtio, lock: lockOf(stateSab) };
}

/** Guest-physical accesses outside RAM: a BAR's registers under the bus lock, else all ones. */
export class BoardMmio {
  private readonly pci: PciBoard;
  constructor(pci: PciBoard) {
    this.pci = pci;
  }
  read(address: number, data: Uint8Array, size: number): void {
    this.pci.lock.lock();
    try {
      if (!this.pci.host.mmioRead(address, data, size)) readAllOnes(data, size);
    } finally {
      this.pci.lock.unlock();
    }
  }
  write(address: number, data: Uint8Array, size: number): void {
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
  const pio = attachDevices(stateSab, io);
  const pci = attachPci(stateSab, board, io);
  const host = pci.host;
  pio.map({ base: PCI_CONFIG_ADDRESS_PORT, length: 4, read: (o, s) => host.readAddress(o, s), write: (o, s, v) => host.writeAddress(o, s, v) });
  pio.map({ base: PCI_CONFIG_DATA_PORT, length: 4, read: (o, s) => host.readData(o, s), write: (o, s, v) => host.writeData(o, s, v) });
  return { pio, mmio: new BoardMmio(pci), pci };
}

/** This thread's port bus over shared device state, with this thread's I/O callbacks. */
export function attachDevices(stateSab: SharedArrayBuffer, io: DeviceIo): PortBus {
  const bus = new PortBus(lockOf(stateSab), view(stateSab, DEVICE_LAYOUT.unhandled, UNHANDLED_TABLE_WORDS));
  const com1 = new Uart16550(view(stateSab, DEVICE_LAYOUT.com1, UART_STATE_WORDS), {
    emit: (b) => io.emitConsole(b),
    setIrq: (level) => io.setIrq(COM1_IRQ, level),
  });
  const com2 = new Uart16550(view(stateSab, DEVICE_LAYOUT.com2, UART_STATE_WORDS), {
    emit: (b) => io.emitAgent(b),
    setIrq: (level) => io.setIrq(COM2_IRQ, level),
  });
  const pm = new AcpiPm(view(stateSab, DEVICE_LAYOUT.acpiPm, ACPI_PM_STATE_WORDS), {
    onPowerOff: () => io.onPowerOff(),
    setSci: (level) => io.setIrq(SCI_IRQ, level),
  });
  const kbc = new I8042(io);
  const exit = new DebugExit(io);
  const post = new PostPort(view(stateSab, DEVICE_LAYOUT.post, POST_STATE_WORDS));

  bus.map({ base: COM1_BASE, length: 8, byteWide: true, read: (o) => com1.read(o), write: (o, _s, v) => com1.write(o, v) });
  bus.map({ base: COM2_BASE, length: 8, byteWide: true, read: (o) => com2.read(o), write: (o, _s, v) => com2.write(o, v) });
  bus.map({ base: I8042_DATA_PORT, length: 1, byteWide: true, read: () => kbc.read(I8042_DATA_PORT), write: (_o, _s, v) => kbc.write(I8042_DATA_PORT, v) });
  bus.map({ base: I8042_COMMAND_PORT, length: 1, byteWide: true, read: () => kbc.read(I8042_COMMAND_PORT), write: (_o, _s, v) => kbc.write(I8042_COMMAND_PORT, v) });
  bus.map({ base: ACPI_PM_BASE, length: ACPI_PM_LENGTH, read: (o, s) => pm.read(o, s), write: (o, s, v) => pm.write(o, s, v) });
  // One write of any width is one power-off request.
  bus.map({ base: DEBUG_EXIT_PORT, length: DEBUG_EXIT_LENGTH, read: () => exit.read(), write: () => exit.write() });
  bus.map({ base: POST_PORT, length: 1, byteWide: true, lockFree: true, read: () => post.read(), write: (_o, _s, v) => post.write(v) });
  return bus;
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

function view(sab: SharedArrayBuffer, word: number, words: number): Int32Array {
  return new Int32Array(sab, word * 4, words);
}

function lockOf(sab: SharedArrayBuffer): SharedLock {
  return new SharedLock(view(sab, DEVICE_LAYOUT.lock, 1), 0);
}
