// A hostile driver against virtio-net, without KVM, at two levels.
//
// Headers: random descriptor layouts (empty, one-byte, readable and writable buffers mixed,
// overlapping ones, headers split anywhere, lengths up to past the frame limit) against
// readTxFrame / writeRxFrame and an independent reference written here from the spec (virtio 1.2,
// 5.1.6). Named invariants after every case: nothing throws; transmit returns exactly the
// reference's frame, or -1 exactly when the reference finds no whole header + Ethernet header or
// too long a frame, and never writes guest RAM; receive writes -1 and nothing exactly when the
// writable buffers are too small, else header (zeros, num_buffers 1) then frame across the writable
// buffers in order, and not one byte elsewhere.
//
// Queues: one device on the real board per case, with its back end (VirtioNetBackEnd) and a link
// of the test's where libslirp sits (frames the device sends are kept; it can lose them, and answer
// from inside send as libslirp does), driven through a long sequence of queue operations: transmit
// chains offered and notified, receive buffers posted and notified, frames delivered by the link
// (some while the VM is paused), interrupt suppression turned on and off, registers rewritten while
// the queues run, resets (with chains pending, frames waiting in the backlog) and reprogrammed rings;
// mixed with hand-designed hostile ones: descriptor loops, next and head indices past the ring,
// buffers past RAM, 4 GiB lengths and addresses up to 2^64, indirect descriptors, readable after
// writable buffers, available indices a whole ring ahead, full rings, one chain of every
// descriptor, headers split in one-byte descriptors, frames of 13, 14, 65535 and 65536 bytes,
// buffers over the rings themselves (a received frame rewriting the driver's rings), one head
// offered many times, queue sizes that are no power of two or too large, rings outside RAM,
// misaligned or over each other, and the 16-bit ring indices wrapping. An independent reference
// (the split queue's rules, the pass structure the transport documents, the back end's backlog and
// drops, all written here) serves the same chains over the driver's own copy of guest RAM, in the
// same order, and says what the device must do. Named invariants after every step: no exception
// escapes the device or its back end; a queue drains in a bounded number of passes; the device
// needs a reset exactly when the reference finds a bad ring or chain, names the rule, and serves
// nothing more until it is reset; it served exactly the reference's chains on each queue; the link
// got exactly the reference's frames, in order (tx frame length, tx frame bytes); transmit chains
// the reference refuses, and frames the link lost, are counted as drops; receive drops exactly the
// frames the reference drops (a chain too small, a full backlog, an empty or oversized frame);
// bytes moved are counted as the reference moved them; one interrupt per completed pass of each
// queue (none when the driver asked for none) and one configuration interrupt per break of a
// running device, as MSIs only on the vectors the driver gave (shared, or none for NO_VECTOR) and as
// ISR bits, which a read clears; guest RAM equals the reference's copy byte for byte (headers and
// frames in the receive buffers, used elements and indices, and nothing else: transmit writes no
// guest RAM but its used ring). Writes that land on the rings (a receive buffer over them, a used
// ring over another ring) are served by the reference in the device's order, so they are checked
// like any other. After register operations: a reset clears the status and disables the queues; a
// vector the table lacks reads back as NO_VECTOR; queue registers are frozen while the queue is
// enabled; a queue of a bad size needs a reset at once.
//
// One OPERATION (queue level) is one available-ring entry the device took and that was then
// checked: a transmit chain read (its frame sent, or refused and counted), a receive chain filled
// with a frame, or a chain refused as the first bad one (DEVICE_NEEDS_RESET); or one ring the device
// refused as a whole (a bad queue size at queue_enable, rings outside RAM or misaligned, an available
// index a whole ring ahead). Frames the link delivers, receive buffers still waiting for a frame,
// chains offered to a device that needs a reset, notifies, resets and register writes are counted
// apart and are not operations; nor are the header-level calls. The queue property runs 1,000,000
// operations at FUZZ_SCALE=1; the structured cases add their own.
//
// FUZZ_SEED=<n> replays a run; FUZZ_SCALE=<x> scales the number of cases (and so of operations);
// FUZZ_SHRINK=1 shrinks a failure.
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, slotBars, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { FuzzDriver } from '../support/virtio-fuzz-driver.ts';
import { Chain, QUEUE_ERROR, QUEUE_ERROR_NAMES } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import {
  MAX_FRAME_BYTES, MIN_FRAME_BYTES, NET_HDR_BYTES, RX_BACKLOG_FRAMES, VirtioNetBackEnd, netConfigBytes, readTxFrame, writeRxFrame, type NetLink,
} from '../../electron/vmm/devices/virtio/virtio-net.ts';
import type { VirtioPci } from '../../electron/vmm/devices/virtio/virtio-pci.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { MAX_CHAINS_PER_PASS } from '../../electron/vmm/devices/virtio/virtio-queue-service.ts';
import { PollSet } from '../../native/kvm/poll-set.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const fcOptions = (numRuns: number) => ({ numRuns: Math.max(1, Math.round(numRuns * SCALE)), ...(SEED === undefined ? {} : { seed: SEED }), endOnFailure: process.env.FUZZ_SHRINK === undefined });
/** Cases of the queue property, and operations each (RUNS * OPS_PER_CASE = 1,000,000 at scale 1). */
const RUNS = 400;
const OPS_PER_CASE = 2500;

const checks: Record<string, number> = {};
/** Operations (see the header) and the rest, counted apart. */
const tally = {
  operations: 0, queueOperations: 0, txServed: 0, rxFilled: 0, chainsRefused: 0, ringsRefused: 0, framesSent: 0, framesLost: 0,
  framesDelivered: 0, rxDrops: 0, txDrops: 0, notifies: 0, brokenSteps: 0, resets: 0, wrapped: 0, headerCalls: 0,
};
const refusals: Record<string, number> = {};
const structuredRuns: Record<string, number> = {};

function inv(name: string, ok: boolean, detail?: () => string): void {
  checks[name] = (checks[name] ?? 0) + 1;
  if (!ok) throw new Error(`invariant "${name}" violated${detail ? `: ${detail()}` : ''}`);
}

// Frame contents: a window of this, so no case builds a 64 KiB frame byte by byte.
const PATTERN = Uint8Array.from({ length: MAX_FRAME_BYTES + 512 }, (_, i) => (i * 7 + 3) & 0xff);

// ================================================================================================
// Header level: readTxFrame / writeRxFrame on hand-built chains.
// ================================================================================================

const FN_RAM_SIZE = 0x30000; // room for a chain past MAX_FRAME_BYTES
const FN_BACKGROUND = Buffer.from(Uint8Array.from({ length: FN_RAM_SIZE }, (_, i) => (i * 131 + 7) & 0xff));

interface Buf { offset: number; length: number; writable: boolean }

const small = fc.record({ offset: fc.integer({ min: 0, max: 0x1000 }), length: fc.oneof(fc.constantFrom(0, 1, 2, 11, 12, 13, 14), fc.integer({ min: 0, max: 3000 })), writable: fc.boolean() });
const huge = fc.record({ offset: fc.integer({ min: 0, max: 0x2000 }), length: fc.integer({ min: MAX_FRAME_BYTES - 100, max: MAX_FRAME_BYTES + NET_HDR_BYTES + 100 }), writable: fc.boolean() });
const chainArb = fc.array(fc.oneof({ weight: 12, arbitrary: small }, { weight: 1, arbitrary: huge }), { minLength: 0, maxLength: 12 });

function toChain(bufs: Buf[]): Chain {
  const c = new Chain(16);
  c.count = bufs.length;
  bufs.forEach((b, i) => { c.offset[i] = b.offset; c.length[i] = b.length; c.writable[i] = b.writable ? 1 : 0; });
  return c;
}

/** The spec's transmit rule: the readable bytes in order, the first 12 the header, the rest the frame. */
function referenceTx(ram: Uint8Array, bufs: Buf[]): Uint8Array | undefined {
  const readable = bufs.filter((b) => !b.writable);
  const total = readable.reduce((a, b) => a + b.length, 0);
  if (total > NET_HDR_BYTES + MAX_FRAME_BYTES || total < NET_HDR_BYTES + MIN_FRAME_BYTES) return undefined;
  const bytes = new Uint8Array(total);
  let at = 0;
  for (const b of readable) {
    bytes.set(ram.subarray(b.offset, b.offset + b.length), at);
    at += b.length;
  }
  return bytes.subarray(NET_HDR_BYTES);
}

