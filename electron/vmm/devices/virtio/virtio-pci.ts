// The virtio-pci modern transport (virtio 1.2, 4.1): one PCI function whose BAR 0 holds the
// common configuration, ISR, device configuration and notification registers (each found through
// a vendor capability), and whose BAR 1 holds the MSI-X table and pending bits (the register map:
// virtio-pci-regs.ts). Every register's state is in shared words, so any vCPU worker's instance
// (MMIO exits) and the I/O thread's (the queues: virtio-queue-service.ts) act on one device; all
// of it is called under the bus lock. A notification reaches the I/O thread through an ioeventfd
// where KVM has them (assigned here whenever the guest moves BAR 0 or toggles memory decoding),
// else through the notify register's MMIO exit (`io.notify`).
//
// A guest that programs garbage (a queue size that is not a power of two, rings outside RAM, a
// descriptor loop...) gets DEVICE_NEEDS_RESET and a configuration interrupt; only a reset (status
// 0) brings the device back.

import { MsixTable, MSIX_ENTRY_BYTES } from '../pci/msix.ts';
import { PciConfig, PCI_COMMAND, PCI_BAR0, PCI_CONFIG_BYTES, type PciCapability } from '../pci/pci-config.ts';
import type { PciFunction } from '../pci/pci-host.ts';
import type { GuestRam } from './guest-ram.ts';
import { MAX_QUEUE_SIZE, QUEUE_ERROR, type Chain } from './virtqueue.ts';
import type { QueueServer, VirtioDeviceType } from './virtio-device-type.ts';
import {
  BAR_MSIX, BAR_REGS, CAP_COMMON, CAP_DEVICE, CAP_ISR, CAP_NOTIFY, COMMON_CFG, COMMON_CFG_LENGTH, DEVICE_CFG, ISR_CFG, MSIX_BAR_SIZE,
  MSIX_PBA, MSIX_TABLE, NOTIFY_CFG, NOTIFY_OFF_MULTIPLIER, Q, Q_WORDS, REGS_BAR_SIZE, STATUS, VIRTIO_DEVICE_ID_BASE, VIRTIO_F_VERSION_1,
  VIRTIO_MSI_NO_VECTOR, VIRTIO_VENDOR_ID, W, virtioCap, virtioStateWords,
} from './virtio-pci-regs.ts';
import { QueueService, type QueueTransport } from './virtio-queue-service.ts';

/** How long a reset waits for a request in flight (the I/O thread ends every request; this bounds a lost one). */
const RESET_DRAIN_LIMIT_MS = 10_000;

/** Host-side effects of the transport, wired by each thread (board.ts). */
export interface VirtioPciIo {
  /** KVM_SIGNAL_MSI. */
  signalMsi(address: number, data: number): void;
  /** The notify register was written by an MMIO exit (no ioeventfd took it): wake the I/O thread. */
  notify(queue: number): void;
  /** Assign (or remove) the ioeventfd of each queue's notify address; absent: KVM has none. */
  setIoeventfd?(address: number, queue: number, assign: boolean): void;
}

export interface VirtioCounters {
  mmioNotifies: number;
  /** Notifications the I/O thread took (ioeventfd + MMIO exits). */
  kicks: number;
  interrupts: number;
  resets: number;
  status: number;
  error: number;
  lastError: number;
  needsResets: number;
  requests: number[];
  bytes: number[];
  drops: number[];
  /** Bytes the device read from the driver's buffers per queue (virtio-net: frames sent); 0 where a type does not count them. */
  readBytes: number[];
  /** The device type's own counters (virtio-blk: reads, writes, bytes read / written, flushes...). */
  device?: Record<string, number>;
}

export class VirtioPci implements PciFunction, QueueTransport {
  readonly config: PciConfig;
  readonly type: VirtioDeviceType;
  readonly msix: MsixTable;
  private readonly s: Int32Array;
  private readonly io: VirtioPciIo;
  private readonly scratch = new Uint8Array(COMMON_CFG_LENGTH + 8);
  private readonly scratchView = new DataView(this.scratch.buffer);
  private readonly msixCapOffset: number;
  /** offeredFeatures' two 32-bit halves, as the common configuration shows them (no BigInt work on a register read). */
  private readonly offeredHalves: readonly [number, number];
  private readonly service: QueueService;

