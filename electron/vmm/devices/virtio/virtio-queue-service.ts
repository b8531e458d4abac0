// The I/O thread's side of a virtio-pci device: it takes the chains the driver made available on
// each queue, has the device type (or its back end) serve them, and puts them on the used ring,
// all over the device's shared words (virtio-pci-regs.ts), under the bus lock. The guest-facing
// registers are VirtioPci's (virtio-pci.ts), which hands the calls here.
import type { GuestRam } from './guest-ram.ts';
import { QUEUE_ERROR, SplitQueue, type Chain } from './virtqueue.ts';
import { SERVE_NEEDS_RESET, type QueueServer, type VirtioDeviceType } from './virtio-device-type.ts';
import { Q, Q_WORDS, STATUS, W } from './virtio-pci-regs.ts';

/** Chains one serviceQueues call takes from a queue before it lets go of the bus lock. */
export const MAX_CHAINS_PER_PASS = 16;

/** What serving asks of the transport (VirtioPci). */
export interface QueueTransport {
  /** The function may master the bus (PCI COMMAND): without it no ring is touched. */
  readonly busMaster: boolean;
  /** DEVICE_NEEDS_RESET for this QUEUE_ERROR. */
  needsReset(error: number): void;
  /** Sets `isrBit` in the ISR and raises `vector` (none: VIRTIO_MSI_NO_VECTOR). */
  interrupt(vector: number, isrBit: number): void;
}

export class QueueService {
  private readonly s: Int32Array;
  private readonly type: VirtioDeviceType;
  private readonly transport: QueueTransport;
  private queue?: SplitQueue;

  /** `state`: the device's shared words (virtioStateWords(type.queues)). */
  constructor(state: Int32Array, type: VirtioDeviceType, transport: QueueTransport) {
    this.s = state;
    this.type = type;
    this.transport = transport;
  }

  /**
   * Serves every enabled queue (the I/O thread, under the bus lock): takes each available chain,
   * lets the device type serve it, puts it on the used ring, and interrupts the driver once per
   * queue that did work unless it asked not to be. A bad ring or chain stops the device
   * (needsReset). At most MAX_CHAINS_PER_PASS chains per queue per call, so the bus lock is never
   * held for a whole ring of a hostile guest's 64 KiB requests: returns true when chains remain,
   * and the caller calls again after letting go of the lock.
   */
  serviceQueues(ram: GuestRam, kicks = 1, server: QueueServer = this.type, busLock?: { lock(): void; unlock(): void }): boolean {
    const s = this.s;
    s[W.kicks] = (s[W.kicks]! + kicks) | 0;
    if ((s[W.status]! & (STATUS.driverOk | STATUS.needsReset | STATUS.failed)) !== STATUS.driverOk || !this.transport.busMaster) return false;
    this.queue ??= new SplitQueue(ram);
    const sq = this.queue;
    let more = false;
    for (let i = 0; i < this.type.queues; i++) {
      const q = W.queues + Q_WORDS * i;
      if (s[q + Q.enable] !== 1 || ((this.type.deviceFilled ?? 0) & (1 << i)) !== 0) continue;
      const addr = (lo: number) => (s[q + lo]! >>> 0) + (s[q + lo + 1]! >>> 0) * 0x1_0000_0000;
      if (!sq.bind({ size: s[q + Q.size]!, desc: addr(Q.descLo), avail: addr(Q.availLo), used: addr(Q.usedLo) })) {
        this.transport.needsReset(sq.error);
        return false;
      }
      const available = sq.pending(s[q + Q.lastAvail]!);
      if (available < 0) {
        this.transport.needsReset(sq.error);
        return false;
      }
      let n = Math.min(available, MAX_CHAINS_PER_PASS);
      if (available > n) more = true;
      let served = 0;
      while (n-- > 0) {
        const last = s[q + Q.lastAvail]!;
        if (!sq.pop(last)) {
          this.transport.needsReset(sq.error);
          return false;
        }
        let written: number;
        if (this.type.servesUnlocked && busLock) {
          // The chain is ours (taken from the ring under the lock); its I/O needs no device state.
          const resets = s[W.resets];
          Atomics.store(s, q + Q.inService, 1);
          busLock.unlock();
          try {
            written = server.serve(i, sq.chain, ram);
          } finally {
            Atomics.store(s, q + Q.inService, 0);
            Atomics.notify(s, q + Q.inService);
            busLock.lock();
          }
          // Reset while it was in flight: the driver has forgotten the queue; the completion goes nowhere.
          if (s[W.resets] !== resets) return false;
        } else {
          written = server.serve(i, sq.chain, ram);
        }
        if (written === SERVE_NEEDS_RESET) {
          this.transport.needsReset(QUEUE_ERROR.badRequest);
          return false;
        }
        this.complete(q, sq, last, written);
        served++;
      }
      if (served > 0 && !sq.interruptSuppressed()) this.transport.interrupt(s[q + Q.vector]!, 1);
    }
    return more;
  }

