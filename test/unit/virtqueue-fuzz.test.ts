// A hostile driver against the virtio-rng device's split queue, without KVM: one device on the real
// board per case (registers written as MMIO, notifications written to the notify register, the
// queue served as the I/O thread serves it: pass after pass under the bus lock), driven through a
// long sequence of queue operations — chains offered in batches and notified, spurious notifies,
// interrupt suppression turned on and off, queue registers rewritten while the queue runs, resets
// and reprogrammed rings — mixed with hand-designed hostile ones: descriptor loops (a descriptor
// chained to itself, two-descriptor cycles, a chain that runs the whole table and back), next and
// head indices past the ring, buffers past RAM, 4 GiB lengths and addresses up to 2^64, indirect
// descriptors that were never offered, readable after writable buffers, available indices that run
// a whole ring ahead, full rings, chains of every descriptor at 64 KiB each (past the per-request
// cap), writable buffers over the rings, queue sizes that are no power of two or too large, rings
// outside RAM, misaligned, or over each other, stale rings after a reset, chains left pending
// across a reset, and the 16-bit ring indices wrapping.
//
// An independent reference (the spec's rules, written here) walks the driver's own copy of guest
// RAM (what the driver wrote, and what the device was last seen to write) before each notify and
// says what the device must do. Named invariants, after every notify: no exception escapes the
// device; the ring is drained in a bounded number of passes; the device needs a reset exactly when
// the reference finds a bad ring or chain (and names the rule), and a device that needs a reset
// serves nothing until it is reset; it served exactly the chains the reference accepts, in order,
// up to the first bad one; each used element names its head and the chain's writable bytes capped
// per request; the used index counts the served chains; the writable buffers it reports are filled;
// guest RAM equals the reference's copy — nothing outside the used ring and the served writable
// buffers (up to the per-request cap) changed; one queue interrupt per completed pass (none when the
// driver asked for none) and one configuration interrupt exactly when the running device broke, as
// MSIs only on the vectors the driver gave (shared, or none for NO_VECTOR) and as ISR bits; reading
// the ISR status clears it. After register operations: a reset clears the status and disables the
// queue; a vector the table lacks reads back as NO_VECTOR; queue registers are frozen while the
// queue runs; a queue of a bad size needs a reset at once.
//
// One OPERATION is one available-ring entry the device had to take and that was then checked: a
// descriptor chain offered, walked by the device and served (its used element, used index, written
// bytes and interrupt checked) or refused as the first bad chain (DEVICE_NEEDS_RESET and its error
// checked), or one ring the device refused as a whole (a bad queue size at queue_enable, rings
// outside RAM or misaligned, an available index a whole ring ahead). Chains offered to a device that
// already needs a reset, chains after a bad one, notifies, resets and register writes are counted
// apart and are not operations; so are notifies where a writable buffer lay over the rings, or the
// used ring over the others (the device's random bytes then rewrite the rings: only "no exception"
// and "bounded passes" are checked, and the device is reset onto a fresh ring). The random property
// runs 1,000,000 operations at FUZZ_SCALE=1; the structured cases add their own.
//
// FUZZ_SEED=<n> replays a run; FUZZ_SCALE=<x> scales the number of cases (and so of operations);
// FUZZ_SHRINK=1 shrinks a failure (the steps of the failing case).
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, slotBars, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { FuzzDriver } from '../support/virtio-fuzz-driver.ts';
import type { VirtioPci } from '../../electron/vmm/devices/virtio/virtio-pci.ts';
import { STATUS } from '../../electron/vmm/devices/virtio/virtio-pci-regs.ts';
import { MAX_CHAINS_PER_PASS } from '../../electron/vmm/devices/virtio/virtio-queue-service.ts';
import { MAX_BYTES_PER_REQUEST } from '../../electron/vmm/devices/virtio/virtio-rng.ts';
import { QUEUE_ERROR, QUEUE_ERROR_NAMES } from '../../electron/vmm/devices/virtio/virtqueue.ts';
import { getrandomIo } from '../../native/kvm/libc.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const fcOptions = (numRuns: number) => ({ numRuns: Math.max(1, Math.round(numRuns * SCALE)), ...(SEED === undefined ? {} : { seed: SEED }), endOnFailure: process.env.FUZZ_SHRINK === undefined });
/** Cases of the random property, and operations each (the property runs RUNS * OPS_PER_CASE = 1,000,000 at scale 1). */
const RUNS = 400;
const OPS_PER_CASE = 2500;

const RAM_SIZE = 0x10000; // 64 KiB of guest RAM at guest-physical 0
/** Rings go in [0, DATA_START) (random placements), buffers in [DATA_START, RAM_SIZE). */
const DATA_START = 0x3000;
const MAX_SIZE = 256; // virtio-rng's largest queue
// A known background, so any byte the device should not touch can be checked.
const BACKGROUND = Uint8Array.from({ length: RAM_SIZE }, (_, i) => (i * 131 + 7) & 0xff);
/** MSI data of MSI-X vectors 0 and 1 (the table has two: the queue's and the configuration's, unless the driver picks otherwise). */
const VECTOR_DATA = 0x60;
const NO_VECTOR = 0xffff;

const checks: Record<string, number> = {};
/** Operations (see the header) and the rest, counted apart. */
const tally = { operations: 0, randomOperations: 0, served: 0, ringsRefused: 0, chainsRefused: 0, notifies: 0, aliasedNotifies: 0, brokenNotifies: 0, resets: 0, wrapped: 0 };
const refusals: Record<string, number> = {};
const structuredRuns: Record<string, number> = {};

function inv(name: string, ok: boolean, detail?: () => string): void {
  checks[name] = (checks[name] ?? 0) + 1;
  if (!ok) throw new Error(`invariant "${name}" violated${detail ? `: ${detail()}` : ''}`);
}