describe('virtio-net headers against random hostile chains (reference model)', () => {
  const ram = new GuestRam(new Uint8Array(new SharedArrayBuffer(FN_RAM_SIZE)), [{ guestPhysAddr: 0, size: FN_RAM_SIZE, offset: 0 }]);
  // Whole-RAM comparisons in native code (a case looks at all of it).
  const ramBuf = Buffer.from(ram.bytes.buffer, ram.bytes.byteOffset, FN_RAM_SIZE);
  const out = new Uint8Array(MAX_FRAME_BYTES);

  it('transmit: the frame is exactly the reference\'s, or refused exactly when the reference refuses it; RAM untouched', () => {
    fc.assert(fc.property(chainArb, (bufs) => {
      ram.bytes.set(FN_BACKGROUND);
      let n = -2;
      let threw: unknown;
      tally.headerCalls++;
      try { n = readTxFrame(toChain(bufs), ram, out); } catch (e) { threw = e; }
      inv('tx never throws', threw === undefined, () => String(threw));
      const want = referenceTx(ram.bytes, bufs);
      inv('tx refuses exactly what the reference refuses', (n < 0) === (want === undefined), () => `got ${n}, reference ${want?.length}`);
      if (want) {
        inv('tx frame length', n === want.length, () => `${n} vs ${want.length}`);
        inv('tx frame bytes', Buffer.from(out.buffer, 0, n).equals(want));
      }
      inv('tx writes no guest RAM', ramBuf.equals(FN_BACKGROUND));
    }), fcOptions(2000));
  }, 120_000);

  it('receive: header then frame across the writable buffers in order, nothing elsewhere; -1 and nothing when they are too small', () => {
    const frameArb = fc.oneof(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 60, max: 1514 }), fc.constantFrom(MAX_FRAME_BYTES));
    fc.assert(fc.property(chainArb, frameArb, fc.integer({ min: 0, max: 255 }), (bufs, len, seed) => {
      ram.bytes.set(FN_BACKGROUND);
      const frame = PATTERN.subarray(seed, seed + len);
      const total = NET_HDR_BYTES + len;
      const room = bufs.reduce((a, b) => a + (b.writable ? b.length : 0), 0);
      let n = -2;
      let threw: unknown;
      tally.headerCalls++;
      try { n = writeRxFrame(toChain(bufs), ram, frame); } catch (e) { threw = e; }
      inv('rx never throws', threw === undefined, () => String(threw));
      if (room < total) {
        inv('rx refuses a chain too small', n === -1, () => `got ${n} for room ${room} < ${total}`);
        inv('rx writes nothing when it refuses', ramBuf.equals(FN_BACKGROUND));
        return;
      }
      inv('rx used length is header + frame', n === total, () => `${n} vs ${total}`);
      // The reference: the same bytes written in order over the writable buffers (later buffers
      // overwrite earlier ones where a hostile driver made them overlap, as sequential writes do).
      const expected = Buffer.from(FN_BACKGROUND);
      const stream = new Uint8Array(total);
      stream[10] = 1; // num_buffers
      stream.set(frame, NET_HDR_BYTES);
      let at = 0;
      for (const b of bufs) {
        if (!b.writable || at >= total) continue;
        const k = Math.min(b.length, total - at);
        expected.set(stream.subarray(at, at + k), b.offset);
        at += k;
      }
      inv('rx bytes are the reference\'s', ramBuf.equals(expected), () => {
        const i = ram.bytes.findIndex((b, j) => b !== expected[j]);
        return `first difference at ${i}: ${ram.bytes[i]} vs ${expected[i]}`;
      });
    }), fcOptions(2000));
  }, 120_000);

  afterAll(() => {
    // Every invariant was checked, and refusals and acceptances both happened.
    for (const name of ['tx never throws', 'tx refuses exactly what the reference refuses', 'tx frame bytes', 'rx never throws', 'rx refuses a chain too small', 'rx bytes are the reference\'s']) {
      expect(checks[name] ?? 0, name).toBeGreaterThan(0);
    }
  });
});

// ================================================================================================
// Queue level: the device on the board, its back end and a link, against the reference.
// ================================================================================================

// xorshift32: a step's details from its seed (replayable, cheap).
function prng(seed: number) {
  let x = (seed ^ 0x2545f491) >>> 0 || 1;
  const next = () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
  return { next, int: (n: number) => next() % n, chance: (p: number) => next() / 2 ** 32 < p };
}
type Prng = ReturnType<typeof prng>;

const RAM_SIZE = 0x10000;
/** Rings go in [0, DATA_START) (each in its own zone), buffers in [DATA_START, RAM_SIZE) (and, rarely, anywhere). */
const DATA_START = 0x4000;
const DATA_SIZE = RAM_SIZE - DATA_START;
const MAX_SIZE = 256; // virtio-net's largest queue
const RX = 0;
const TX = 1;
const BACKGROUND = Uint8Array.from({ length: RAM_SIZE }, (_, i) => (i * 131 + 7) & 0xff);
/** MSI data of MSI-X vectors 0, 1 and 2 (the receive queue's, the transmit queue's and the configuration's, unless the driver picks otherwise). */
const VECTOR_DATA = [0x40, 0x41, 0x42];
const NO_VECTOR = 0xffff;
const MAC = '02:11:22:33:44:55';
const RX_HEADER = new Uint8Array(NET_HDR_BYTES);
RX_HEADER[10] = 1; // num_buffers
const F_NEXT = 1;
const F_WRITE = 2;
const pollSet = new PollSet([]);

interface Ring { size: number; desc: number; avail: number; used: number }
const inRam = (gpa: number, len: number) => gpa >= 0 && gpa + len <= RAM_SIZE;
const sizeOk = (n: number) => n > 0 && n <= MAX_SIZE && (n & (n - 1)) === 0;
const ringOk = (g: Ring) => sizeOk(g.size) && inRam(g.desc, 16 * g.size) && inRam(g.avail, 6 + 2 * g.size) && inRam(g.used, 6 + 8 * g.size) &&
  g.desc % 16 === 0 && g.avail % 2 === 0 && g.used % 4 === 0;

/** A queue as the driver and the reference see it. */
interface Queue {
  ring: Ring;
  ok: boolean;
  /** The device's next available entry and used index (the reference's view). */
  lastAvail: number;
  usedIdx: number;
  /** The driver's available index and next free descriptor; descriptors of the chains still available, oldest first. */
  availIdx: number;
  cursor: number;
  inFlight: number[];
  noInterrupt: boolean;
}

/** A chain as the reference walked it: head and [address, length, writable] triples; or the error that stops the queue. */
interface Walked { head: number; segs: number[]; error: number }

/** What the link did with one frame the device sent. */
interface Sent { frame: Uint8Array; lost: boolean; answer?: Uint8Array }

class NetSession extends FuzzDriver {
  readonly b: ReturnType<typeof attachBoard>;
  readonly device: VirtioPci;
  readonly be: VirtioNetBackEnd;
  private readonly regs: number;
  private deliverToDevice: (f: Uint8Array) => void = () => {};
  /** MSIs sent on vectors 0, 1, 2. */
  readonly irqs = [0, 0, 0];
  /** Interrupts the reference expects, by source: the receive queue, the transmit queue, the configuration. */
  private readonly expIrqs = [0, 0, 0];
  /** The vectors the device holds for those three sources (NO_VECTOR: none), and the MSIs the reference expects on each vector. */
  private vectors = [0, 1, 2];
  private readonly expMsis = [0, 0, 0];
  // The link: what it was handed, and how it behaves.
  private sentLog: Sent[] = [];
  private linkR = prng(1);
  lossy = 0;
  echo = 0;
  // The reference's device.
  q: [Queue, Queue];
  running = false;
  broken = false;
  error = 0;
  private needsResets = 0;
  private readonly requests = [0, 0];
  private readonly bytes = [0, 0];
  private readonly drops = [0, 0];
  private readonly readBytes = [0, 0];
  private backlog: Uint8Array[] = [];
  private expectSent: Uint8Array[] = [];
  private notifies = 0;
  /** Operations of this session (see the header). */
  ops = 0;