  /**
   * `state`: virtioStateWords(type.queues) shared words. `bars`: where BAR 0 and BAR 1 sit at
   * reset (in the PCI MMIO window).
   */
  constructor(state: Int32Array, type: VirtioDeviceType, bars: { regs: number; msix: number }, io: VirtioPciIo) {
    if (state.length < virtioStateWords(type.queues)) throw new RangeError('virtio state too small');
    if (type.maxQueueSize > MAX_QUEUE_SIZE) throw new RangeError('queue too large');
    this.s = state;
    this.type = type;
    this.io = io;
    const offered = this.offeredFeatures;
    this.offeredHalves = [Number(offered & 0xffffffffn), Number(offered >> 32n)];
    const vectors = type.queues + 1;
    const msixWords = W.queues + Q_WORDS * type.queues;
    const tableBytes = vectors * MSIX_ENTRY_BYTES;
    const buf = state.buffer as SharedArrayBuffer;
    const configAt = state.byteOffset + (msixWords * 4) + tableBytes;
    const caps: PciCapability[] = [
      MsixTable.capability(vectors, BAR_MSIX, MSIX_TABLE, MSIX_PBA),
      virtioCap(CAP_COMMON, COMMON_CFG, COMMON_CFG_LENGTH),
      virtioCap(CAP_ISR, ISR_CFG, 1),
      ...(type.configBytes > 0 ? [virtioCap(CAP_DEVICE, DEVICE_CFG, type.configBytes)] : []),
      virtioCap(CAP_NOTIFY, NOTIFY_CFG, NOTIFY_OFF_MULTIPLIER * type.queues, NOTIFY_OFF_MULTIPLIER),
    ];
    this.config = new PciConfig(new Uint8Array(buf, configAt, PCI_CONFIG_BYTES), {
      vendorId: VIRTIO_VENDOR_ID,
      deviceId: VIRTIO_DEVICE_ID_BASE + type.type,
      revision: 1, // modern only
      classCode: type.classCode,
      subsystemVendorId: VIRTIO_VENDOR_ID,
      subsystemId: 0x1100,
      bars: [{ index: BAR_REGS, size: REGS_BAR_SIZE, address: bars.regs }, { index: BAR_MSIX, size: MSIX_BAR_SIZE, address: bars.msix }],
      capabilities: caps,
    });
    this.msixCapOffset = this.config.capabilities[0]!.offset;
    this.msix = new MsixTable(
      new Uint8Array(buf, state.byteOffset + msixWords * 4, tableBytes),
      new Int32Array(buf, state.byteOffset + W.pba * 4, 1),
      () => this.config.read(this.msixCapOffset + 2, 2),
      { signal: (a, d) => { this.s[W.interrupts]!++; io.signalMsi(a, d); } },
    );
    this.service = new QueueService(state, type, this);
  }

  /** Power-on state (once, when the VM is built). */
  powerOn(): void {
    this.config.reset();
    this.msix.reset();
    this.s.fill(0, 0, W.queues + Q_WORDS * this.type.queues);
    this.resetDevice();
  }

  /** The features the device offers (VERSION_1 always). */
  get offeredFeatures(): bigint {
    return this.type.features | (1n << BigInt(VIRTIO_F_VERSION_1));
  }

  /** PCI COMMAND's bus-master bit: without it the device touches no ring (virtio-queue-service.ts). */
  get busMaster(): boolean {
    return this.config.busMaster;
  }

  get status(): number {
    return this.s[W.status]!;
  }

  counters(): VirtioCounters {
    const q = Array.from({ length: this.type.queues }, (_, i) => W.queues + Q_WORDS * i);
    return {
      mmioNotifies: this.s[W.mmioNotifies]! >>> 0, kicks: this.s[W.kicks]! >>> 0,
      interrupts: this.s[W.interrupts]! >>> 0, resets: this.s[W.resets]! >>> 0,
      status: this.s[W.status]!, error: this.s[W.error]!, lastError: this.s[W.lastError]!, needsResets: this.s[W.needsResets]! >>> 0,
      requests: q.map((b) => this.s[b + Q.requests]! >>> 0), bytes: q.map((b) => this.s[b + Q.bytes]! >>> 0),
      drops: q.map((b) => this.s[b + Q.drops]! >>> 0), readBytes: q.map((b) => this.s[b + Q.readBytes]! >>> 0),
      ...(this.type.counters ? { device: this.type.counters() } : {}),
    };
  }

  // --- PCI ------------------------------------------------------------------------------------