// xorshift32: a step's details from its seed (replayable, cheap).
function prng(seed: number) {
  let x = (seed ^ 0x2545f491) >>> 0 || 1;
  const next = () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
  return { next, int: (n: number) => next() % n, chance: (p: number) => next() / 2 ** 32 < p };
}
type Prng = ReturnType<typeof prng>;

interface Ring { size: number; desc: number; avail: number; used: number }
const inRam = (gpa: number, len: number) => gpa >= 0 && gpa + len <= RAM_SIZE;
const sizeOk = (n: number) => n > 0 && n <= MAX_SIZE && (n & (n - 1)) === 0;
const overlaps = (a: number, al: number, b: number, bl: number) => a < b + bl && b < a + al;

/** What the reference says one notify must do. */
interface Expected {
  /** Chains served, in order: head and device-writable [address, length] pairs. */
  good: { head: number; segs: number[] }[];
  /** The QUEUE_ERROR of the first bad ring or chain (none: 0). */
  error: number;
  /** A writable buffer lies over the rings (or the rings over each other): from there on nothing is predictable. */
  aliased: boolean;
}

/**
 * One virtio-rng device on the real board with its own guest RAM, and the driver's side: its copy
 * of RAM (`shadow`), what it offered, and what the reference expects of the device.
 */
class Session extends FuzzDriver {
  readonly b: ReturnType<typeof attachBoard>;
  readonly device: VirtioPci;
  private readonly regs: number;
  /** MSIs sent on vectors 0 and 1. */
  readonly msis = [0, 0];
  /** The vectors the device holds for the queue and the configuration (NO_VECTOR: none). */
  private queueVector = 0;
  private configVector = 1;
  ring: Ring = { size: 8, desc: 0x1000, avail: 0x2000, used: 0x2400 };
  /** The ring's addresses pass the device's checks (in RAM, aligned). */
  private ringOk = true;
  /** The used ring lies over the descriptor table or the available ring. */
  private ringsOverlap = false;
  // What the reference expects of the device.
  broken = false;
  error = 0;
  private lastAvail = 0;
  private usedIdx = 0;
  private requests = 0;
  private needsResets = 0;
  private notifies = 0;
  // The driver's side.
  availIdx = 0;
  private cursor = 0;
  noInterrupt = false;
  /** Operations of this session (see the header). */
  ops = 0;

  constructor() {
    super(RAM_SIZE, BACKGROUND);
    const config: BoardConfig = { virtio: [{ name: 'rng', eventFd: 9 }] };
    const nop = () => {};
    this.b = attachBoard(createDeviceState(config), {
      emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, entropy: getrandomIo,
      signalMsi: (_a, d) => {
        if (d !== VECTOR_DATA && d !== VECTOR_DATA + 1) throw new Error(`an MSI with data ${d}: no vector was programmed so`);
        this.msis[d - VECTOR_DATA]!++;
      },
      signalEventFd: nop, setIoeventfd: nop,
    }, config);
    this.device = this.b.pci.virtio[0]!.device;
    const { regs, msix } = slotBars(1);
    this.regs = regs;
    const b = this.b;
    b.pio.write(0xcf8, 4, 0x80000800 | 0x04);
    b.pio.write(0xcfc, 2, 0x6); // memory decoding, bus master
    b.pio.write(0xcf8, 4, 0x80000800 | 0x40);
    b.pio.write(0xcfe, 2, 0x8000); // MSI-X enable (message control at 0x42)
    for (const v of [0, 1]) {
      this.w(msix + 16 * v, 4, 0xfee00000);
      this.w(msix + 16 * v + 8, 4, VECTOR_DATA + v);
      this.w(msix + 16 * v + 12, 4, 0);
    }
  }

  status(): number {
    return this.r(this.regs + 0x14, 1);
  }

  /** Descriptor `i` of the table (addresses up to 2^64 as two halves). */
  desc(i: number, addr: number, len: number, flags: number, next: number, addrHi = Math.floor(addr / 2 ** 32)): void {
    this.putDesc(this.ring.desc + 16 * i, addr, len, flags, next, addrHi);
  }

  /** Puts `head` on the available ring (not yet published). */
  offer(head: number): void {
    const n = Math.max(1, this.ring.size);
    this.put16(this.ring.avail + 4 + 2 * (this.availIdx % n), head);
    this.availIdx = (this.availIdx + 1) & 0xffff;
  }

  publish(): void {
    this.put16(this.ring.avail + 2, this.availIdx);
  }

  setNoInterrupt(on: boolean): void {
    this.noInterrupt = on;
    this.put16(this.ring.avail, on ? 1 : 0);
  }

  /** Entries the driver may still offer without running more than a ring ahead of the device. */
  freeEntries(): number {
    return this.broken ? MAX_SIZE : Math.max(0, this.ring.size - ((this.availIdx - this.lastAvail) & 0xffff));
  }

  /** The next `n` descriptor indices, round the table. */
  take(n: number): number {
    const at = this.cursor;
    this.cursor = (this.cursor + n) % Math.max(1, this.ring.size);
    return at;
  }

  // --- registers ------------------------------------------------------------------------------------