  constructor(linkSeed = 1) {
    super(RAM_SIZE, BACKGROUND);
    const config: BoardConfig = { virtio: [{ name: 'net', eventFd: 91, deviceConfig: netConfigBytes(MAC) }] };
    const nop = () => {};
    this.b = attachBoard(createDeviceState(config), {
      emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop,
      signalMsi: (_a, d) => {
        const v = VECTOR_DATA.indexOf(d);
        if (v < 0) throw new Error(`an MSI with data ${d}: no vector was programmed so`);
        this.irqs[v]!++;
      },
      signalEventFd: nop, setIoeventfd: nop,
    }, config);
    this.device = this.b.pci.virtio[0]!.device;
    this.linkR = prng(linkSeed);
    const link: NetLink = {
      send: (frame) => {
        const lost = this.lossy > 0 && this.linkR.chance(this.lossy);
        let answer: Uint8Array | undefined;
        // libslirp answers some frames at once, from inside send (an ARP reply).
        if (this.echo > 0 && this.linkR.chance(this.echo)) {
          answer = frameOf(this.linkR);
          this.deliverToDevice(answer);
        }
        this.sentLog.push({ frame, lost, ...(answer ? { answer } : {}) });
        return !lost;
      },
      fillPoll: () => -1,
      afterPoll: () => {},
      close: () => {},
    };
    this.be = new VirtioNetBackEnd({ device: this.device, ram: this.guestRam, lock: this.b.pci.lock }, (receive) => {
      this.deliverToDevice = receive;
      return link;
    });
    const { regs, msix } = slotBars(3);
    this.regs = regs;
    const b = this.b;
    b.pio.write(0xcf8, 4, 0x80000000 | (3 << 11) | 0x04);
    b.pio.write(0xcfc, 2, 0x6); // memory decoding, bus master
    // The MSI-X capability (its message control: enable).
    let cap = this.cfgRead(0x34);
    while (cap && this.cfgRead(cap) !== 0x11) cap = this.cfgRead(cap + 1);
    b.pio.write(0xcf8, 4, 0x80000000 | (3 << 11) | (cap & 0xfc));
    b.pio.write(0xcfc + ((cap + 2) & 3), 2, 0x8000);
    for (let v = 0; v < 3; v++) {
      this.w(msix + 16 * v, 4, 0xfee00000);
      this.w(msix + 16 * v + 8, 4, VECTOR_DATA[v]!);
      this.w(msix + 16 * v + 12, 4, 0);
    }
    const q = (): Queue => ({ ring: { size: 0, desc: 0, avail: 0, used: 0 }, ok: false, lastAvail: 0, usedIdx: 0, availIdx: 0, cursor: 0, inFlight: [], noInterrupt: false });
    this.q = [q(), q()];
  }

  private cfgRead(reg: number): number {
    this.b.pio.write(0xcf8, 4, 0x80000000 | (3 << 11) | (reg & 0xfc));
    return this.b.pio.read(0xcfc + (reg & 3), 1);
  }

  status(): number {
    return this.r(this.regs + 0x14, 1);
  }

  desc(queue: number, i: number, addr: number, len: number, flags: number, next: number, addrHi = Math.floor(addr / 2 ** 32)): void {
    this.putDesc(this.q[queue]!.ring.desc + 16 * i, addr, len, flags, next, addrHi);
  }

  /** Puts `head` on the queue's available ring (published by publish()); `descs`: how many descriptors it holds. */
  offer(queue: number, head: number, descs = 1): void {
    const q = this.q[queue]!;
    this.put16(q.ring.avail + 4 + 2 * (q.availIdx % Math.max(1, q.ring.size)), head);
    q.availIdx = (q.availIdx + 1) & 0xffff;
    q.inFlight.push(descs);
  }

  publish(queue: number): void {
    const q = this.q[queue]!;
    this.put16(q.ring.avail + 2, q.availIdx);
  }

  setNoInterrupt(queue: number, on: boolean): void {
    const q = this.q[queue]!;
    q.noInterrupt = on;
    this.put16(q.ring.avail, on ? 1 : 0);
  }

  /** Entries the driver may still offer on a queue without running more than a ring ahead. */
  freeEntries(queue: number): number {
    const q = this.q[queue]!;
    return Math.max(0, q.ring.size - ((q.availIdx - q.lastAvail) & 0xffff));
  }

  /** Descriptors not held by chains still available. */
  freeDescs(queue: number): number {
    const q = this.q[queue]!;
    return Math.max(0, q.ring.size - q.inFlight.reduce((a, b) => a + b, 0));
  }

  take(queue: number, n: number): number {
    const q = this.q[queue]!;
    const at = q.cursor;
    q.cursor = (q.cursor + n) % Math.max(1, q.ring.size);
    return at;
  }

  // --- registers ------------------------------------------------------------------------------------

  /** A reset (status 0): the device forgets the queues; frames for the guest wait in the back end's backlog. */
  reset(): void {
    this.w(this.regs + 0x14, 1, 0);
    tally.resets++;
    this.running = false;
    this.broken = false;
    this.error = 0;
    inv('a reset clears the status and disables the queues', this.status() === 0 && [0, 1].every((q) => {
      this.w(this.regs + 0x16, 2, q);
      return this.r(this.regs + 0x1c, 2) === 0 && this.r(this.regs + 0x18, 2) === MAX_SIZE;
    }));
  }

