// What a virtio device type (entropy, network, block...) brings to the transport (virtio-pci.ts):
// its identity, queues, features and configuration, and how a chain of its queues is served.
import type { GuestRam } from './guest-ram.ts';
import type { Chain } from './virtqueue.ts';

/** What a virtio device type brings to the transport; its back end runs on the I/O thread. */
export interface VirtioDeviceType {
  /** Virtio device type (4 = entropy source). */
  readonly type: number;
  readonly name: string;
  readonly queues: number;
  readonly maxQueueSize: number;
  /** Device-specific feature bits (the transport adds VIRTIO_F_VERSION_1). */
  readonly features: bigint;
  /** PCI class code (0xCCSSPP). */
  readonly classCode: number;
  /** Bytes of device-specific configuration (0: none, no capability). */
  readonly configBytes: number;
  readConfig?(offset: number, size: number): number;
  /**
   * Bit per queue the device fills when it has data (a network card's receive queue):
   * serviceQueues leaves its chains available, and the back end takes them with fillQueue.
   */
  readonly deviceFilled?: number;
  /**
   * One available chain of queue `queue`, on the I/O thread: do the request, return the bytes
   * written into the chain's device-writable buffers (the used length), or SERVE_NEEDS_RESET
   * when the request is one the device cannot even answer (the device then needs a reset).
   */
  serve(queue: number, chain: Chain, ram: GuestRam): number;
  /**
   * serve() may run with the bus lock released (file I/O that can take milliseconds: virtio-blk).
   * The transport then marks the queue in service, and a reset waits for the request to end —
   * as QEMU drains in-flight requests — so nothing is written to guest RAM after a reset.
   */
  readonly servesUnlocked?: boolean;
  /** The type's own counters (requests by kind, bytes...), read from shared state by any thread. */
  counters?(): Record<string, number>;
}

/** serve()'s answer for a chain that makes the device need a reset (QUEUE_ERROR.badRequest). */
export const SERVE_NEEDS_RESET = -1;

/** How a chain of a queue is served on the I/O thread (a device type, or a back end with state). */
export interface QueueServer {
  serve(queue: number, chain: Chain, ram: GuestRam): number;
}

/** `type` with fixed device-specific configuration bytes (chosen when the VM is built, e.g. a MAC). */
export function withDeviceConfig(type: VirtioDeviceType, bytes: readonly number[]): VirtioDeviceType {
  return Object.freeze({
    ...type,
    readConfig: (offset: number, size: number) => {
      let v = 0;
      for (let i = 0; i < size; i++) v |= (bytes[offset + i] ?? 0) << (8 * i);
      return v >>> 0;
    },
  });
}