  /**
   * Resets the device and programs queue 0 with `ring`, as a driver's probe does; `fresh` false
   * leaves the old rings' contents (a stale available index). `vectors`: the MSI-X vectors the
   * driver gives the queue and the configuration (a shared one, NO_VECTOR, one the table lacks).
   */
  program(ring: Ring, fresh = true, vectors: [number, number] = [0, 1]): void {
    const regs = this.regs;
    this.w(regs + 0x14, 1, 0);
    tally.resets++;
    inv('a reset clears the status and disables the queue', this.status() === 0 && this.r(regs + 0x1c, 2) === 0 && this.r(regs + 0x18, 2) === MAX_SIZE);
    this.ring = ring;
    const n = ring.size;
    this.ringOk = sizeOk(n) && inRam(ring.desc, 16 * n) && inRam(ring.avail, 6 + 2 * n) && inRam(ring.used, 6 + 8 * n) &&
      ring.desc % 16 === 0 && ring.avail % 2 === 0 && ring.used % 4 === 0;
    this.ringsOverlap = overlaps(ring.used, 6 + 8 * n, ring.desc, 16 * n) || overlaps(ring.used, 6 + 8 * n, ring.avail, 6 + 2 * n);
    this.lastAvail = 0;
    this.usedIdx = 0;
    this.availIdx = 0;
    this.cursor = 0;
    this.broken = false;
    this.error = 0;
    if (fresh) {
      // The driver zeroes its new rings' indices (before the device can look at them).
      this.put16(ring.avail, this.noInterrupt ? 1 : 0);
      this.put16(ring.avail + 2, 0);
      this.put16(ring.used + 2, 0);
    } else {
      this.noInterrupt = inRam(ring.avail, 2) && (this.dvS.getUint16(ring.avail, true) & 1) !== 0;
    }
    this.w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver);
    this.w(regs + 8, 4, 1);
    this.w(regs + 0xc, 4, 1); // VIRTIO_F_VERSION_1
    this.w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
    this.w(regs + 0x10, 2, vectors[1]);
    this.w(regs + 0x16, 2, 0);
    this.w(regs + 0x18, 2, n);
    this.w(regs + 0x1a, 2, vectors[0]);
    // A vector the table lacks reads back as NO_VECTOR (the driver sees the mapping failed).
    [this.queueVector, this.configVector] = vectors.map((v) => (v < 2 ? v : NO_VECTOR)) as [number, number];
    inv('a vector the table lacks reads back as NO_VECTOR', this.r(regs + 0x1a, 2) === this.queueVector && this.r(regs + 0x10, 2) === this.configVector);
    const half = (a: number, hi: boolean) => (hi ? Math.floor(a / 2 ** 32) : a % 2 ** 32);
    for (const [reg, a] of [[0x20, ring.desc], [0x28, ring.avail], [0x30, ring.used]] as const) {
      this.w(regs + reg, 4, half(a, false));
      this.w(regs + reg + 4, 4, half(a, true));
    }
    const irqsBefore = this.msis[0]! + this.msis[1]!;
    this.w(regs + 0x1c, 2, 1);
    this.w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk);
    const st = this.status();
    if (!sizeOk(n)) {
      // Refused at queue_enable, before DRIVER_OK: no driver to tell yet, so no configuration interrupt.
      this.broken = true;
      this.error = QUEUE_ERROR.badSize;
      this.needsResets++;
      this.ops++;
      tally.ringsRefused++;
      refusals.badSize = (refusals.badSize ?? 0) + 1;
      inv('a queue of a bad size needs a reset at once (no interrupt: the driver is not running yet)',
        (st & STATUS.needsReset) !== 0 && this.r(regs + 0x1c, 2) === 0 && this.msis[0]! + this.msis[1]! === irqsBefore && this.r(regs + 0x1000, 1) === 0 &&
        this.device.counters().error === QUEUE_ERROR.badSize);
    } else {
      inv('a queue of a good size runs once enabled', st === (STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk) && this.r(regs + 0x1c, 2) === 1);
    }
  }

  /** Queue registers rewritten while the queue runs: the device keeps the ones it was enabled with. */
  rewriteRunningQueue(r: Prng): void {
    const regs = this.regs;
    if (this.r(regs + 0x1c, 2) !== 1) return;
    const before = [0x18, 0x20, 0x24, 0x28, 0x2c, 0x30, 0x34].map((o) => this.r(regs + o, o === 0x18 ? 2 : 4));
    this.w(regs + 0x18, 2, r.chance(0.5) ? 3 : r.int(0x10000));
    this.w(regs + 0x20 + 4 * r.int(6), 4, r.next());
    this.w(regs + 0x1c, 2, r.chance(0.5) ? 0 : 1); // 0: a driver must not; 1: already
    const after = [0x18, 0x20, 0x24, 0x28, 0x2c, 0x30, 0x34].map((o) => this.r(regs + o, o === 0x18 ? 2 : 4));
    inv('queue registers are frozen while the queue is enabled', after.every((v, i) => v === before[i]) && this.r(regs + 0x1c, 2) === 1);
  }

  /** A notify of a queue the device does not have: nothing happens. */
  notifyMissingQueue(): void {
    const before = this.device.counters().mmioNotifies;
    this.w(this.regs + 0x3000 + 4 * (1 + (this.availIdx & 3)), 2, 1);
    inv('a notify of a queue the device lacks does nothing', this.device.counters().mmioNotifies === before && this.ramBuf.equals(this.shadowBuf));
  }

  // --- the reference ------------------------------------------------------------------------------

  /** The spec's rules, independently, over the driver's copy of RAM: what the device must do at this notify. */
  reference(): Expected {
    const e = this.walk();
    // The used ring over the other rings: what the device writes for a chain rewrites the chains after it.
    if (this.ringsOverlap && e.good.length > 0) e.aliased = true;
    return e;
  }

  private walk(): Expected {
    const none: Expected = { good: [], error: 0, aliased: false };
    if (this.broken) return none;
    const { size: n, desc, avail, used } = this.ring;
    if (!this.ringOk) return { ...none, error: QUEUE_ERROR.ringOutsideRam };
    const v = this.dvS;
    const pending = (v.getUint16(avail + 2, true) - this.lastAvail) & 0xffff;
    if (pending > n) return { ...none, error: QUEUE_ERROR.availIndexJump };
    const good: Expected['good'] = [];
    const ringsAt = [desc, 16 * n, avail, 6 + 2 * n, used, 6 + 8 * n];
    for (let e = 0; e < pending; e++) {
      const head = v.getUint16(avail + 4 + 2 * ((this.lastAvail + e) % n), true);
      if (head >= n) return { good, error: QUEUE_ERROR.headOutOfRange, aliased: false };
      const segs: number[] = [];
      let aliased = false;
      let sawWrite = false;
      for (let i = head, count = 0; ; count++) {
        // No chain is longer than the ring (2.7.5.3.1): one that is loops. (A loop can break another
        // rule first: a readable descriptor met again after a writable one.)
        if (count >= n) return { good, error: QUEUE_ERROR.chainTooLong, aliased: false };
        const d = desc + 16 * i;
        const addr = v.getUint32(d, true) + v.getUint32(d + 4, true) * 2 ** 32;
        const len = v.getUint32(d + 8, true);
        const flags = v.getUint16(d + 12, true);
        if (flags & 4) return { good, error: QUEUE_ERROR.indirect, aliased: false };
        const wr = (flags & 2) !== 0;
        if (!wr && sawWrite) return { good, error: QUEUE_ERROR.readAfterWrite, aliased: false };
        sawWrite ||= wr;
        if (!inRam(addr, len)) return { good, error: QUEUE_ERROR.bufferOutsideRam, aliased: false };
        if (wr) {
          segs.push(addr, len);
          for (let k = 0; k < 6; k += 2) aliased ||= overlaps(addr, len, ringsAt[k]!, ringsAt[k + 1]!);
        }
        if (!(flags & 1)) break;
        const next = v.getUint16(d + 14, true);
        if (next >= n) return { good, error: QUEUE_ERROR.nextOutOfRange, aliased: false };
        i = next;
      }
      good.push({ head, segs });
      // From here on the guest's own rings hold random bytes: nothing after this chain is predictable.
      if (aliased) return { good, error: 0, aliased: true };
    }
    return { good, error: 0, aliased: false };
  }

  // --- a notify, served as the I/O thread serves it, then every invariant ---------------------------

  notify(): void {
    const regs = this.regs;
    const ref = this.reference();
    const msisBefore = [...this.msis];
    const wasBroken = this.broken;
    const suppressed = this.ringOk && (this.dvS.getUint16(this.ring.avail, true) & 1) !== 0;
    this.w(regs + 0x3000, 2, 0);
    this.notifies++;
    tally.notifies++;
    let threw: unknown;
    let passes = 0;
    try {
      // As the I/O thread does: pass after pass while the device says chains remain.
      while (this.b.pci.lock.withLock(() => this.device.serviceQueues(this.guestRam)) && passes < 1000) passes++;
    } catch (e) {
      threw = e;
    }
    inv('a ring is drained in a bounded number of passes', passes < 1000);
    inv('no exception escapes the device', threw === undefined, () => String(threw));
    if (ref.aliased) {
      // A buffer over the rings: the device may do anything the rewritten rings say, except fail.
      tally.aliasedNotifies++;
      const c = this.device.counters();
      this.requests = c.requests[0]!;
      this.needsResets = c.needsResets;
      this.ram.set(BACKGROUND);
      this.shadow.set(BACKGROUND);
      this.program(randomRing(prng(this.notifies)));
      return;
    }
    if (wasBroken) tally.brokenNotifies++;
    const c = this.device.counters();
    const n = this.ring.size;
    const broken = (this.status() & STATUS.needsReset) !== 0;
    const breaks = ref.error !== 0;
    inv('needs a reset exactly when the reference finds a bad ring or chain', broken === (wasBroken || breaks),
      () => `device ${broken}, reference ${breaks ? QUEUE_ERROR_NAMES[ref.error] : 'good'} (was broken: ${wasBroken}), device error ${QUEUE_ERROR_NAMES[c.lastError]}`);
    if (breaks) {
      this.broken = true;
      this.error = ref.error;
      this.needsResets++;
      refusals[QUEUE_ERROR_NAMES[ref.error]!] = (refusals[QUEUE_ERROR_NAMES[ref.error]!] ?? 0) + 1;
      if (ref.error === QUEUE_ERROR.ringOutsideRam || ref.error === QUEUE_ERROR.availIndexJump) tally.ringsRefused++;
      else tally.chainsRefused++;
    }
    inv('a device that needs a reset names why', c.error === (this.broken ? this.error : 0) && c.needsResets === this.needsResets && (!this.broken || c.lastError === this.error),
      () => `device error ${QUEUE_ERROR_NAMES[c.error]} (last ${QUEUE_ERROR_NAMES[c.lastError]}), reference ${QUEUE_ERROR_NAMES[this.error]}`);
    if (wasBroken) inv('a device that needs a reset serves nothing until it is reset', c.requests[0] === this.requests);
    this.requests += ref.good.length;
    inv('serves exactly the good chains before the first bad one', c.requests[0] === this.requests, () => `${c.requests[0]} vs ${this.requests}`);
    inv('each notify write reaches the device once', c.mmioNotifies === this.notifies);
    if (ref.good.length) {
      const dv = this.dvR;
      const s = this.dvS;
      const { used } = this.ring;
      for (const g of ref.good) {
        const e = used + 4 + 8 * (this.usedIdx % n);
        const id = dv.getUint32(e, true);
        const len = dv.getUint32(e + 4, true);
        let cap = 0;
        for (let k = 1; k < g.segs.length; k += 2) cap += g.segs[k]!;
        cap = Math.min(MAX_BYTES_PER_REQUEST, cap);
        inv('each used element names its head', id === g.head, () => `${id} vs ${g.head}`);
        inv('each used length is the chain\'s writable bytes, capped per request', len === cap, () => `${len} vs ${cap}`);
        s.setUint32(e, id, true);
        s.setUint32(e + 4, len, true);
        this.usedIdx = (this.usedIdx + 1) & 0xffff;
      }
      inv('the used index counts the served chains', dv.getUint16(used + 2, true) === this.usedIdx);
      s.setUint16(used + 2, this.usedIdx, true);
      // Each chain's first writable buffer now holds fresh random bytes: its first 16 differ from what
      // was there (the chance they all match: 2^-128). Checked for every chain before any is copied.
      for (const g of ref.good) {
        if (g.segs.length === 0 || g.segs[1]! < 16) continue;
        const a = g.segs[0]!;
        let same = true;
        for (let j = 0; j < 16 && same; j++) same = this.ram[a + j] === this.shadow[a + j];
        inv('the device fills the writable buffers it reports', !same, () => `16 bytes at 0x${a.toString(16)} unchanged`);
      }
      // The bytes the device may have written: each chain's writable buffers, in order, up to the cap.
      for (const g of ref.good) {
        let left = MAX_BYTES_PER_REQUEST;
        for (let k = 0; k < g.segs.length && left > 0; k += 2) {
          const a = g.segs[k]!;
          const l = Math.min(g.segs[k + 1]!, left);
          this.shadow.set(this.ram.subarray(a, a + l), a);
          left -= l;
        }
      }
      this.lastAvail = (this.lastAvail + ref.good.length) & 0xffff;
    }
    const ops = ref.good.length + (breaks ? 1 : 0);
    this.ops += ops;
    tally.served += ref.good.length;
    inv('nothing outside the used ring and the served writable buffers changes', this.ramBuf.equals(this.shadowBuf), () => {
      const i = this.ram.findIndex((x, j) => x !== this.shadow[j]);
      return `byte 0x${i.toString(16)}: ${this.ram[i]} vs ${this.shadow[i]}`;
    });
    // One interrupt per pass that completed (MAX_CHAINS_PER_PASS chains at most): a pass that meets a
    // bad chain stops there without interrupting for the chains it had served.
    const per = MAX_CHAINS_PER_PASS;
    const served = ref.good.length;
    const expectedIrqs = suppressed ? 0 : breaks ? Math.floor(served / per) : Math.ceil(served / per);
    const expectedConfig = breaks ? 1 : 0;
    // The interrupts as MSIs on the vectors the driver gave (both on one, when it gave one), and as ISR bits.
    const sent = this.msis.map((m, v) => m - msisBefore[v]!);
    const on = (v: number) => (this.queueVector === v ? expectedIrqs : 0) + (this.configVector === v ? expectedConfig : 0);
    const isr = this.r(regs + 0x1000, 1);
    inv('one queue interrupt per completed pass (none if the driver asked for none)', (isr & 1) === (expectedIrqs > 0 ? 1 : 0) &&
      (this.queueVector === NO_VECTOR || sent[this.queueVector] === on(this.queueVector)), () => `${sent} vs ${expectedIrqs} (isr ${isr})`);
    inv('a configuration interrupt exactly when the running device broke', (isr & 2) === (expectedConfig ? 2 : 0) &&
      (this.configVector === NO_VECTOR || sent[this.configVector] === on(this.configVector)), () => `${sent} vs ${expectedConfig} (isr ${isr})`);
    inv('MSIs only on the vectors the driver gave (none for NO_VECTOR)', sent.every((m, v) => m === on(v)), () => `${sent}`);
    inv('reading the ISR status clears it', (isr & ~3) === 0 && this.r(regs + 0x1000, 1) === 0);
  }
}