  configChanged(offset: number, size: number): void {
    const end = offset + size;
    const cap = this.msixCapOffset + 2;
    if (offset < cap + 2 && end > cap) this.msix.deliverPending();
    if ((offset < PCI_COMMAND + 2 && end > PCI_COMMAND) || (offset < PCI_BAR0 + 4 && end > PCI_BAR0)) this.updateIoeventfds();
  }

  mmioRead(bar: number, offset: number, data: Uint8Array, size: number): void {
    if (bar === BAR_MSIX) {
      if (offset < MSIX_PBA) this.msix.readTable(offset - MSIX_TABLE, data, size);
      else this.msix.readPba(offset - MSIX_PBA, data, size);
      return;
    }
    data.fill(0, 0, size);
    if (offset >= COMMON_CFG && offset + size <= COMMON_CFG + COMMON_CFG_LENGTH) {
      this.fillCommon();
      // Byte by byte, not data.set(subarray): no view allocated per register read (an MMIO exit).
      for (let i = 0; i < size; i++) data[i] = this.scratch[offset + i]!;
    } else if (offset === ISR_CFG) {
      // Reading the ISR status clears it (4.1.4.5).
      data[0] = this.s[W.isr]!;
      this.s[W.isr] = 0;
    } else if (offset >= DEVICE_CFG && offset + size <= DEVICE_CFG + this.type.configBytes && this.type.readConfig) {
      const v = this.type.readConfig(offset - DEVICE_CFG, size);
      for (let i = 0; i < size; i++) data[i] = (v >>> (8 * i)) & 0xff;
    }
  }

  mmioWrite(bar: number, offset: number, data: Uint8Array, size: number): void {
    if (bar === BAR_MSIX) {
      if (offset < MSIX_PBA) this.msix.writeTable(offset - MSIX_TABLE, data, size);
      return;
    }
    let v = 0;
    for (let i = 0; i < Math.min(size, 4); i++) v |= data[i]! << (8 * i);
    v >>>= 0;
    if (offset >= NOTIFY_CFG && offset < NOTIFY_CFG + NOTIFY_OFF_MULTIPLIER * this.type.queues) {
      const queue = Math.floor((offset - NOTIFY_CFG) / NOTIFY_OFF_MULTIPLIER);
      this.s[W.mmioNotifies]!++;
      this.io.notify(queue);
    } else if (offset >= COMMON_CFG && offset < COMMON_CFG + COMMON_CFG_LENGTH) {
      this.writeCommon(offset, size, v);
    }
  }

  // --- common configuration ---------------------------------------------------------------------

  private qbase(): number {
    const sel = this.s[W.queueSelect]!;
    return sel < this.type.queues ? W.queues + Q_WORDS * sel : -1;
  }

  private fillCommon(): void {
    const d = this.scratchView;
    const s = this.s;
    const sel = s[W.deviceFeatureSelect]!;
    d.setUint32(0x00, sel, true);
    d.setUint32(0x04, sel === 0 || sel === 1 ? this.offeredHalves[sel]! : 0, true);
    d.setUint32(0x08, s[W.driverFeatureSelect]!, true);
    const gsel = s[W.driverFeatureSelect]!;
    d.setUint32(0x0c, gsel === 0 ? s[W.driverFeaturesLo]! : gsel === 1 ? s[W.driverFeaturesHi]! : 0, true);
    d.setUint16(0x10, s[W.configVector]!, true);
    d.setUint16(0x12, this.type.queues, true);
    d.setUint8(0x14, s[W.status]!);
    d.setUint8(0x15, s[W.generation]!);
    d.setUint16(0x16, s[W.queueSelect]!, true);
    const q = this.qbase();
    const qw = (i: number) => (q < 0 ? 0 : s[q + i]!);
    d.setUint16(0x18, qw(Q.size), true);
    d.setUint16(0x1a, q < 0 ? VIRTIO_MSI_NO_VECTOR : qw(Q.vector), true);
    d.setUint16(0x1c, qw(Q.enable), true);
    d.setUint16(0x1e, q < 0 ? 0 : s[W.queueSelect]!, true); // queue_notify_off = queue index
    d.setUint32(0x20, qw(Q.descLo), true);
    d.setUint32(0x24, qw(Q.descHi), true);
    d.setUint32(0x28, qw(Q.availLo), true);
    d.setUint32(0x2c, qw(Q.availHi), true);
    d.setUint32(0x30, qw(Q.usedLo), true);
    d.setUint32(0x34, qw(Q.usedHi), true);
  }

