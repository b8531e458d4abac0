// virtio-net (virtio 1.2, 5.1: network device, type 1): receive queue 0, transmit queue 1, no
// control queue and no offloads. Each frame travels behind a 12-byte virtio_net_hdr (VERSION_1:
// num_buffers is always there); without VIRTIO_NET_F_MRG_RXBUF a received frame takes one chain
// and num_buffers is 1. Features: VIRTIO_NET_F_MAC (a MAC fixed when the VM is built: stable
// for a VM name, locally administered) and VIRTIO_NET_F_STATUS (the link is up).
//
// The back end (VirtioNetBackEnd, on the I/O thread) moves frames between the queues and a link
// (user networking through libslirp, or a TAP). Guest buffers are read and written under the bus
// lock; the link is called with the lock released (it may answer at once, from inside, with a
// frame for the guest). Frames for a guest that has no receive buffer wait in a short backlog;
// beyond it they are dropped and counted, as a real card drops them. While the VM is paused the
// same backlog holds what arrives (a paused guest posts no buffers either), so a pause loses
// nothing of a short exchange, costs no memory past the bound whatever its length, and what it
// drops is counted; TCP (libslirp's own, or a peer's over a TAP) resends it after the resume.
import type { PollSet } from '../../../../native/kvm/poll-set.ts';
import type { GuestRam } from './guest-ram.ts';
import type { IoBackEnd, IoBackEndContext } from './io-back-end.ts';
import type { Chain } from './virtqueue.ts';
import type { VirtioDeviceType } from './virtio-device-type.ts';

export const VIRTIO_ID_NET = 1;
export const VIRTIO_NET_F_MAC = 5;
export const VIRTIO_NET_F_STATUS = 16;
export const VIRTIO_NET_S_LINK_UP = 1;
export const RX_QUEUE = 0;
export const TX_QUEUE = 1;
/** struct virtio_net_hdr with num_buffers (virtio 1.x): flags, gso_type, hdr_len, gso_size, csum_start, csum_offset, num_buffers. */
export const NET_HDR_BYTES = 12;
const NUM_BUFFERS_OFFSET = 10;
/** Shortest frame taken from the guest: an Ethernet header. */
export const MIN_FRAME_BYTES = 14;
/** Longest frame either way: no offloads are offered, so a frame is at most the MTU plus headers; this bounds what a hostile chain makes us copy. */
export const MAX_FRAME_BYTES = 65535;
/** Frames kept for a guest that has no receive buffer right now; more are dropped (counted). */
export const RX_BACKLOG_FRAMES = 64;

export const VIRTIO_NET: VirtioDeviceType = Object.freeze({
  type: VIRTIO_ID_NET,
  name: 'virtio-net',
  queues: 2,
  maxQueueSize: 256,
  features: (1n << BigInt(VIRTIO_NET_F_MAC)) | (1n << BigInt(VIRTIO_NET_F_STATUS)),
  classCode: 0x020000, // network controller, Ethernet
  configBytes: 8, // mac[6], status (max_virtqueue_pairs and mtu need features not offered)
  deviceFilled: 1 << RX_QUEUE,
  // Without a back end (a thread that only reads registers) there is nothing to send to.
  serve: () => 0,
});

export function macBytes(mac: string): number[] {
  const b = mac.split(':').map((x) => Number.parseInt(x, 16));
  if (b.length !== 6 || b.some((x) => !(x >= 0 && x <= 255))) throw new RangeError(`not a MAC address: ${mac}`);
  return b;
}

/** The device configuration the guest reads: mac, then status (link up). */
export function netConfigBytes(mac: string): number[] {
  return [...macBytes(mac), VIRTIO_NET_S_LINK_UP, 0];
}

/**
 * The frame of a transmit chain: its device-readable bytes after the header, copied into `out`.
 * Returns the frame's length, or -1 for a chain that holds no whole header and Ethernet header,
 * or a frame longer than MAX_FRAME_BYTES (or `out`). Device-writable buffers are ignored.
 */
export function readTxFrame(chain: Chain, ram: GuestRam, out: Uint8Array): number {
  let skip = NET_HDR_BYTES;
  let n = 0;
  const max = Math.min(MAX_FRAME_BYTES, out.length);
  for (let i = 0; i < chain.count; i++) {
    if (chain.writable[i]) continue;
    let off = chain.offset[i]!;
    let len = chain.length[i]!;
    if (skip > 0) {
      const k = Math.min(skip, len);
      skip -= k;
      off += k;
      len -= k;
    }
    if (len === 0) continue;
    if (n + len > max) return -1;
    out.set(ram.bytes.subarray(off, off + len), n);
    n += len;
  }
  return skip > 0 || n < MIN_FRAME_BYTES ? -1 : n;
}

/**
 * Writes a received frame behind its header into a receive chain's device-writable buffers.
 * Returns the bytes written (header included: the used length), or -1 when the chain cannot hold
 * them (nothing is written then).
 */