  /**
   * Resets the device and programs both queues as a driver's probe does; `fresh` false leaves the
   * old rings' contents. `vectors`: the MSI-X vectors the driver gives the receive queue, the
   * transmit queue and the configuration (shared ones, NO_VECTOR, ones the table lacks).
   */
  program(rings: [Ring, Ring], fresh = true, vectors: number[] = [0, 1, 2]): void {
    const regs = this.regs;
    this.reset();
    for (const i of [RX, TX]) {
      const q = this.q[i]!;
      q.ring = rings[i]!;
      q.ok = ringOk(q.ring);
      q.lastAvail = q.usedIdx = q.availIdx = q.cursor = 0;
      q.inFlight = [];
      if (fresh) {
        this.put16(q.ring.avail, q.noInterrupt ? 1 : 0);
        this.put16(q.ring.avail + 2, 0);
        this.put16(q.ring.used + 2, 0);
      } else {
        q.noInterrupt = inRam(q.ring.avail, 2) && (this.dvS.getUint16(q.ring.avail, true) & 1) !== 0;
      }
    }
    this.w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver);
    this.w(regs + 0x00, 4, 0);
    const offered = this.r(regs + 0x04, 4);
    this.w(regs + 0x08, 4, 0);
    this.w(regs + 0x0c, 4, offered);
    this.w(regs + 0x08, 4, 1);
    this.w(regs + 0x0c, 4, 1); // VIRTIO_F_VERSION_1
    this.w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
    this.w(regs + 0x10, 2, vectors[2]!);
    this.vectors = vectors.map((v) => (v < 3 ? v : NO_VECTOR));
    const irqsBefore = this.irqs.reduce((a, b) => a + b, 0);
    const half = (a: number, hi: boolean) => (hi ? Math.floor(a / 2 ** 32) : a % 2 ** 32);
    for (const i of [RX, TX]) {
      const g = rings[i]!;
      this.w(regs + 0x16, 2, i);
      this.w(regs + 0x18, 2, g.size);
      this.w(regs + 0x1a, 2, vectors[i]!);
      inv('a vector the table lacks reads back as NO_VECTOR', this.r(regs + 0x1a, 2) === this.vectors[i] && this.r(regs + 0x10, 2) === this.vectors[2]);
      for (const [reg, a] of [[0x20, g.desc], [0x28, g.avail], [0x30, g.used]] as const) {
        this.w(regs + reg, 4, half(a, false));
        this.w(regs + reg + 4, 4, half(a, true));
      }
      this.w(regs + 0x1c, 2, 1);
      if (!sizeOk(g.size)) {
        // Refused at queue_enable, before DRIVER_OK: no configuration interrupt (once: the device is broken from then on).
        if (!this.broken) this.breaks(QUEUE_ERROR.badSize, false);
        inv('a queue of a bad size needs a reset at once (no interrupt: the driver is not running yet)',
          (this.status() & STATUS.needsReset) !== 0 && this.r(regs + 0x1c, 2) === 0 && this.irqs.reduce((a, b) => a + b, 0) === irqsBefore && this.r(regs + 0x1000, 1) === 0);
      }
    }
    this.w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk);
    this.running = true;
    if (!this.broken) inv('queues of good sizes run once enabled', this.status() === (STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk));
  }

  /** Queue registers rewritten while the queues run: the device keeps the ones it was enabled with. */
  rewriteRunningQueue(r: Prng): void {
    const regs = this.regs;
    const queue = r.int(2);
    this.w(regs + 0x16, 2, queue);
    if (this.r(regs + 0x1c, 2) !== 1) return;
    const read = () => [0x18, 0x20, 0x24, 0x28, 0x2c, 0x30, 0x34].map((o) => this.r(regs + o, o === 0x18 ? 2 : 4));
    const before = read();
    this.w(regs + 0x18, 2, r.chance(0.5) ? 3 : r.int(0x10000));
    this.w(regs + 0x20 + 4 * r.int(6), 4, r.next());
    this.w(regs + 0x1c, 2, r.chance(0.5) ? 0 : 1);
    const after = read();
    inv('queue registers are frozen while the queue is enabled', after.every((v, i) => v === before[i]) && this.r(regs + 0x1c, 2) === 1);
  }

  /** A notify of a queue the device does not have: nothing happens. */
  notifyMissingQueue(): void {
    const before = this.device.counters().mmioNotifies;
    this.w(this.regs + 0x3000 + 8, 2, 2);
    inv('a notify of a queue the device lacks does nothing', this.device.counters().mmioNotifies === before && this.ramBuf.equals(this.shadowBuf));
  }

  // --- the reference ------------------------------------------------------------------------------

  private breaks(error: number, interrupt: boolean): void {
    this.broken = true;
    this.error = error;
    this.needsResets++;
    this.ops++;
    refusals[QUEUE_ERROR_NAMES[error]!] = (refusals[QUEUE_ERROR_NAMES[error]!] ?? 0) + 1;
    if (error === QUEUE_ERROR.badSize || error === QUEUE_ERROR.ringOutsideRam || error === QUEUE_ERROR.availIndexJump) tally.ringsRefused++;
    else tally.chainsRefused++;
    if (interrupt) this.raise(2);
  }

  /** An interrupt from `source` (rx, tx, configuration): an ISR bit, and an MSI on its vector if it has one. */
  private raise(source: number): void {
    this.expIrqs[source]!++;
    const v = this.vectors[source]!;
    if (v !== NO_VECTOR) this.expMsis[v]!++;
  }

  private get active(): boolean {
    return this.running && !this.broken;
  }

  /** The split queue's rules, over the driver's copy of RAM: the chain at the queue's next available entry. */
  private walk(q: Queue): Walked {
    const { size: n, desc, avail } = q.ring;
    const v = this.dvS;
    const head = v.getUint16(avail + 4 + 2 * (q.lastAvail % n), true);
    const bad = (error: number): Walked => ({ head, segs: [], error });
    if (head >= n) return bad(QUEUE_ERROR.headOutOfRange);
    const segs: number[] = [];
    let sawWrite = false;
    for (let i = head, count = 0; ; count++) {
      // No chain is longer than the ring (2.7.5.3.1): one that is loops. (A loop can break another
      // rule first: a readable descriptor met again after a writable one.)
      if (count >= n) return bad(QUEUE_ERROR.chainTooLong);
      const d = desc + 16 * i;
      const addr = v.getUint32(d, true) + v.getUint32(d + 4, true) * 2 ** 32;
      const len = v.getUint32(d + 8, true);
      const flags = v.getUint16(d + 12, true);
      if (flags & 4) return bad(QUEUE_ERROR.indirect);
      const wr = (flags & F_WRITE) !== 0;
      if (!wr && sawWrite) return bad(QUEUE_ERROR.readAfterWrite);
      sawWrite ||= wr;
      if (!inRam(addr, len)) return bad(QUEUE_ERROR.bufferOutsideRam);
      segs.push(addr, len, wr ? 1 : 0);
      if (!(flags & F_NEXT)) break;
      const next = v.getUint16(d + 14, true);
      if (next >= n) return bad(QUEUE_ERROR.nextOutOfRange);
      i = next;
    }
    return { head, segs, error: 0 };
  }

  /** Puts (head, len) on the queue's used ring in the reference's copy, as the device must. */
  private push(queue: number, head: number, len: number): void {
    const q = this.q[queue]!;
    const e = q.ring.used + 4 + 8 * (q.usedIdx % q.ring.size);
    this.dvS.setUint32(e, head, true);
    this.dvS.setUint32(e + 4, len, true);
    q.usedIdx = (q.usedIdx + 1) & 0xffff;
    this.dvS.setUint16(q.ring.used + 2, q.usedIdx, true);
    q.lastAvail = (q.lastAvail + 1) & 0xffff;
    q.inFlight.shift();
    this.requests[queue]!++;
    this.ops++;
  }

  /** Available entries of a running queue; a ring outside RAM or an index a whole ring ahead breaks the device (-1). */
  private pending(queue: number): number {
    const q = this.q[queue]!;
    if (!q.ok) {
      this.breaks(QUEUE_ERROR.ringOutsideRam, true);
      return -1;
    }
    const n = (this.dvS.getUint16(q.ring.avail + 2, true) - q.lastAvail) & 0xffff;
    if (n > q.ring.size) {
      this.breaks(QUEUE_ERROR.availIndexJump, true);
      return -1;
    }
    return n;
  }

  private suppressed(queue: number): boolean {
    return (this.dvS.getUint16(this.q[queue]!.ring.avail, true) & 1) !== 0;
  }

  /** One pass of the transmit queue (at most MAX_CHAINS_PER_PASS chains); true when chains remain. */
  private txPass(): boolean {
    if (!this.active) return false;
    const available = this.pending(TX);
    if (available < 0) return false;
    const n = Math.min(available, MAX_CHAINS_PER_PASS);
    let served = 0;
    for (let k = 0; k < n; k++) {
      const c = this.walk(this.q[TX]);
      if (c.error) {
        this.breaks(c.error, true);
        return false;
      }
      // The frame: the readable bytes after the 12-byte header; refused (a drop) when too short or too long.
      let total = 0;
      for (let j = 0; j < c.segs.length; j += 3) if (!c.segs[j + 2]) total += c.segs[j + 1]!;
      if (total < NET_HDR_BYTES + MIN_FRAME_BYTES || total > NET_HDR_BYTES + MAX_FRAME_BYTES) {
        this.drops[TX]!++;
      } else {
        const frame = new Uint8Array(total - NET_HDR_BYTES);
        let skip = NET_HDR_BYTES;
        let at = 0;
        for (let j = 0; j < c.segs.length; j += 3) {
          if (c.segs[j + 2]) continue;
          const a = c.segs[j]!;
          const l = c.segs[j + 1]!;
          const s = Math.min(skip, l);
          skip -= s;
          frame.set(this.shadow.subarray(a + s, a + l), at);
          at += l - s;
        }
        this.expectSent.push(frame);
        this.readBytes[TX] = (this.readBytes[TX]! + frame.length + NET_HDR_BYTES) % 2 ** 32;
      }
      this.push(TX, c.head, 0);
      tally.txServed++;
      served++;
    }
    if (served > 0 && !this.suppressed(TX)) this.raise(TX);
    return available > n;
  }

  /** A frame from the link, as the back end takes it: kept in the backlog, or dropped. */
  private receive(f: Uint8Array): void {
    if (f.length === 0 || f.length > MAX_FRAME_BYTES || this.backlog.length >= RX_BACKLOG_FRAMES) {
      this.drops[RX]!++;
      tally.rxDrops++;
      return;
    }
    this.backlog.push(f);
  }

  /** One fill of the receive queue: how many chains took a frame, or -1 when it could take none. */
  private rxPass(): number {
    if (!this.active) return -1;
    const available = this.pending(RX);
    if (available <= 0) return -1;
    let filled = 0;
    for (let k = Math.min(available, MAX_CHAINS_PER_PASS); k > 0; k--) {
      const c = this.walk(this.q[RX]);
      if (c.error) {
        this.breaks(c.error, true);
        return filled > 0 ? filled : -1;
      }
      let room = 0;
      for (let j = 0; j < c.segs.length; j += 3) if (c.segs[j + 2]) room += c.segs[j + 1]!;
      // The next backlog frame that fits (those too large for this chain are dropped).
      let frame: Uint8Array | undefined;
      while (this.backlog.length > 0 && !frame) {
        const f = this.backlog.shift()!;
        if (room >= NET_HDR_BYTES + f.length) frame = f;
        else { this.drops[RX]!++; tally.rxDrops++; }
      }
      if (!frame) break; // the chain stays available
      // Header then frame, written in order over the writable buffers (later ones over earlier ones where they overlap).
      const total = NET_HDR_BYTES + frame.length;
      let at = 0;
      for (let j = 0; j < c.segs.length && at < total; j += 3) {
        if (!c.segs[j + 2]) continue;
        let a = c.segs[j]!;
        let l = c.segs[j + 1]!;
        if (at < NET_HDR_BYTES) {
          const h = Math.min(NET_HDR_BYTES - at, l);
          this.shadow.set(RX_HEADER.subarray(at, at + h), a);
          at += h;
          a += h;
          l -= h;
        }
        const m = Math.min(total - at, l);
        if (m > 0) {
          this.shadow.set(frame.subarray(at - NET_HDR_BYTES, at - NET_HDR_BYTES + m), a);
          at += m;
        }
      }
      this.push(RX, c.head, total);
      this.bytes[RX] = (this.bytes[RX]! + total) % 2 ** 32;
      tally.rxFilled++;
      filled++;
    }
    if (filled > 0 && !this.suppressed(RX)) this.raise(RX);
    return filled;
  }

  private flushRx(): void {
    while (this.backlog.length > 0) if (this.rxPass() <= 0) return;
  }

  /** The back end's afterKick, as the reference sees it: the link's log against the frames read, then the backlog. */
  private afterKick(): void {
    inv('the link gets exactly the reference\'s frames', this.sentLog.length === this.expectSent.length, () => `${this.sentLog.length} sent, reference ${this.expectSent.length}`);
    this.sentLog.forEach((s, k) => {
      const want = this.expectSent[k]!;
      inv('tx frame length', s.frame.length === want.length, () => `${s.frame.length} vs ${want.length}`);
      inv('tx frame bytes', Buffer.from(s.frame.buffer, s.frame.byteOffset, s.frame.length).equals(want));
      tally.framesSent++;
      if (s.answer) this.receive(s.answer);
      if (s.lost) {
        this.drops[TX]!++;
        tally.framesLost++;
      }
    });
    this.sentLog = [];
    this.expectSent = [];
    this.flushRx();
  }

  // --- what the I/O thread does, then every invariant --------------------------------------------

  /** A notify of `queue` (its register written), served as the I/O thread serves it. */
  kick(queue: number): void {
    const stepOps = this.ops;
    const irqs = [...this.expIrqs];
    const wasBroken = this.broken;
    this.w(this.regs + 0x3000 + 4 * queue, 2, queue);
    this.notifies++;
    tally.notifies++;
    let threw: unknown;
    let passes = 0;
    try {
      const lock = this.b.pci.lock;
      while (lock.withLock(() => this.device.serviceQueues(this.guestRam, 1, this.be, lock)) && passes < 1000) passes++;
      this.be.afterKick();
    } catch (e) {
      threw = e;
    }
    inv('a queue is drained in a bounded number of passes', passes < 1000);
    while (this.txPass());
    this.afterKick();
    this.check(threw, wasBroken, stepOps, irqs);
  }

  /** Frames from the link, then the back end's afterPoll (`serving` false: the VM is paused). */
  deliver(frames: Uint8Array[], serving: boolean): void {
    const stepOps = this.ops;
    const irqs = [...this.expIrqs];
    const wasBroken = this.broken;
    let threw: unknown;
    try {
      for (const f of frames) this.deliverToDevice(f);
      this.be.afterPoll(pollSet, serving);
    } catch (e) {
      threw = e;
    }
    tally.framesDelivered += frames.length;
    for (const f of frames) this.receive(f);
    if (serving) this.flushRx();
    this.check(threw, wasBroken, stepOps, irqs);
  }

  private check(threw: unknown, wasBroken: boolean, stepOps: number, irqsBefore: number[]): void {
    inv('no exception escapes the device or its back end', threw === undefined, () => String(threw));
    const c = this.device.counters();
    const broken = (this.status() & STATUS.needsReset) !== 0;
    inv('needs a reset exactly when the reference finds a bad ring or chain', broken === this.broken,
      () => `device ${broken}, reference ${this.broken} (${QUEUE_ERROR_NAMES[this.error]}), device error ${QUEUE_ERROR_NAMES[c.lastError]}`);
    inv('a device that needs a reset names why', c.error === (this.broken ? this.error : 0) && c.needsResets === this.needsResets && (!this.broken || c.lastError === this.error),
      () => `device error ${QUEUE_ERROR_NAMES[c.error]} (last ${QUEUE_ERROR_NAMES[c.lastError]}), reference ${QUEUE_ERROR_NAMES[this.error]}`);
    if (wasBroken) {
      tally.brokenSteps++;
      inv('a device that needs a reset serves nothing until it is reset', this.ops === stepOps);
    }
    inv('serves exactly the reference\'s chains on each queue', c.requests[RX] === this.requests[RX] && c.requests[TX] === this.requests[TX],
      () => `rx ${c.requests[RX]} vs ${this.requests[RX]}, tx ${c.requests[TX]} vs ${this.requests[TX]}`);
    inv('tx refuses exactly what the reference refuses (and counts what the link lost)', c.drops[TX] === this.drops[TX], () => `${c.drops[TX]} vs ${this.drops[TX]}`);
    inv('rx drops exactly the frames the reference drops', c.drops[RX] === this.drops[RX], () => `${c.drops[RX]} vs ${this.drops[RX]}`);
    inv('bytes counted as the reference moved them', c.bytes[RX] === this.bytes[RX] && c.bytes[TX] === 0 && c.readBytes[TX] === this.readBytes[TX] && c.readBytes[RX] === 0,
      () => `rx bytes ${c.bytes[RX]} vs ${this.bytes[RX]}, tx read ${c.readBytes[TX]} vs ${this.readBytes[TX]}`);
    inv('each notify write reaches the device once', c.mmioNotifies === this.notifies);
    // The interrupts as MSIs on the vectors the driver gave (several on one, when it shared one), and as ISR bits.
    inv('one interrupt per completed pass of each queue (none when suppressed), one configuration interrupt per break; MSIs only on the vectors given',
      this.irqs.every((n, v) => n === this.expMsis[v]), () => `MSIs on vectors 0/1/2 ${this.irqs} vs ${this.expMsis}, by source rx/tx/config ${this.expIrqs}, vectors ${this.vectors}`);
    const isr = this.r(this.regs + 0x1000, 1);
    const queueIrq = this.expIrqs[RX] !== irqsBefore[RX] || this.expIrqs[TX] !== irqsBefore[TX];
    const configIrq = this.expIrqs[2] !== irqsBefore[2];
    inv('the ISR status names the interrupts raised (queue, configuration)', isr === ((queueIrq ? 1 : 0) | (configIrq ? 2 : 0)), () => `isr ${isr}`);
    inv('reading the ISR status clears it', this.r(this.regs + 0x1000, 1) === 0);
    inv('guest RAM is exactly the reference\'s: frames behind headers, used rings, nothing else', this.ramBuf.equals(this.shadowBuf), () => {
      const i = this.ram.findIndex((x, j) => x !== this.shadow[j]);
      const where = this.q.map((q, k) => (i >= q.ring.used && i < q.ring.used + 6 + 8 * q.ring.size ? ` (${k ? 'tx' : 'rx'} used ring)` : '')).join('');
      return `byte 0x${i.toString(16)}${where}: ${this.ram[i]} vs ${this.shadow[i]}`;
    });
  }
}