// ---- what the driver offers ------------------------------------------------------------------------

/** A buffer length: mostly what a driver asks for, sometimes pages, rarely tens of KiB. */
function bufLen(r: Prng): number {
  const p = r.int(100);
  return p < 70 ? r.int(65) : p < 95 ? r.int(513) : p < 99 ? r.int(0x1001) : r.int(0x8001);
}
const HOSTILE_ADDRS = [0, RAM_SIZE - 16, RAM_SIZE - 1, RAM_SIZE, 2 ** 32 - 4096, 2 ** 40, 2 ** 52];

/** One random chain of `len` descriptors (mostly good; rarely a hostile field), offered but not published. */
function randomChain(s: Session, r: Prng, len: number): void {
  const n = s.ring.size;
  const scattered = r.chance(0.15);
  const first = s.take(len);
  const index = (j: number) => (scattered && j > 0 ? r.int(n) : (first + j) % n);
  const writableFrom = r.chance(0.15) ? r.int(len + 1) : 0;
  let i = index(0);
  const head = i;
  for (let j = 0; j < len; j++) {
    const l = bufLen(r);
    let addr = DATA_START + r.int(RAM_SIZE - DATA_START - l + 1);
    let size = l;
    let flags = (j >= writableFrom ? 2 : 0) | (j < len - 1 ? 1 : 0);
    const nextI = j < len - 1 ? index(j + 1) : r.int(0x10000); // no NEXT: the field is junk
    let next = nextI;
    let hi: number | undefined;
    if (r.chance(0.003)) {
      switch (r.int(6)) {
        case 0: flags = r.int(8); break;
        case 1: flags = r.int(0x10000); break;
        case 2: next = r.int(0x10000); break;
        case 3: addr = HOSTILE_ADDRS[r.int(HOSTILE_ADDRS.length)]!; break;
        case 4: size = [0xffffffff, RAM_SIZE, 0x80000000][r.int(3)]!; break;
        default: addr = r.next(); hi = r.next(); break;
      }
    }
    s.desc(i, addr, size, flags, next, hi);
    i = nextI;
  }
  s.offer(r.chance(0.001) ? r.int(0x10000) : head);
}