  private writeCommon(offset: number, size: number, v: number): void {
    const s = this.s;
    const q = this.qbase();
    const queueIdle = q >= 0 && s[q + Q.enable] === 0;
    switch (offset) {
      case 0x00: if (size === 4) s[W.deviceFeatureSelect] = v | 0; return;
      case 0x08: if (size === 4) s[W.driverFeatureSelect] = v | 0; return;
      case 0x0c:
        // Features are the driver's to choose only until it says FEATURES_OK.
        if (size !== 4 || (s[W.status]! & STATUS.featuresOk) !== 0) return;
        if (s[W.driverFeatureSelect] === 0) s[W.driverFeaturesLo] = v | 0;
        else if (s[W.driverFeatureSelect] === 1) s[W.driverFeaturesHi] = v | 0;
        return;
      case 0x10: if (size === 2) s[W.configVector] = this.vectorOrNone(v); return;
      case 0x14: if (size === 1) this.writeStatus(v & 0xff); return;
      case 0x16: if (size === 2) s[W.queueSelect] = v & 0xffff; return;
      case 0x18: if (size === 2 && queueIdle) s[q + Q.size] = v & 0xffff; return;
      case 0x1a: if (size === 2 && q >= 0) s[q + Q.vector] = this.vectorOrNone(v); return;
      case 0x1c: if (size === 2 && queueIdle && v === 1) this.enableQueue(q); return;
      default: break;
    }
    // The three 64-bit ring addresses, as two 32-bit halves (or one 64-bit write split by the caller).
    if (size === 4 && queueIdle && offset >= 0x20 && offset < 0x38) s[q + Q.descLo + (offset - 0x20) / 4] = v | 0;
  }

  /** A vector the table has, else NO_VECTOR (reads back so: the driver sees the mapping failed). */
  private vectorOrNone(v: number): number {
    return v < this.msix.vectors ? v : VIRTIO_MSI_NO_VECTOR;
  }

  private writeStatus(v: number): void {
    const s = this.s;
    if (v === 0) {
      this.resetDevice();
      return;
    }
    let next = v & ~STATUS.needsReset;
    if ((next & STATUS.featuresOk) !== 0 && (s[W.status]! & STATUS.featuresOk) === 0 && !this.featuresAcceptable()) {
      next &= ~STATUS.featuresOk; // the driver reads it back and gives up (3.1.1)
    }
    s[W.status] = next | (s[W.status]! & STATUS.needsReset);
  }

  private featuresAcceptable(): boolean {
    const chosen = BigInt(this.s[W.driverFeaturesLo]! >>> 0) | (BigInt(this.s[W.driverFeaturesHi]! >>> 0) << 32n);
    return (chosen & ~this.offeredFeatures) === 0n && (chosen & (1n << BigInt(VIRTIO_F_VERSION_1))) !== 0n;
  }

  private enableQueue(q: number): void {
    const size = this.s[q + Q.size]!;
    if (size === 0 || size > this.type.maxQueueSize || (size & (size - 1)) !== 0) {
      this.needsReset(QUEUE_ERROR.badSize);
      return;
    }
    this.s[q + Q.lastAvail] = 0;
    this.s[q + Q.usedIdx] = 0;
    this.s[q + Q.enable] = 1;
  }

  /** Device reset (status 0): everything the driver set is forgotten; MSI-X (PCI's) stays. */
  private resetDevice(): void {
    const s = this.s;
    // A request served outside the bus lock finishes first: after the reset nothing of it may land.
    for (let i = 0; i < this.type.queues; i++) {
      const cell = W.queues + Q_WORDS * i + Q.inService;
      const end = Date.now() + RESET_DRAIN_LIMIT_MS;
      while (Atomics.load(s, cell) !== 0 && Date.now() < end) Atomics.wait(s, cell, 1, 100);
    }
    s[W.deviceFeatureSelect] = 0;
    s[W.driverFeatureSelect] = 0;
    s[W.driverFeaturesLo] = 0;
    s[W.driverFeaturesHi] = 0;
    s[W.configVector] = VIRTIO_MSI_NO_VECTOR;
    s[W.status] = 0;
    s[W.queueSelect] = 0;
    s[W.isr] = 0;
    s[W.error] = 0;
    s[W.generation] = (s[W.generation]! + 1) & 0xff;
    s[W.resets]!++;
    for (let i = 0; i < this.type.queues; i++) {
      const q = W.queues + Q_WORDS * i;
      s[q + Q.size] = this.type.maxQueueSize;
      s[q + Q.vector] = VIRTIO_MSI_NO_VECTOR;
      for (const k of [Q.enable, Q.descLo, Q.descHi, Q.availLo, Q.availHi, Q.usedLo, Q.usedHi, Q.lastAvail, Q.usedIdx]) s[q + k] = 0;
    }
  }