// ---- what the driver and the link do ----------------------------------------------------------------

/** A frame the link delivers: mostly Ethernet sizes; sometimes runts, empty, the largest, one past it. */
function frameOf(r: Prng): Uint8Array {
  const p = r.int(1000);
  const len = p < 850 ? 14 + r.int(1501) : p < 900 ? 1 + r.int(13) : p < 920 ? 0 : p < 935 ? MAX_FRAME_BYTES + 1 : p < 942 ? MAX_FRAME_BYTES - r.int(2) : 1515 + r.int(8000);
  const seed = r.int(256);
  return PATTERN.subarray(seed, seed + len);
}

/** Splits `total` bytes in `parts` pieces (some of them empty, sometimes). */
function split(r: Prng, total: number, parts: number): number[] {
  if (parts === 1) return [total];
  const cuts = [0, total];
  for (let i = 1; i < parts; i++) cuts.push(r.chance(0.1) ? cuts[r.int(cuts.length)]! : r.int(total + 1));
  cuts.sort((a, b) => a - b);
  return cuts.slice(1).map((c, i) => c - cuts[i]!);
}

/** Pieces of at most DATA_SIZE each (a buffer fits the data area), `parts` of them at least. */
function pieces(r: Prng, total: number, parts: number): number[] {
  const k = Math.max(parts, Math.ceil(total / DATA_SIZE));
  const p = split(r, total, k);
  if (p.every((l) => l <= DATA_SIZE)) return p;
  return Array.from({ length: k }, (_, i) => Math.floor((total * (i + 1)) / k) - Math.floor((total * i) / k));
}

/** A buffer's address: in the data area mostly, anywhere in RAM rarely (over the rings too) when `anywhere`. */
function bufAddr(r: Prng, len: number, anywhere: boolean): number {
  if (anywhere && r.chance(0.003) && len <= RAM_SIZE) return r.int(RAM_SIZE - len + 1);
  return DATA_START + r.int(DATA_SIZE - len + 1);
}

const HOSTILE_ADDRS = [0, RAM_SIZE - 16, RAM_SIZE - 1, RAM_SIZE, 2 ** 32 - 4096, 2 ** 40, 2 ** 52];