/** A chain length: mostly one buffer (as drivers post them), sometimes a few, rarely long. */
function chainLen(r: Prng, n: number): number {
  const p = r.int(1000);
  const len = p < 800 ? 1 : p < 970 ? 2 + r.int(3) : p < 997 ? 5 + r.int(12) : 1 + r.int(n);
  return Math.max(1, Math.min(n, len));
}

/** Offers up to `count` random chains (no more than the ring has room for), publishing the index. */
function offerRandom(s: Session, r: Prng, count: number): void {
  const n = Math.max(1, Math.min(s.ring.size, MAX_SIZE));
  let room = Math.min(count, s.freeEntries());
  let descs = n;
  while (room-- > 0 && descs > 0) {
    const len = chainLen(r, n);
    randomChain(s, r, Math.min(len, descs));
    descs -= len;
  }
  s.publish();
}

/** Good rings: sizes weighted to the larger ones, placed anywhere (aligned) in the ring area. */
const SIZES = [1, 2, 4, 8, 16, 16, 32, 32, 64, 64, 128, 128, 256, 256];
function randomRing(r: Prng, size = SIZES[r.int(SIZES.length)]!): Ring {
  return {
    size,
    desc: 16 * r.int(Math.floor((0x2000 - 16 * size) / 16) + 1),
    avail: 0x2000 + 2 * r.int(Math.floor((0x400 - 6 - 2 * size) / 2) + 1),
    used: 0x2400 + 4 * r.int(Math.floor((0xc00 - 6 - 8 * size) / 4) + 1),
  };
}
/** The vectors a driver gives: its own mostly; sometimes one shared, NO_VECTOR, or one the table lacks. */
function randomVectors(r: Prng): [number, number] {
  const pick = () => [0, 1, NO_VECTOR, 2, 0x7fff][r.int(5)]!;
  return r.chance(0.9) ? [0, 1] : [pick(), pick()];
}
const GOOD_RING = (size = 8): Ring => ({ size, desc: 0x1000, avail: 0x2000, used: 0x2400 });

