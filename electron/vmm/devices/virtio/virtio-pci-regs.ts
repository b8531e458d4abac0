// Where each register of the virtio-pci modern transport (virtio 1.2, 4.1) sits: in BAR 0 and
// BAR 1 as the guest finds them through its capabilities, and in the device's shared state words
// (virtioStateWords), which every thread's instance of one device reads and writes.
import { MSIX_ENTRY_BYTES } from '../pci/msix.ts';
import { PCI_CONFIG_BYTES, type PciCapability } from '../pci/pci-config.ts';

export const VIRTIO_VENDOR_ID = 0x1af4;
/** Modern device IDs are 0x1040 + the virtio device type. */
export const VIRTIO_DEVICE_ID_BASE = 0x1040;
export const VIRTIO_F_VERSION_1 = 32;
export const VIRTIO_MSI_NO_VECTOR = 0xffff;

export const STATUS = Object.freeze({
  acknowledge: 1, driver: 2, driverOk: 4, featuresOk: 8, needsReset: 0x40, failed: 0x80,
});

// BAR 0: one 16 KiB memory BAR with the four register blocks on their own pages.
export const BAR_REGS = 0;
export const BAR_MSIX = 1;
export const REGS_BAR_SIZE = 0x4000;
export const MSIX_BAR_SIZE = 0x1000;
export const COMMON_CFG = 0x0000;
export const COMMON_CFG_LENGTH = 0x38;
export const ISR_CFG = 0x1000;
export const DEVICE_CFG = 0x2000;
export const NOTIFY_CFG = 0x3000;
export const NOTIFY_OFF_MULTIPLIER = 4;
export const MSIX_TABLE = 0x000;
export const MSIX_PBA = 0x800;

const VIRTIO_PCI_CAP = 0x09;
/** The virtio structures a vendor capability points the driver at (4.1.4). */
export const CAP_COMMON = 1;
export const CAP_NOTIFY = 2;
export const CAP_ISR = 3;
export const CAP_DEVICE = 4;

// Shared state words of one device (the transport's; its MSI-X table and configuration space follow
// the queues' words).
export const W = Object.freeze({
  deviceFeatureSelect: 0, driverFeatureSelect: 1, driverFeaturesLo: 2, driverFeaturesHi: 3,
  configVector: 4, status: 5, generation: 6, queueSelect: 7, isr: 8,
  /**
   * Counters (telemetry and tests): notifications that came as MMIO exits; notifications the I/O
   * thread took from the device's eventfd (both kinds: the rest came by ioeventfd); MSIs sent.
   */
  mmioNotifies: 9, kicks: 10, interrupts: 11,
  /** BAR 0 address whose notify addresses have ioeventfds assigned (0: none). */
  ioeventfdBase: 12,
  /** The QUEUE_ERROR that made the device need a reset (0: none). */
  error: 13,
  pba: 14,
  resets: 15,
  /** The QUEUE_ERROR of the last DEVICE_NEEDS_RESET (kept across resets: diagnostics) and how many there were. */
  lastError: 16,
  needsResets: 17,
  /** Bit per queue: its ioeventfd is assigned; how many assignments KVM refused. */
  ioeventfdQueues: 18,
  ioeventfdRefused: 19,
  queues: 20,
});
/** Words of one queue, from W.queues + Q_WORDS * queue. */
export const Q = Object.freeze({
  size: 0, vector: 1, enable: 2, descLo: 3, descHi: 4, availLo: 5, availHi: 6, usedLo: 7, usedHi: 8,
  lastAvail: 9, usedIdx: 10, requests: 11, bytes: 12,
  /** Requests the back end dropped (a frame with no receive buffer for it, a malformed one). */
  drops: 13,
  /** 1 while the I/O thread serves a chain of this queue with the bus lock released (servesUnlocked). */
  inService: 14,
  /** Bytes the device took out of the driver's buffers (a transmitted frame), where it says so (countRead). */
  readBytes: 15,
});
export const Q_WORDS = 16;

/** Shared words a device with `queues` queues needs, its configuration space and MSI-X table included. */
export function virtioStateWords(queues: number): number {
  return W.queues + Q_WORDS * queues + (queues + 1) * (MSIX_ENTRY_BYTES / 4) + PCI_CONFIG_BYTES / 4;
}

/** A virtio vendor capability (4.1.4): which structure (`type`) sits where in BAR 0. */
export function virtioCap(type: number, offset: number, length: number, multiplier?: number): PciCapability {
  const le32 = (v: number) => [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24];
  const body = [0, type, BAR_REGS, 0, 0, 0, ...le32(offset), ...le32(length), ...(multiplier !== undefined ? le32(multiplier) : [])];
  body[0] = 2 + body.length; // cap_len counts the ID and next bytes
  return { id: VIRTIO_PCI_CAP, body };
}