/** Writes a chain of buffers [length, writable] at the queue's next descriptors and offers it (not published). */
function offerChain(s: NetSession, r: Prng, queue: number, bufs: [number, boolean][], hostile = 0.002): void {
  const n = s.q[queue]!.ring.size;
  const first = s.take(queue, bufs.length);
  bufs.forEach(([len, wr], j) => {
    let addr = bufAddr(r, Math.min(len, DATA_SIZE), hostile > 0);
    let size = len;
    let flags = (wr ? F_WRITE : 0) | (j < bufs.length - 1 ? F_NEXT : 0);
    let next = (first + j + 1) % n;
    let hi: number | undefined;
    if (r.chance(hostile)) {
      switch (r.int(6)) {
        case 0: flags = r.int(8); break;
        case 1: flags = r.int(0x10000); break;
        case 2: next = r.int(0x10000); break;
        case 3: addr = HOSTILE_ADDRS[r.int(HOSTILE_ADDRS.length)]!; break;
        case 4: size = [0xffffffff, RAM_SIZE, 0x80000000][r.int(3)]!; break;
        default: addr = r.next(); hi = r.next(); break;
      }
    }
    s.desc(queue, (first + j) % n, addr, size, flags, next, hi);
  });
  s.offer(queue, r.chance(hostile / 2) ? r.int(0x10000) : first, bufs.length);
}

/** A transmit chain: header + frame in 1..4 readable buffers (the header split anywhere), sometimes a writable one after. */
function txBufs(r: Prng, n: number): [number, boolean][] {
  const p = r.int(1000);
  // Header + frame: an Ethernet frame; too short for a header and an Ethernet header; jumbo; the largest; one past it; anything.
  let total = p < 820 ? NET_HDR_BYTES + 14 + r.int(1501) : p < 900 ? r.int(NET_HDR_BYTES + MIN_FRAME_BYTES) : p < 985 ? NET_HDR_BYTES + 1515 + r.int(8000) :
    p < 990 ? NET_HDR_BYTES + MAX_FRAME_BYTES : p < 995 ? NET_HDR_BYTES + MAX_FRAME_BYTES + 1 : r.int(70000);
  let parts = Math.max(Math.ceil(total / DATA_SIZE), r.chance(0.6) ? 1 : 2 + r.int(3));
  if (parts > n) { parts = n; total = Math.min(total, n * DATA_SIZE); }
  const bufs: [number, boolean][] = pieces(r, total, parts).map((l) => [l, false]);
  if (bufs.length < n && r.chance(0.05)) bufs.push([r.int(2000), true]); // ignored by transmit
  return bufs;
}

/** A receive chain: 1..3 writable buffers (mostly room for a whole Ethernet frame), sometimes a readable one first. */
function rxBufs(r: Prng, n: number): [number, boolean][] {
  const p = r.int(1000);
  // Room for an Ethernet frame; too little (the back end drops the frames that do not fit); jumbo; the largest frame; anything.
  let total = p < 800 ? 1526 + r.int(523) : p < 830 ? r.int(NET_HDR_BYTES + 200) : p < 970 ? 2048 + r.int(8000) : p < 990 ? NET_HDR_BYTES + MAX_FRAME_BYTES : r.int(70000);
  let parts = Math.max(Math.ceil(total / DATA_SIZE), r.chance(0.7) ? 1 : 2 + r.int(2));
  const readable = parts < n && r.chance(0.05);
  if (parts + (readable ? 1 : 0) > n) { parts = n; total = Math.min(total, n * DATA_SIZE); }
  const bufs: [number, boolean][] = pieces(r, total, parts).map((l) => [l, true]);
  if (readable) bufs.unshift([r.int(64), false]); // ignored by receive
  return bufs;
}

/** Offers up to `count` chains on a queue (as many as its ring and descriptors allow), publishing the index. */
function offerRandom(s: NetSession, r: Prng, queue: number, count: number): void {
  const n = Math.max(1, Math.min(s.q[queue]!.ring.size, MAX_SIZE));
  let room = Math.min(count, s.freeEntries(queue));
  while (room-- > 0) {
    const bufs = queue === TX ? txBufs(r, n) : rxBufs(r, n);
    if (bufs.length > s.freeDescs(queue)) break;
    offerChain(s, r, queue, bufs);
  }
  s.publish(queue);
}

const SIZES = [1, 2, 4, 8, 16, 16, 32, 32, 64, 64, 128, 128, 256, 256];
/** Good rings for both queues, each in its own zone below DATA_START. */
/** The vectors a driver gives (rx, tx, configuration): its own mostly; sometimes shared, NO_VECTOR, or ones the table lacks. */
function randomVectors(r: Prng): number[] {
  const pick = () => [0, 1, 2, NO_VECTOR, 3, 0x7fff][r.int(6)]!;
  return r.chance(0.9) ? [0, 1, 2] : [pick(), pick(), pick()];
}

function randomRings(r: Prng): [Ring, Ring] {
  const one = (i: number, size: number): Ring => ({
    size,
    desc: 0x1000 * i + 16 * r.int(Math.floor((0x1000 - 16 * size) / 16) + 1),
    avail: 0x2000 + 0x400 * i + 2 * r.int(Math.floor((0x400 - 6 - 2 * size) / 2) + 1),
    used: 0x2800 + 0xc00 * i + 4 * r.int(Math.floor((0xc00 - 6 - 8 * size) / 4) + 1),
  });
  return [one(RX, SIZES[r.int(SIZES.length)]!), one(TX, SIZES[r.int(SIZES.length)]!)];
}
const GOOD_RINGS = (rx = 16, tx = 16): [Ring, Ring] => [
  { size: rx, desc: 0x0000, avail: 0x2000, used: 0x2800 },
  { size: tx, desc: 0x1000, avail: 0x2400, used: 0x3400 },
];

/** Hand-designed hostile rings (on either queue). */
const HOSTILE_RINGS: [string, (r: Prng, q: number) => [Ring, Ring]][] = [
  ['a queue size that is no power of two', (r, q) => { const g = GOOD_RINGS(); g[q] = { ...g[q]!, size: [3, 6, 12, 100, 255][r.int(5)]! }; return g; }],
  ['a queue size above the maximum', (r, q) => { const g = GOOD_RINGS(); g[q] = { ...g[q]!, size: [512, 1024, 0x8000, 0xffff][r.int(4)]! }; return g; }],
  ['a queue size of 0', (_r, q) => { const g = GOOD_RINGS(); g[q] = { ...g[q]!, size: 0 }; return g; }],
  ['a descriptor table outside RAM', (r, q) => { const g = GOOD_RINGS(); g[q] = { ...g[q]!, desc: [2 ** 33, RAM_SIZE - 64, RAM_SIZE, 2 ** 64 - 4096][r.int(4)]! }; return g; }],
  ['a used ring straddling the end of RAM', (_r, q) => { const g = GOOD_RINGS(); g[q] = { ...g[q]!, used: RAM_SIZE - 8 }; return g; }],
  ['a misaligned ring', (r, q) => { const g = GOOD_RINGS(); const k = r.int(3); g[q] = { ...g[q]!, ...(k === 0 ? { desc: g[q]!.desc + 8 } : k === 1 ? { avail: g[q]!.avail + 1 } : { used: g[q]!.used + 2 }) }; return g; }],
  ['the receive used ring over the transmit available ring', () => { const g = GOOD_RINGS(8, 8); g[RX] = { ...g[RX], used: g[TX].avail }; return g; }],
  ['the transmit used ring over the receive descriptor table', () => { const g = GOOD_RINGS(8, 8); g[TX] = { ...g[TX], used: 0x40 }; return g; }],
  ['both queues on the same rings', () => { const g = GOOD_RINGS(8, 8); g[TX] = { ...g[RX] }; return g; }],
  ['rings at the very end of RAM', (r) => {
    const n = 1 << r.int(5);
    return [{ size: n, desc: 0xe000, avail: 0xf000, used: (0xf800 - 6 - 8 * n) & ~3 }, { size: n, desc: 0xe800, avail: 0xf400, used: (RAM_SIZE - 6 - 8 * n) & ~3 }];
  }],
];