/** Hand-designed hostile rings: [name, ring]. */
const HOSTILE_RINGS: [string, (r: Prng) => Ring][] = [
  ['a queue size that is no power of two', (r) => ({ ...randomRing(r, 8), size: [3, 6, 12, 100, 255][r.int(5)]! })],
  ['a queue size above the maximum', (r) => ({ ...GOOD_RING(), size: [512, 1024, 0x8000, 0xffff][r.int(4)]! })],
  ['a queue size of 0', () => ({ ...GOOD_RING(), size: 0 })],
  ['the descriptor table outside RAM', (r) => ({ ...GOOD_RING(16), desc: [2 ** 33, RAM_SIZE - 64, RAM_SIZE, 2 ** 64 - 4096][r.int(4)]! })],
  ['the used ring straddling the end of RAM', () => ({ ...GOOD_RING(8), used: RAM_SIZE - 8 })],
  ['a misaligned descriptor table', (r) => ({ ...randomRing(r, 8), desc: 0x1008 })],
  ['a misaligned available ring', (r) => ({ ...randomRing(r, 8), avail: 0x2001 })],
  ['a misaligned used ring', (r) => ({ ...randomRing(r, 8), used: 0x2402 })],
  ['rings at the very end of RAM', (r) => { const n = 1 << r.int(6); return { size: n, desc: 0xe000, avail: RAM_SIZE - 0x800 - ((6 + 2 * n + 1) & ~1), used: (RAM_SIZE - 6 - 8 * n) & ~3 }; }],
  ['the used ring over the available ring', () => ({ ...GOOD_RING(8), used: 0x2000 })],
  ['the used ring over the descriptor table', () => ({ ...GOOD_RING(8), used: 0x1040 })],
  ['the available ring over the descriptor table', () => ({ ...GOOD_RING(16), avail: 0x1020 })],
];

/** Hand-designed hostile chains: [name, what the driver does, the error it must give (none: 0)]. The ring is running. */
const W = 2;
const WN = 3;
const HOSTILE_CHAINS: [string, (s: Session, r: Prng) => void, number][] = [
  ['a descriptor chained to itself', (s) => { const i = s.take(1); s.desc(i, 0x8000, 16, WN, i); s.offer(i); }, QUEUE_ERROR.chainTooLong],
  ['a two-descriptor cycle', (s) => {
    const n = s.ring.size;
    const i = s.take(2);
    const j = (i + 1) % n;
    s.desc(i, 0x8000, 16, WN, j); s.desc(j, 0x8100, 16, WN, i); s.offer(i);
  }, QUEUE_ERROR.chainTooLong],
  ['a chain through the whole table and back to its head', (s) => {
    const n = s.ring.size;
    for (let i = 0; i < n; i++) s.desc(i, 0x8000 + 8 * i, 8, WN, (i + 1) % n);
    s.offer(0);
  }, QUEUE_ERROR.chainTooLong],
  ['a buffer past the end of RAM', (s) => { const i = s.take(1); s.desc(i, RAM_SIZE - 8, 16, W, 0); s.offer(i); }, QUEUE_ERROR.bufferOutsideRam],
  ['a 4 GiB length', (s) => { const i = s.take(1); s.desc(i, 0x8000, 0xffffffff, W, 0); s.offer(i); }, QUEUE_ERROR.bufferOutsideRam],
  ['an address above 2^52', (s) => { const i = s.take(1); s.desc(i, 2 ** 52, 1, W, 0); s.offer(i); }, QUEUE_ERROR.bufferOutsideRam],
  ['an address of 2^64 - 16', (s) => { const i = s.take(1); s.desc(i, 2 ** 32 - 16, 1, W, 0, 0xffffffff); s.offer(i); }, QUEUE_ERROR.bufferOutsideRam],
  ['a head index past the ring', (s, r) => { s.offer(s.ring.size + r.int(0x10000 - s.ring.size)); }, QUEUE_ERROR.headOutOfRange],
  ['a next index just past the ring', (s) => { const i = s.take(1); s.desc(i, 0x8000, 16, WN, s.ring.size); s.offer(i); }, QUEUE_ERROR.nextOutOfRange],
  ['an indirect descriptor (never offered)', (s) => { const i = s.take(1); s.desc(i, 0x8000, 16, 4 | W, 0); s.offer(i); }, QUEUE_ERROR.indirect],
  ['a readable buffer after a writable one', (s) => {
    const i = s.take(2);
    const j = (i + 1) % s.ring.size;
    if (j === i) { s.desc(i, 0x8000, 16, WN, i); s.offer(i); return; } // a ring of one: a loop instead
    s.desc(i, 0x8000, 16, WN, j); s.desc(j, 0x8100, 16, 0, 0); s.offer(i);
  }, -1],
  ['a loop from a writable descriptor back to a readable one (a bad order before the ring runs out)', (s) => {
    const i = s.take(2);
    const j = (i + 1) % s.ring.size;
    if (j === i) { s.desc(i, 0x8000, 16, 1, i); s.offer(i); return; } // a ring of one: only the loop
    s.desc(i, 0x8000, 16, 1, j); s.desc(j, 0x8100, 16, WN, i); s.offer(i);
  }, -1],
  ['an available index a whole ring ahead', (s, r) => { s.availIdx = (s.availIdx + s.freeEntries() + 1 + r.int(100)) & 0xffff; }, QUEUE_ERROR.availIndexJump],
  ['a full ring offered at once', (s, r) => {
    const n = s.ring.size;
    while (s.freeEntries() > 0) { const i = r.int(n); s.desc(i, DATA_START + 64 * i, 64, W, 0); s.offer(i); }
  }, 0],
  ['every descriptor in one chain, 64 KiB writable each (past the per-request cap)', (s) => {
    const n = s.ring.size;
    for (let i = 0; i < n; i++) s.desc(i, DATA_START, 0x4000 + 64 * i, i < n - 1 ? WN : W, i + 1);
    s.offer(0);
  }, 0],
  ['readable and zero-length buffers only (nothing to fill)', (s) => {
    const n = s.ring.size;
    const i = s.take(Math.min(n, 3));
    const len = Math.min(n, 3);
    for (let j = 0; j < len; j++) s.desc((i + j) % n, 0x8000 + 32 * j, j === 1 ? 0 : 32, (j === 2 ? W : 0) | (j < len - 1 ? 1 : 0), (i + j + 1) % n);
    if (len === 3) s.desc((i + 2) % n, 0x8000, 0, W, 0);
    s.offer(i);
  }, 0],
  ['one head offered many times', (s, r) => {
    const i = s.take(1);
    s.desc(i, 0x9000, 32, W, 0);
    for (let k = 1 + r.int(Math.max(1, s.freeEntries())); k > 0 && s.freeEntries() > 0; k--) s.offer(i);
  }, 0],
  ['a buffer ending exactly at the end of RAM', (s) => { const i = s.take(1); s.desc(i, RAM_SIZE - 100, 100, W, 0); s.offer(i); }, 0],
  ['a writable buffer over the rings', (s, r) => { const i = s.take(1); s.desc(i, [s.ring.desc, s.ring.avail, s.ring.used][r.int(3)]!, 64, W, 0); s.offer(i); }, 0],
];