  /** DEVICE_NEEDS_RESET (2.1.2): set the bit, and tell a driver that is running with a configuration interrupt. */
  needsReset(error: number): void {
    const s = this.s;
    if ((s[W.status]! & STATUS.needsReset) !== 0) return;
    s[W.error] = error;
    s[W.lastError] = error;
    s[W.needsResets]!++;
    s[W.status] = s[W.status]! | STATUS.needsReset;
    s[W.generation] = (s[W.generation]! + 1) & 0xff;
    if ((s[W.status]! & STATUS.driverOk) !== 0) this.interrupt(s[W.configVector]!, 2);
  }

  /** Sets `isrBit` in the ISR and raises `vector` through MSI-X (none for VIRTIO_MSI_NO_VECTOR). */
  interrupt(vector: number, isrBit: number): void {
    this.s[W.isr] = this.s[W.isr]! | isrBit;
    if (vector !== VIRTIO_MSI_NO_VECTOR) this.msix.raise(vector);
  }

  // --- notifications -------------------------------------------------------------------------

  /** The notify address of `queue` with BAR 0 where it is now. */
  notifyAddress(queue: number, regsBase = this.config.barAddress(BAR_REGS)): number {
    return regsBase + NOTIFY_CFG + NOTIFY_OFF_MULTIPLIER * queue;
  }

  /**
   * Keeps the ioeventfds on the notify addresses BAR 0 decodes now (none while decoding is off).
   * The guest picks the address: where KVM refuses one (EEXIST, ...), that queue's notifications
   * simply come as MMIO exits, and the guest's configuration write never fails the vCPU.
   */
  private updateIoeventfds(): void {
    const set = this.io.setIoeventfd;
    if (!set) return;
    const base = this.config.memoryEnabled && this.config.barAt(this.config.barAddress(BAR_REGS)) === BAR_REGS ? this.config.barAddress(BAR_REGS) : 0;
    const old = this.s[W.ioeventfdBase]! >>> 0;
    if (base === old) return;
    const assigned = this.s[W.ioeventfdQueues]!;
    for (let q = 0; q < this.type.queues; q++) {
      if (old === 0 || (assigned & (1 << q)) === 0) continue;
      try { set(this.notifyAddress(q, old), q, false); } catch { /* gone with the VM or never there */ }
    }
    let now = 0;
    for (let q = 0; q < this.type.queues && base !== 0; q++) {
      try {
        set(this.notifyAddress(q, base), q, true);
        now |= 1 << q;
      } catch {
        this.s[W.ioeventfdRefused]!++;
      }
    }
    this.s[W.ioeventfdBase] = base | 0;
    this.s[W.ioeventfdQueues] = now;
  }

  // --- the I/O thread (virtio-queue-service.ts) --------------------------------------------------

  /**
   * Serves every enabled queue, at most MAX_CHAINS_PER_PASS chains each (the I/O thread, under the
   * bus lock); true when chains remain: call again after letting go of the lock.
   */
  serviceQueues(ram: GuestRam, kicks = 1, server: QueueServer = this.type, busLock?: { lock(): void; unlock(): void }): boolean {
    return this.service.serviceQueues(ram, kicks, server, busLock);
  }

  /** Fills available chains of a device-filled queue (QueueService.fillQueue). */
  fillQueue(queue: number, ram: GuestRam, fill: (chain: Chain) => number): number {
    return this.service.fillQueue(queue, ram, fill);
  }

  /** Counts a request the back end dropped on `queue` (the I/O thread; read by anyone). */
  countDrop(queue: number): void {
    this.service.countDrop(queue);
  }

  /** Counts bytes the back end took out of a chain of `queue` (the I/O thread; read by anyone; wraps at 2^32). */
  countRead(queue: number, bytes: number): void {
    this.service.countRead(queue, bytes);
  }
}