/** Hand-designed hostile chains: [name, queue or -1 (either), what the driver does, the error it must give (0: none, -1: depends)]. */
const HOSTILE_CHAINS: [string, number, (s: NetSession, r: Prng, q: number) => void, number][] = [
  ['a descriptor chained to itself', -1, (s, _r, q) => { const i = s.take(q, 1); s.desc(q, i, 0x8000, 64, F_NEXT | (q === RX ? F_WRITE : 0), i); s.offer(q, i); }, QUEUE_ERROR.chainTooLong],
  ['a two-descriptor cycle', -1, (s, _r, q) => {
    const i = s.take(q, 2);
    const j = (i + 1) % s.q[q].ring.size;
    const f = F_NEXT | (q === RX ? F_WRITE : 0);
    s.desc(q, i, 0x8000, 64, f, j); s.desc(q, j, 0x8100, 64, f, i); s.offer(q, i, 2);
  }, QUEUE_ERROR.chainTooLong],
  ['a buffer past the end of RAM', -1, (s, _r, q) => { const i = s.take(q, 1); s.desc(q, i, RAM_SIZE - 8, 100, q === RX ? F_WRITE : 0, 0); s.offer(q, i); }, QUEUE_ERROR.bufferOutsideRam],
  ['a 4 GiB length', -1, (s, _r, q) => { const i = s.take(q, 1); s.desc(q, i, 0x8000, 0xffffffff, q === RX ? F_WRITE : 0, 0); s.offer(q, i); }, QUEUE_ERROR.bufferOutsideRam],
  ['an address of 2^64 - 16', -1, (s, _r, q) => { const i = s.take(q, 1); s.desc(q, i, 2 ** 32 - 16, 100, q === RX ? F_WRITE : 0, 0, 0xffffffff); s.offer(q, i); }, QUEUE_ERROR.bufferOutsideRam],
  ['a head index past the ring', -1, (s, r, q) => { s.offer(q, s.q[q].ring.size + r.int(0x10000 - s.q[q].ring.size)); }, QUEUE_ERROR.headOutOfRange],
  ['a next index just past the ring', -1, (s, _r, q) => { const i = s.take(q, 1); s.desc(q, i, 0x8000, 100, F_NEXT | (q === RX ? F_WRITE : 0), s.q[q].ring.size); s.offer(q, i); }, QUEUE_ERROR.nextOutOfRange],
  ['an indirect descriptor (never offered)', -1, (s, _r, q) => { const i = s.take(q, 1); s.desc(q, i, 0x8000, 100, 4 | (q === RX ? F_WRITE : 0), 0); s.offer(q, i); }, QUEUE_ERROR.indirect],
  ['a readable buffer after a writable one', -1, (s, _r, q) => {
    const i = s.take(q, 2);
    const j = (i + 1) % s.q[q].ring.size;
    if (j === i) { s.desc(q, i, 0x8000, 64, F_NEXT, i); s.offer(q, i); return; } // a ring of one: a loop instead
    s.desc(q, i, 0x8000, 2000, F_WRITE | F_NEXT, j); s.desc(q, j, 0x9000, 64, 0, 0); s.offer(q, i, 2);
  }, -1],
  ['a loop from a writable descriptor back to a readable one (a bad order before the ring runs out)', -1, (s, _r, q) => {
    const i = s.take(q, 2);
    const j = (i + 1) % s.q[q].ring.size;
    if (j === i) { s.desc(q, i, 0x8000, 64, F_NEXT, i); s.offer(q, i); return; } // a ring of one: only the loop
    s.desc(q, i, 0x8000, 64, F_NEXT, j); s.desc(q, j, 0x9000, 2000, F_WRITE | F_NEXT, i); s.offer(q, i, 2);
  }, -1],
  ['an available index a whole ring ahead', -1, (s, r, q) => { s.q[q].availIdx = (s.q[q].availIdx + s.freeEntries(q) + 1 + r.int(100)) & 0xffff; }, QUEUE_ERROR.availIndexJump],
  ['a full ring offered at once', -1, (s, r, q) => {
    while (s.freeEntries(q) > 0) {
      const i = r.int(s.q[q].ring.size);
      s.desc(q, i, DATA_START + 128 * i, q === RX ? 1600 : 60 + r.int(60), q === RX ? F_WRITE : 0, 0);
      s.offer(q, i);
    }
  }, 0],
  ['every descriptor in one chain', -1, (s, _r, q) => {
    const n = s.q[q].ring.size;
    for (let i = 0; i < n; i++) s.desc(q, i, DATA_START + 64 * i, 300, (q === RX ? F_WRITE : 0) | (i < n - 1 ? F_NEXT : 0), i + 1);
    s.offer(q, 0, n);
  }, 0],
  ['a header split in one-byte descriptors', TX, (s, _r, q) => {
    const n = s.q[q].ring.size;
    const len = Math.min(n, 13);
    const first = s.take(q, len);
    for (let j = 0; j < len; j++) s.desc(q, (first + j) % n, 0x9000 + 3 * j, j < 12 ? 1 : 60, j < len - 1 ? F_NEXT : 0, (first + j + 1) % n);
    s.offer(q, first, len);
  }, 0],
  ['frames of 13, 14, 65535 and 65536 bytes', TX, (s, r, q) => {
    for (const f of [13, 14, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1]) {
      if (s.freeEntries(q) === 0) return;
      const bufs = pieces(r, NET_HDR_BYTES + f, 1).map((l): [number, boolean] => [l, false]);
      if (bufs.length > s.freeDescs(q)) return;
      offerChain(s, r, q, bufs, 0);
    }
  }, 0],
  ['buffers of one byte and of none', RX, (s, _r, q) => {
    const n = s.q[q].ring.size;
    const len = Math.min(n, 4);
    const first = s.take(q, len);
    for (let j = 0; j < len; j++) s.desc(q, (first + j) % n, 0x9000 + 2 * j, j === len - 1 ? 2000 : j % 2, F_WRITE | (j < len - 1 ? F_NEXT : 0), (first + j + 1) % n);
    s.offer(q, first, len);
  }, 0],
  ['a receive buffer over the rings', RX, (s, r, q) => {
    const targets = [...s.q.map((x) => x.ring.desc), ...s.q.map((x) => x.ring.avail), ...s.q.map((x) => x.ring.used)];
    const i = s.take(q, 1);
    s.desc(q, i, targets[r.int(targets.length)]!, 1600, F_WRITE, 0);
    s.offer(q, i);
  }, -1],
  ['a transmit buffer over the rings', TX, (s, r, q) => {
    const targets = [...s.q.map((x) => x.ring.desc), ...s.q.map((x) => x.ring.avail), ...s.q.map((x) => x.ring.used)];
    const i = s.take(q, 1);
    s.desc(q, i, targets[r.int(targets.length)]!, 100, 0, 0);
    s.offer(q, i);
  }, 0],
  ['one head offered many times', -1, (s, r, q) => {
    const i = s.take(q, 1);
    s.desc(q, i, 0x9000, q === RX ? 1600 : 100, q === RX ? F_WRITE : 0, 0);
    for (let k = 1 + r.int(Math.max(1, s.freeEntries(q))); k > 0 && s.freeEntries(q) > 0; k--) s.offer(q, i, 0);
  }, 0],
];

// ---- a case: steps on one device ----------------------------------------------------------------------

/** One step: [kind (0..999), count, seed]. Kinds by range: see runStep. */
type Step = [number, number, number];
const stepArb: fc.Arbitrary<Step> = fc.tuple(fc.nat({ max: 999 }), fc.nat({ max: 63 }), fc.nat());
const caseArb = fc.record({ seed: fc.nat(), steps: fc.array(stepArb, { minLength: 600, maxLength: 600 }) });

const frames = (r: Prng, n: number) => Array.from({ length: n }, () => frameOf(r));

function runStep(s: NetSession, [kind, count, seed]: Step, round: number): void {
  const r = prng(seed + round * 0x9e3779b9);
  // A driver that sees DEVICE_NEEDS_RESET resets the device (mostly at once; sometimes it goes on
  // first, and the broken device must serve nothing); one that reset the device brings it back.
  if ((s.broken && r.chance(0.75)) || (!s.running && r.chance(0.3))) {
    s.program(r.chance(0.9) ? randomRings(r) : HOSTILE_RINGS[r.int(HOSTILE_RINGS.length)]![1](r, r.int(2)), r.chance(0.9), randomVectors(r));
    return;
  }
  if (kind < 300) {
    offerRandom(s, r, TX, 1 + (count % 24));
    s.kick(TX);
  } else if (kind < 530) {
    offerRandom(s, r, RX, 1 + (count % 24));
    s.kick(RX);
  } else if (kind < 780) {
    s.deliver(frames(r, 1 + (count % 16)), r.chance(0.95));
  } else if (kind < 810) {
    offerRandom(s, r, RX, 1 + (count % 8)); // filled at the next flush
  } else if (kind < 830) {
    offerRandom(s, r, TX, 1 + (count % 8)); // served at the next notify of either queue
  } else if (kind < 840) {
    const q = count & 1;
    s.setNoInterrupt(q, !s.q[q].noInterrupt);
  } else if (kind < 848) {
    s.rewriteRunningQueue(r);
  } else if (kind < 853) {
    s.notifyMissingQueue();
  } else if (kind < 860) {
    s.lossy = [0, 0, 0.1, 0.5][r.int(4)]!;
    s.echo = [0, 0, 0.3, 1][r.int(4)]!;
  } else if (kind < 940) {
    if (s.broken || !s.running) return;
    const [name, which, make] = HOSTILE_CHAINS[count % HOSTILE_CHAINS.length]!;
    const q = which < 0 ? r.int(2) : which;
    structuredRuns[name] = (structuredRuns[name] ?? 0) + 1;
    if (r.chance(0.5)) offerRandom(s, r, q, r.int(4)); // good chains before it
    make(s, r, q);
    s.publish(q);
    if (q === RX) s.deliver(frames(r, 1 + r.int(4)), true);
    s.kick(q);
  } else if (kind < 955) {
    offerRandom(s, r, r.int(2), 1 + (count % 8));
    if (r.chance(0.5)) s.deliver(frames(r, 1 + (count % 8)), r.chance(0.5));
    s.reset(); // chains pending are forgotten; frames wait in the backlog
  } else if (kind < 985) {
    s.program(randomRings(r), r.chance(0.9), randomVectors(r));
  } else {
    const [name, make] = HOSTILE_RINGS[count % HOSTILE_RINGS.length]!;
    structuredRuns[name] = (structuredRuns[name] ?? 0) + 1;
    s.program(make(r, r.int(2)));
    offerRandom(s, r, TX, 1 + (count % 4));
    offerRandom(s, r, RX, 1 + (count % 4));
    s.deliver(frames(r, 2), true);
    s.kick(TX);
  }
}