// ---- a case: steps on one device ----------------------------------------------------------------------

/** One step: [kind (0..999), count, seed]. Kinds by range: see runStep. */
type Step = [number, number, number];
const stepArb: fc.Arbitrary<Step> = fc.tuple(fc.nat({ max: 999 }), fc.nat({ max: 63 }), fc.nat());
const caseArb = fc.record({ ring: fc.nat(), steps: fc.array(stepArb, { minLength: 600, maxLength: 600 }) });

function runStep(s: Session, [kind, count, seed]: Step, round: number): void {
  const r = prng(seed + round * 0x9e3779b9);
  // A driver that sees DEVICE_NEEDS_RESET resets the device (mostly at once; sometimes it keeps
  // offering first, and the broken device must serve nothing).
  if (s.broken && r.chance(0.75)) {
    s.program(r.chance(0.9) ? randomRing(r) : HOSTILE_RINGS[r.int(HOSTILE_RINGS.length)]![1](r), r.chance(0.9), randomVectors(r));
    return;
  }
  if (kind < 620) {
    offerRandom(s, r, 1 + (count % 48));
    s.notify();
  } else if (kind < 680) {
    offerRandom(s, r, 1 + (count % 8)); // offered, notified later
  } else if (kind < 700) {
    s.notify(); // spurious, or for what was offered before
  } else if (kind < 720) {
    s.setNoInterrupt(!s.noInterrupt);
  } else if (kind < 735) {
    s.rewriteRunningQueue(r);
  } else if (kind < 745) {
    s.notifyMissingQueue();
  } else if (kind < 900) {
    if (s.broken) return;
    const [name, make] = HOSTILE_CHAINS[count % HOSTILE_CHAINS.length]!;
    structuredRuns[name] = (structuredRuns[name] ?? 0) + 1;
    if (r.chance(0.5)) offerRandom(s, r, r.int(4)); // good chains before it
    make(s, r);
    s.publish();
    s.notify();
  } else if (kind < 940) {
    offerRandom(s, r, 1 + (count % 8));
    s.program(randomRing(r), r.chance(0.9), randomVectors(r)); // a reset with chains pending: they are forgotten
  } else if (kind < 980) {
    s.program(randomRing(r), r.chance(0.9), randomVectors(r));
  } else {
    const [name, make] = HOSTILE_RINGS[count % HOSTILE_RINGS.length]!;
    structuredRuns[name] = (structuredRuns[name] ?? 0) + 1;
    s.program(make(r));
    offerRandom(s, r, 1 + (count % 8));
    s.notify();
  }
}

/** Runs steps (round after round through them) until the session did `ops` operations. */
function runCase(ring: number, steps: Step[], ops: number): Session {
  const s = new Session();
  s.program(randomRing(prng(ring)));
  const maxSteps = steps.length * 40;
  for (let i = 0; s.ops < ops && i < maxSteps; i++) {
    const step = steps[i % steps.length]!;
    try {
      runStep(s, step, Math.floor(i / steps.length));
    } catch (e) {
      if (e instanceof Error) e.message = `step ${i} ${JSON.stringify(step)} (ring ${JSON.stringify(s.ring)}): ${e.message}`;
      throw e;
    }
  }
  return s;
}