  /** Puts the chain just popped on the used ring, `written` bytes long, and counts it (under the bus lock). */
  private complete(q: number, sq: SplitQueue, last: number, written: number): void {
    const s = this.s;
    sq.push(s[q + Q.usedIdx]!, sq.chain.head, written);
    s[q + Q.usedIdx] = (s[q + Q.usedIdx]! + 1) & 0xffff;
    s[q + Q.lastAvail] = (last + 1) & 0xffff;
    s[q + Q.requests]!++;
    s[q + Q.bytes] = (s[q + Q.bytes]! + written) | 0;
  }

  /** Counts a request the back end dropped on `queue` (the I/O thread; read by anyone). */
  countDrop(queue: number): void {
    if (queue < this.type.queues) Atomics.add(this.s, W.queues + Q_WORDS * queue + Q.drops, 1);
  }

  /** Counts bytes the back end took out of a chain of `queue` (the I/O thread; read by anyone; wraps at 2^32). */
  countRead(queue: number, bytes: number): void {
    if (queue < this.type.queues) Atomics.add(this.s, W.queues + Q_WORDS * queue + Q.readBytes, bytes | 0);
  }

  /**
   * Fills available chains of a device-filled queue (the I/O thread, under the bus lock): while
   * `fill` has data it is handed the next chain and returns the bytes it wrote (the chain goes on
   * the used ring) or -1 (the chain is left available, nothing more is filled this call). At most
   * MAX_CHAINS_PER_PASS chains; one interrupt for all of them. Returns how many were filled, or
   * -1 when the queue cannot take any (not running, no chain available, or just broken).
   */
  fillQueue(queue: number, ram: GuestRam, fill: (chain: Chain) => number): number {
    const s = this.s;
    if ((s[W.status]! & (STATUS.driverOk | STATUS.needsReset | STATUS.failed)) !== STATUS.driverOk || !this.transport.busMaster) return -1;
    const q = W.queues + Q_WORDS * queue;
    if (queue >= this.type.queues || s[q + Q.enable] !== 1) return -1;
    this.queue ??= new SplitQueue(ram);
    const sq = this.queue;
    const addr = (lo: number) => (s[q + lo]! >>> 0) + (s[q + lo + 1]! >>> 0) * 0x1_0000_0000;
    if (!sq.bind({ size: s[q + Q.size]!, desc: addr(Q.descLo), avail: addr(Q.availLo), used: addr(Q.usedLo) })) {
      this.transport.needsReset(sq.error);
      return -1;
    }
    const available = sq.pending(s[q + Q.lastAvail]!);
    if (available <= 0) {
      if (available < 0) this.transport.needsReset(sq.error);
      return -1;
    }
    let filled = 0;
    for (let n = Math.min(available, MAX_CHAINS_PER_PASS); n > 0; n--) {
      const last = s[q + Q.lastAvail]!;
      if (!sq.pop(last)) {
        this.transport.needsReset(sq.error);
        return filled > 0 ? filled : -1;
      }
      const written = fill(sq.chain);
      if (written < 0) break;
      this.complete(q, sq, last, written);
      filled++;
    }
    if (filled > 0 && !sq.interruptSuppressed()) this.transport.interrupt(s[q + Q.vector]!, 1);
    return filled;
  }
}