export function writeRxFrame(chain: Chain, ram: GuestRam, frame: Uint8Array): number {
  const total = NET_HDR_BYTES + frame.length;
  if (chain.writableBytes() < total) return -1;
  const hdr = rxHeader;
  let at = 0; // bytes of header + frame written so far
  for (let i = 0; i < chain.count && at < total; i++) {
    if (!chain.writable[i]) continue;
    let off = chain.offset[i]!;
    let room = chain.length[i]!;
    if (at < NET_HDR_BYTES) {
      const k = Math.min(NET_HDR_BYTES - at, room);
      ram.bytes.set(hdr.subarray(at, at + k), off);
      at += k;
      off += k;
      room -= k;
    }
    const k = Math.min(total - at, room);
    if (k > 0) {
      const from = at - NET_HDR_BYTES;
      ram.bytes.set(frame.subarray(from, from + k), off);
      at += k;
    }
  }
  return total;
}

// No checksum or GSO to tell of; one buffer per frame.
const rxHeader = new Uint8Array(NET_HDR_BYTES);
rxHeader[NUM_BUFFERS_OFFSET] = 1;

/** Where frames go and come from: user networking (libslirp) or a TAP device. */
export interface NetLink {
  /**
   * A frame the guest sent. May call the link's receive callback before it returns. False when
   * the link lost it (a tap's queue full): counted as a transmit drop.
   */
  send(frame: Uint8Array): boolean;
  fillPoll(set: PollSet): number;
  afterPoll(set: PollSet): void;
  close(): void;
}

/** The I/O thread's half of one virtio-net device. */
export class VirtioNetBackEnd implements IoBackEnd {
  private readonly ctx: IoBackEndContext;
  private readonly link: NetLink;
  private readonly txBuf = new Uint8Array(MAX_FRAME_BYTES);
  /** Frames taken from the transmit queue under the lock, sent to the link after it. */
  private readonly tx: Uint8Array[] = [];
  /** Frames for the guest waiting for receive buffers. */
  private readonly rx: Uint8Array[] = [];
  private readonly fill = (chain: Chain) => this.fillChain(chain);

  /** `openLink` gets the callback its received frames go to (a frame's bytes are copied at once). */
  constructor(ctx: IoBackEndContext, openLink: (receive: (frame: Uint8Array) => void) => NetLink) {
    this.ctx = ctx;
    this.link = openLink((frame) => this.receive(frame));
  }

  serve(queue: number, chain: Chain, ram: GuestRam): number {
    if (queue !== TX_QUEUE) return 0;
    const n = readTxFrame(chain, ram, this.txBuf);
    if (n < 0) this.ctx.device.countDrop(TX_QUEUE);
    else {
      this.tx.push(this.txBuf.slice(0, n));
      this.ctx.device.countRead(TX_QUEUE, n + NET_HDR_BYTES); // as rx's bytes: header included
    }
    return 0; // a transmit chain has nothing written into it
  }

  afterKick(): void {
    // Taken under the lock, sent without it: the link may answer from inside send().
    for (let f = this.tx.shift(); f; f = this.tx.shift()) if (!this.link.send(f)) this.ctx.device.countDrop(TX_QUEUE);
    // A notification of the receive queue means new buffers: the backlog may fit now.
    this.flushRx();
  }

  fillPoll(set: PollSet): number {
    return this.link.fillPoll(set);
  }

  afterPoll(set: PollSet, serving: boolean): void {
    // Paused: the link still runs (libslirp's timers, a tap's reads) and its frames for the guest
    // queue up in the backlog, bounded like any wait for receive buffers.
    this.link.afterPoll(set);
    if (serving) this.flushRx();
  }

  close(): void {
    this.link.close();
  }

  /** A frame from the link for the guest (copied: the link's buffer is its own). */
  private receive(frame: Uint8Array): void {
    if (frame.length === 0 || frame.length > MAX_FRAME_BYTES || this.rx.length >= RX_BACKLOG_FRAMES) {
      this.ctx.device.countDrop(RX_QUEUE);
      return;
    }
    this.rx.push(frame.slice());
  }

  /** Moves backlog frames into the guest's receive buffers, a bounded pass per hold of the lock. */
  private flushRx(): void {
    const { device, ram, lock } = this.ctx;
    while (this.rx.length > 0) {
      lock.lock();
      let filled: number;
      try {
        filled = device.fillQueue(RX_QUEUE, ram, this.fill);
      } finally {
        lock.unlock();
      }
      if (filled <= 0) return;
    }
  }

  /** One receive chain: the next backlog frame that fits it (frames too large for it are dropped). */
  private fillChain(chain: Chain): number {
    while (this.rx.length > 0) {
      const frame = this.rx.shift()!;
      const written = writeRxFrame(chain, this.ctx.ram, frame);
      if (written >= 0) return written;
      this.ctx.device.countDrop(RX_QUEUE);
    }
    return -1;
  }
}