/** Runs steps (round after round through them) until the session did `ops` operations. */
function runCase(seed: number, steps: Step[], ops: number): NetSession {
  const s = new NetSession(seed);
  s.program(randomRings(prng(seed)));
  const maxSteps = steps.length * 40;
  for (let i = 0; s.ops < ops && i < maxSteps; i++) {
    const step = steps[i % steps.length]!;
    try {
      runStep(s, step, Math.floor(i / steps.length));
    } catch (e) {
      if (e instanceof Error) e.message = `step ${i} ${JSON.stringify(step)} (rings ${JSON.stringify(s.q.map((q) => q.ring))}): ${e.message}`;
      throw e;
    }
  }
  return s;
}

describe('virtio-net queues against a hostile driver and link (reference model, real board)', () => {
  afterAll(() => {
    const list = (o: Record<string, number>) => Object.entries(o).map(([k, v]) => `${k}=${v.toLocaleString('en')}`).join(', ');
    const t = tally;
    const n = (x: number) => x.toLocaleString('en');
    // One line: operations, what else happened, and how often each named invariant was checked.
    console.log(`virtio-net fuzz: ${n(t.operations)} queue operations (${n(t.queueOperations)} random; ` +
      `${n(t.txServed)} transmit chains served, ${n(t.rxFilled)} receive chains filled, ${n(t.chainsRefused)} chains and ${n(t.ringsRefused)} rings refused [${list(refusals)}]; ` +
      `${n(t.framesSent)} frames sent, ${n(t.framesLost)} lost by the link, ${n(t.framesDelivered)} delivered, ${n(t.rxDrops)} receive drops; ` +
      `${n(t.notifies)} notifies, ${n(t.brokenSteps)} steps on a broken device, ${n(t.resets)} resets, 16-bit index wraps ${t.wrapped}; ${n(t.headerCalls)} header-level calls); ` +
      `invariant checks: ${list(checks)}; hostile cases run: ${list(structuredRuns)}`);
    // Only meaningful when the queue property ran (a single-test filter runs fewer).
    if (t.queueOperations > 0 && SCALE >= 1) expect(t.operations).toBeGreaterThanOrEqual(1_000_000);
  });

  const single: typeof HOSTILE_CHAINS = [
    ...HOSTILE_CHAINS.filter(([, , , e]) => e > 0),
    ...HOSTILE_CHAINS.filter(([n]) => n.startsWith('a readable buffer after') || n.startsWith('a loop from')).map(([n, q, f]): (typeof HOSTILE_CHAINS)[number] => [n, q, f, QUEUE_ERROR.readAfterWrite]),
  ];
  for (const [what, which, spoil, error] of single) {
    for (const q of which < 0 ? [RX, TX] : [which]) {
      it(`${q === RX ? 'receive' : 'transmit'}: ${what}: DEVICE_NEEDS_RESET (${QUEUE_ERROR_NAMES[error]}) after the good chain before it`, () => {
        const s = new NetSession();
        s.program(GOOD_RINGS());
        const r = prng(7);
        offerChain(s, r, q, q === RX ? [[2000, true]] : [[NET_HDR_BYTES + 60, false]], 0);
        spoil(s, r, q);
        s.publish(q);
        s.deliver(frames(prng(9), 3).map((f) => (f.length === 0 || f.length > 1500 ? PATTERN.subarray(0, 64) : f)), true);
        s.kick(q);
        tally.operations += s.ops;
        expect(s.status() & STATUS.needsReset).toBe(STATUS.needsReset);
        expect(s.device.counters().lastError).toBe(error);
        expect(s.device.counters().requests[q]).toBe(error === QUEUE_ERROR.availIndexJump ? 0 : 1);
      });
    }
  }

  for (const [what, make] of HOSTILE_RINGS) {
    for (const q of [RX, TX]) {
      it(`ring (${q === RX ? 'receive' : 'transmit'} queue): ${what}`, () => {
        const s = new NetSession();
        const rings = make(prng(3), q);
        s.program(rings);
        offerRandom(s, prng(5), TX, 3);
        offerRandom(s, prng(6), RX, 3);
        s.deliver(frames(prng(8), 4), true);
        s.kick(TX);
        s.kick(RX);
        tally.operations += s.ops;
        const bad = !sizeOk(rings[q]!.size) || !ringOk(rings[q]!);
        expect((s.status() & STATUS.needsReset) !== 0).toBe(s.broken);
        if (bad) expect(s.broken).toBe(true);
      });
    }
  }

  it('a frame each way: sent without its header; received behind one, with one interrupt each', () => {
    const s = new NetSession();
    s.program(GOOD_RINGS());
    const r = prng(1);
    offerChain(s, r, TX, [[NET_HDR_BYTES + 60, false]], 0);
    s.publish(TX);
    offerChain(s, r, RX, [[2000, true]], 0);
    s.publish(RX);
    s.kick(TX);
    s.deliver([PATTERN.subarray(5, 95)], true);
    tally.operations += s.ops;
    expect(s.device.counters().requests).toEqual([1, 1]);
    expect(s.irqs).toEqual([1, 1, 0]);
  });

  it('the 16-bit ring indices wrap: 70,000 frames each way on one device, never reset', () => {
    const s = new NetSession();
    s.program(GOOD_RINGS(16, 16));
    const r = prng(11);
    let sent = 0;
    let received = 0;
    while (sent < 70_000 || received < 70_000) {
      const k = 1 + r.int(16);
      for (let j = 0; j < k; j++) offerChain(s, r, TX, [[NET_HDR_BYTES + 14 + r.int(200), false]], 0);
      s.publish(TX);
      s.kick(TX);
      sent += k;
      for (let j = 0; j < k; j++) offerChain(s, r, RX, [[1600, true]], 0);
      s.publish(RX);
      s.kick(RX);
      s.deliver(Array.from({ length: k }, () => PATTERN.subarray(r.int(256)).subarray(0, 14 + r.int(1000))), true);
      received += k;
    }
    tally.operations += s.ops;
    tally.wrapped++;
    expect(s.ops).toBe(sent + received);
    expect(s.device.counters().requests).toEqual([received, sent]);
    expect(new DataView(s.sab).getUint16(0x2800 + 2, true)).toBe(received & 0xffff);
    expect(new DataView(s.sab).getUint16(0x3400 + 2, true)).toBe(sent & 0xffff);
  });

  it(`random and structured queue operations: ${(RUNS * OPS_PER_CASE * SCALE).toLocaleString('en')} in all, every invariant after each step`, () => {
    const t0 = performance.now();
    let ops = 0;
    fc.assert(fc.property(caseArb, ({ seed, steps }) => {
      const s = runCase(seed, steps, OPS_PER_CASE);
      ops += s.ops;
    }), fcOptions(RUNS));
    tally.operations += ops;
    tally.queueOperations += ops;
    console.log(`virtio-net fuzz: ${ops.toLocaleString('en')} random queue operations in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(ops).toBeGreaterThanOrEqual(Math.max(1, Math.round(RUNS * SCALE)) * OPS_PER_CASE);
    expect(tally.txServed).toBeGreaterThan(ops / 5);
    expect(tally.rxFilled).toBeGreaterThan(ops / 5);
    for (const e of ['chainTooLong', 'bufferOutsideRam', 'headOutOfRange', 'nextOutOfRange', 'indirect', 'readAfterWrite', 'availIndexJump', 'ringOutsideRam', 'badSize']) {
      expect(refusals[e] ?? 0, e).toBeGreaterThan(0);
    }
  }, 600_000);
});