describe('virtio-rng split queue against a hostile driver', () => {
  afterAll(() => {
    const list = (o: Record<string, number>) => Object.entries(o).map(([k, v]) => `${k}=${v.toLocaleString('en')}`).join(', ');
    const t = tally;
    const n = (x: number) => x.toLocaleString('en');
    // One line: operations, what else happened, and how often each named invariant was checked.
    console.log(`virtqueue fuzz: ${n(t.operations)} operations (${n(t.randomOperations)} random; ` +
      `${n(t.served)} chains served, ${n(t.chainsRefused)} refused, ${n(t.ringsRefused)} rings refused [${list(refusals)}]; ` +
      `${n(t.notifies)} notifies, ${n(t.brokenNotifies)} to a broken device, ${n(t.aliasedNotifies)} over the rings, ${n(t.resets)} resets, 16-bit index wraps ${t.wrapped}); ` +
      `invariant checks: ${list(checks)}; hostile cases run: ${list(structuredRuns)}`);
    // Only meaningful when the random property ran (a single-test filter runs fewer).
    if (tally.randomOperations > 0 && SCALE >= 1) expect(tally.operations).toBeGreaterThanOrEqual(1_000_000);
  });

  // On a ring of 8 (the cases marked -1 depend on the ring's size only).
  const single: [string, (s: Session, r: Prng) => void, number][] = [
    ...HOSTILE_CHAINS.filter(([, , e]) => e > 0),
    ...HOSTILE_CHAINS.filter(([, , e]) => e < 0).map(([n, f]): [string, (s: Session, r: Prng) => void, number] => [n, f, QUEUE_ERROR.readAfterWrite]),
  ];
  for (const [what, spoil, error] of single) {
    it(`${what}: DEVICE_NEEDS_RESET (${QUEUE_ERROR_NAMES[error]}) after the good chain before it, nothing else touched`, () => {
      const s = new Session();
      s.program(GOOD_RING(8));
      const r = prng(7);
      s.desc(s.take(1), 0x8000, 64, W, 0);
      s.offer(0);
      spoil(s, r);
      s.publish();
      s.notify();
      tally.operations += s.ops;
      expect(s.status() & STATUS.needsReset).toBe(STATUS.needsReset);
      expect(s.device.counters().lastError).toBe(error);
    });
  }

  for (const [what, make] of HOSTILE_RINGS) {
    it(`ring: ${what}`, () => {
      const s = new Session();
      const ring = make(prng(3));
      s.program(ring);
      offerRandom(s, prng(5), 4);
      s.notify();
      s.notify();
      tally.operations += s.ops;
      // A ring the device must refuse whatever it holds; others may still hold bad chains (rings over each other).
      const bad = !sizeOk(ring.size) || !inRam(ring.desc, 16 * ring.size) || !inRam(ring.used, 6 + 8 * ring.size) || ring.desc % 16 !== 0 || ring.avail % 2 !== 0 || ring.used % 4 !== 0;
      expect((s.status() & STATUS.needsReset) !== 0).toBe(s.broken);
      if (bad) expect(s.device.counters().lastError).toBe(sizeOk(ring.size) ? QUEUE_ERROR.ringOutsideRam : QUEUE_ERROR.badSize);
      if (bad) expect(s.broken).toBe(true);
    });
  }

  it('good chains are all served: two requests, 64 random bytes each', () => {
    const s = new Session();
    s.program(GOOD_RING(8));
    for (let i = 0; i < 2; i++) { s.desc(i, 0x8000 + 0x100 * i, 64, W, 0); s.offer(i); }
    s.publish();
    s.notify();
    tally.operations += s.ops;
    expect(s.device.counters().requests[0]).toBe(2);
    expect(s.msis).toEqual([1, 0]);
  });

  it('a full ring of 64 good chains is served in passes of at most 16, one interrupt each', () => {
    const s = new Session();
    s.program(GOOD_RING(64));
    for (let i = 0; i < 64; i++) { s.desc(i, 0x8000 + 0x100 * i, 64, W, 0); s.offer(i); }
    s.publish();
    s.notify();
    tally.operations += s.ops;
    expect(s.device.counters().requests[0]).toBe(64);
    expect(s.msis).toEqual([64 / MAX_CHAINS_PER_PASS, 0]);
  });

  it('the 16-bit ring indices wrap: 70,000 chains on one queue, never reset', () => {
    const s = new Session();
    s.program(GOOD_RING(16));
    const r = prng(11);
    let offered = 0;
    while (offered < 70_000) {
      const k = 1 + r.int(16);
      for (let j = 0; j < k; j++) { const i = s.take(1); s.desc(i, DATA_START + 32 * i, 1 + r.int(32), W, 0); s.offer(i); }
      offered += k;
      s.publish();
      s.notify();
    }
    tally.operations += s.ops;
    tally.wrapped++;
    expect(s.ops).toBe(offered);
    expect(s.device.counters().requests[0]).toBe(offered);
    expect(new DataView(s.sab).getUint16(0x2400 + 2, true)).toBe(offered & 0xffff);
  });

  it(`random and structured queue operations: ${(RUNS * OPS_PER_CASE * SCALE).toLocaleString('en')} in all, every invariant after each notify`, () => {
    const t0 = performance.now();
    let ops = 0;
    fc.assert(fc.property(caseArb, ({ ring, steps }) => {
      const s = runCase(ring, steps, OPS_PER_CASE);
      ops += s.ops;
    }), fcOptions(RUNS));
    tally.operations += ops;
    tally.randomOperations += ops;
    console.log(`virtqueue fuzz: ${ops.toLocaleString('en')} random operations in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(ops).toBeGreaterThanOrEqual(Math.max(1, Math.round(RUNS * SCALE)) * OPS_PER_CASE);
    expect(tally.served).toBeGreaterThan(ops / 2);
    for (const e of ['chainTooLong', 'bufferOutsideRam', 'headOutOfRange', 'nextOutOfRange', 'indirect', 'readAfterWrite', 'availIndexJump', 'ringOutsideRam', 'badSize']) {
      expect(refusals[e] ?? 0, e).toBeGreaterThan(0);
    }
  }, 600_000);
});
