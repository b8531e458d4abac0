// A hostile driver against the virtio-rng device's split queue, without KVM: random and structured
// rings (queue sizes that are no power of two, rings outside RAM or misaligned, descriptor loops,
// next indices past the ring, buffers past RAM and 4 GiB lengths, indirect descriptors that were
// never offered, readable after writable buffers, available indices that run ahead) are put in a
// small guest RAM and the device serves them through the real board (registers written as MMIO,
// queues served as the I/O thread serves them). After every run the named invariants hold: no
// exception escapes; the device either served every available chain or says DEVICE_NEEDS_RESET;
// it served exactly the chains an independent reference walker (the spec's rules, written here)
// accepts, in order, up to the first bad one; nothing outside the used ring and the writable
// buffers of the served chains changed; each used element names its head and a length within its
// chain's writable bytes.
//
// FUZZ_SEED=<n> replays a run; FUZZ_SCALE=<x> scales the number of runs (default 1); FUZZ_SHRINK=1 shrinks a failure.
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, slotBars, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { GuestRam } from '../../electron/vmm/devices/virtio/guest-ram.ts';
import { MAX_CHAINS_PER_PASS, STATUS } from '../../electron/vmm/devices/virtio/virtio-pci.ts';
import { MAX_BYTES_PER_REQUEST } from '../../electron/vmm/devices/virtio/virtio-rng.ts';
import { QUEUE_ERROR } from '../../electron/vmm/devices/virtio/virtqueue.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const fcOptions = (numRuns: number) => ({ numRuns: Math.max(1, Math.round(numRuns * SCALE)), ...(SEED === undefined ? {} : { seed: SEED }), endOnFailure: process.env.FUZZ_SHRINK === undefined });

const RAM_SIZE = 0x10000; // 64 KiB of guest RAM at guest-physical 0
// A known background, so any byte the device should not touch can be checked.
const BACKGROUND = Uint8Array.from({ length: RAM_SIZE }, (_, i) => (i * 131 + 7) & 0xff);
const checks: Record<string, number> = {};
let chainsServed = 0;
let chainsExamined = 0;
let aliasedRuns = 0;

function inv(name: string, ok: boolean, detail?: () => string): void {
  checks[name] = (checks[name] ?? 0) + 1;
  if (!ok) throw new Error(`invariant "${name}" violated${detail ? `: ${detail()}` : ''}`);
}

interface Desc { addr: number; len: number; flags: number; next: number }
interface Scenario {
  size: number;
  desc: number;
  avail: number;
  used: number;
  descs: Desc[];
  availRing: number[];
  /** Entries the driver says are available (avail.idx - 0). */
  availIdx: number;
  noInterrupt: boolean;
}

/** A device, ready and running (DRIVER_OK, bus master, MSI-X on), with its queue programmed from `s`. */
function deviceFor(s: Scenario) {
  const config: BoardConfig = { virtio: [{ name: 'rng', eventFd: 9 }] };
  const msis: number[] = [];
  const nop = () => {};
  const b = attachBoard(createDeviceState(config), {
    emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onReset: nop,
    signalMsi: (_a, d) => msis.push(d), signalEventFd: nop, setIoeventfd: nop,
  }, config);
  const { regs, msix } = slotBars(1);
  const data = new Uint8Array(8);
  const w = (addr: number, size: number, v: number) => {
    for (let i = 0; i < size; i++) data[i] = (v >>> (8 * i)) & 0xff;
    b.mmio.write(addr, data, size);
  };
  const r = (addr: number, size: number) => {
    b.mmio.read(addr, data, size);
    let v = 0;
    for (let i = 0; i < size; i++) v |= data[i]! << (8 * i);
    return v >>> 0;
  };
  b.pio.write(0xcf8, 4, 0x80000800 | 0x04);
  b.pio.write(0xcfc, 2, 0x6);
  b.pio.write(0xcf8, 4, 0x80000800 | 0x40);
  b.pio.write(0xcfe, 2, 0x8000); // MSI-X enable (message control at 0x42)
  for (const v of [0, 1]) {
    w(msix + 16 * v, 4, 0xfee00000);
    w(msix + 16 * v + 8, 4, 0x60 + v);
    w(msix + 16 * v + 12, 4, 0);
  }
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver);
  w(regs + 8, 4, 1);
  w(regs + 0xc, 4, 1);
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk);
  w(regs + 0x10, 2, 1);
  w(regs + 0x18, 2, s.size);
  w(regs + 0x1a, 2, 0);
  w(regs + 0x20, 4, s.desc % 2 ** 32); w(regs + 0x24, 4, Math.floor(s.desc / 2 ** 32));
  w(regs + 0x28, 4, s.avail % 2 ** 32); w(regs + 0x2c, 4, Math.floor(s.avail / 2 ** 32));
  w(regs + 0x30, 4, s.used % 2 ** 32); w(regs + 0x34, 4, Math.floor(s.used / 2 ** 32));
  w(regs + 0x1c, 2, 1);
  w(regs + 0x14, 1, STATUS.acknowledge | STATUS.driver | STATUS.featuresOk | STATUS.driverOk);
  return { b, msis, status: () => r(regs + 0x14, 1), device: b.pci.virtio[0]!.device };
}

const inRam = (gpa: number, len: number) => gpa >= 0 && gpa + len <= RAM_SIZE;

/** The spec's rules, independently: how many chains are good before the first bad one, and whether one is bad. */
/** Whether a device-writable buffer covers part of a ring: the device then overwrites the rings it reads next. */
function aliasesRings(s: Scenario, a: number, l: number): boolean {
  const n = Math.min(s.size, 256);
  return [[s.desc, 16 * n], [s.avail, 6 + 2 * n], [s.used, 6 + 8 * n]].some(([at, len]) => a < at! + len! && at! < a + l);
}

function reference(s: Scenario): { good: { head: number; writable: [number, number][] }[]; bad: boolean; aliased?: boolean } {
  const n = s.size;
  if (n === 0 || n > 256 || (n & (n - 1)) !== 0) return { good: [], bad: true };
  if (!inRam(s.desc, 16 * n) || !inRam(s.avail, 6 + 2 * n) || !inRam(s.used, 6 + 8 * n) || s.desc % 16 || s.avail % 2 || s.used % 4) return { good: [], bad: true };
  if (s.availIdx > n) return { good: [], bad: true };
  const good: { head: number; writable: [number, number][] }[] = [];
  for (let e = 0; e < s.availIdx; e++) {
    const head = s.availRing[e % n]!;
    if (head >= n) return { good, bad: true };
    const seen = new Set<number>();
    const writable: [number, number][] = [];
    let i = head;
    let sawWrite = false;
    for (;;) {
      if (seen.has(i)) return { good, bad: true }; // a loop
      seen.add(i);
      const d = s.descs[i]!;
      if (d.flags & 4) return { good, bad: true };
      const wr = (d.flags & 2) !== 0;
      if (!wr && sawWrite) return { good, bad: true };
      sawWrite ||= wr;
      if (!inRam(d.addr, d.len)) return { good, bad: true };
      if (wr) writable.push([d.addr, d.len]);
      // From here on the guest's own rings hold random bytes: nothing after this chain is predictable.
      if (wr && aliasesRings(s, d.addr, d.len)) return { good: [...good, { head, writable }], bad: false, aliased: true };
      if (!(d.flags & 1)) break;
      if (d.next >= n) return { good, bad: true };
      i = d.next;
    }
    good.push({ head, writable });
  }
  return { good, bad: false };
}

function layOut(ram: Uint8Array, s: Scenario): void {
  const dv = new DataView(ram.buffer, ram.byteOffset, ram.byteLength);
  const n = Math.min(s.size, s.descs.length, s.availRing.length);
  if (inRam(s.desc, 16 * n)) {
    s.descs.slice(0, n).forEach((d, i) => {
      const o = s.desc + 16 * i;
      dv.setUint32(o, d.addr % 2 ** 32, true);
      dv.setUint32(o + 4, Math.floor(d.addr / 2 ** 32), true);
      dv.setUint32(o + 8, d.len, true);
      dv.setUint16(o + 12, d.flags, true);
      dv.setUint16(o + 14, d.next, true);
    });
  }
  if (inRam(s.avail, 6 + 2 * n)) {
    dv.setUint16(s.avail, s.noInterrupt ? 1 : 0, true);
    dv.setUint16(s.avail + 2, s.availIdx, true);
    s.availRing.slice(0, n).forEach((h, i) => dv.setUint16(s.avail + 4 + 2 * i, h, true));
  }
}

/** One run: lay the rings out, serve, check every invariant. */
function runScenario(s: Scenario): void {
  const sab = new SharedArrayBuffer(RAM_SIZE);
  const ram = new Uint8Array(sab);
  ram.set(BACKGROUND);
  layOut(ram, s);
  const before = ram.slice();
  const { b, msis, status, device } = deviceFor(s);
  const guestRam = new GuestRam(ram, [{ guestPhysAddr: 0, size: RAM_SIZE, offset: 0 }]);
  let threw: unknown;
  let passes = 0;
  try {
    // As the I/O thread does: pass after pass while the device says chains remain.
    while (b.pci.lock.withLock(() => device.serviceQueues(guestRam)) && passes < 1000) passes++;
  } catch (e) {
    threw = e;
  }
  inv('a ring is drained in a bounded number of passes', passes < 1000);
  inv('no exception escapes the device', threw === undefined, () => String(threw));
  const ref = reference(s);
  if (ref.aliased) {
    aliasedRuns++;
    return; // a buffer over the rings: the device may do anything the rewritten rings say, except fail
  }
  const broken = (status() & STATUS.needsReset) !== 0;
  const c = device.counters();
  inv('needs a reset exactly when the reference finds a bad ring or chain', broken === ref.bad, () => `device ${broken}, reference ${ref.bad}, error ${c.lastError}`);
  inv('a device that needs a reset names why', !broken || (c.error !== QUEUE_ERROR.none && c.error === c.lastError));
  inv('serves exactly the good chains before the first bad one', c.requests[0] === ref.good.length, () => `${c.requests[0]} vs ${ref.good.length}`);
  chainsExamined += ref.good.length + (ref.bad ? 1 : 0);
  chainsServed += ref.good.length;
  // What the device may have written: the used ring and the served chains' writable buffers.
  const mayWrite = new Uint8Array(RAM_SIZE);
  if (ref.good.length && inRam(s.used, 6 + 8 * s.size)) mayWrite.fill(1, s.used, s.used + 6 + 8 * s.size);
  for (const g of ref.good) for (const [a, l] of g.writable) mayWrite.fill(1, a, a + l);
  let stray = -1;
  for (let i = 0; i < RAM_SIZE && stray < 0; i++) if (!mayWrite[i] && ram[i] !== before[i]) stray = i;
  inv('nothing outside the used ring and the served writable buffers changes', stray < 0, () => `byte 0x${stray.toString(16)}`);
  if (ref.good.length) {
    const dv = new DataView(sab);
    inv('the used index counts the served chains', dv.getUint16(s.used + 2, true) === ref.good.length);
    ref.good.forEach((g, k) => {
      const id = dv.getUint32(s.used + 4 + 8 * (k % s.size), true);
      const len = dv.getUint32(s.used + 8 + 8 * (k % s.size), true);
      const cap = Math.min(MAX_BYTES_PER_REQUEST, g.writable.reduce((t, [, l]) => t + l, 0));
      inv('each used element names its head', id === g.head, () => `${id} vs ${g.head}`);
      inv('each used length is the chain\'s writable bytes, capped per request', len === cap, () => `${len} vs ${cap}`);
    });
  }
  const queueIrqs = msis.filter((d) => d === 0x60).length;
  const configIrqs = msis.filter((d) => d === 0x61).length;
  // One interrupt per pass that completed (MAX_CHAINS_PER_PASS chains at most): a pass that meets a
  // bad chain stops there without interrupting for the chains it had served.
  const per = MAX_CHAINS_PER_PASS;
  const expectedIrqs = s.noInterrupt ? 0 : ref.bad ? Math.floor(ref.good.length / per) : Math.ceil(ref.good.length / per);
  inv('one queue interrupt per completed pass (none if the driver asked for none)', queueIrqs === expectedIrqs, () => `${queueIrqs} vs ${expectedIrqs}`);
  // A bad queue size breaks the device at queue_enable, before DRIVER_OK: no driver to tell yet.
  const badSize = s.size === 0 || s.size > 256 || (s.size & (s.size - 1)) !== 0;
  inv('a configuration interrupt exactly when the running device broke', configIrqs === (ref.bad && !badSize ? 1 : 0), () => `${configIrqs}`);
}

// ---- arbitraries ----
const sizeArb = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(1, 2, 4, 8, 16, 32, 64) }, { weight: 1, arbitrary: fc.constantFrom(0, 3, 6, 12, 300, 512) });
const addrArb = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 0x8000, max: RAM_SIZE - 0x1000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0x8000, max: RAM_SIZE - 1 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, RAM_SIZE - 16, RAM_SIZE, 2 ** 32 - 4096, 2 ** 40, 2 ** 52) },
);
const lenArb = fc.oneof({ weight: 12, arbitrary: fc.integer({ min: 0, max: 0x800 }) }, { weight: 1, arbitrary: fc.constantFrom(0xffffffff, RAM_SIZE, 0x80000000) });
const descArb = fc.record({
  addr: addrArb,
  len: lenArb,
  flags: fc.oneof({ weight: 8, arbitrary: fc.constant(2) }, { weight: 4, arbitrary: fc.constantFrom(3, 0, 1) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 7 }) }),
  next: fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 0, max: 31 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) }),
});
const scenarioArb: fc.Arbitrary<Scenario> = sizeArb.chain((size) => fc.record({
  size: fc.constant(size),
  desc: fc.oneof({ weight: 9, arbitrary: fc.constant(0x1000) }, { weight: 1, arbitrary: fc.constantFrom(0x1008, RAM_SIZE - 64, 2 ** 33) }),
  avail: fc.oneof({ weight: 9, arbitrary: fc.constant(0x3000) }, { weight: 1, arbitrary: fc.constantFrom(0x3001, RAM_SIZE) }),
  used: fc.oneof({ weight: 9, arbitrary: fc.constant(0x4000) }, { weight: 1, arbitrary: fc.constantFrom(0x4002, RAM_SIZE - 8) }),
  descs: fc.array(descArb, { minLength: 64, maxLength: 64 }),
  availRing: fc.array(fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 0, max: Math.max(0, Math.min(size, 256) - 1) }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) }), { minLength: 64, maxLength: 64 }),
  availIdx: fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 0, max: Math.min(size, 256) }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) }),
  noInterrupt: fc.boolean(),
}));

function good(size = 8): Scenario {
  const descs = Array.from({ length: 512 }, (_, i) => ({ addr: 0x8000 + 0x100 * (i % 64), len: 64, flags: 2, next: 0 }));
  return { size, desc: 0x1000, avail: 0x3000, used: 0x4000, descs, availRing: Array.from({ length: 512 }, (_, i) => i % size), availIdx: 2, noInterrupt: false };
}

describe('virtio-rng split queue against a hostile driver', () => {
  afterAll(() => {
    console.log(`virtqueue fuzz: ${chainsExamined} chains (or rings) examined, ${chainsServed} served, ${aliasedRuns} runs with a buffer over the rings (only "no exception" checked); invariant checks:\n${Object.entries(checks).map(([k, v]) => `  ${k}: ${v}`).join('\n')}`);
  });

  const structured: [string, (s: Scenario) => void, number][] = [
    ['a descriptor chained to itself', (s) => { s.descs[0] = { addr: 0x8000, len: 16, flags: 3, next: 0 }; }, QUEUE_ERROR.chainTooLong],
    ['a two-descriptor cycle', (s) => { s.descs[0] = { addr: 0x8000, len: 16, flags: 3, next: 1 }; s.descs[1] = { addr: 0x8100, len: 16, flags: 3, next: 0 }; }, QUEUE_ERROR.chainTooLong],
    ['a buffer past the end of RAM', (s) => { s.descs[0] = { addr: RAM_SIZE - 8, len: 16, flags: 2, next: 0 }; }, QUEUE_ERROR.bufferOutsideRam],
    ['a 4 GiB length', (s) => { s.descs[0] = { addr: 0x8000, len: 0xffffffff, flags: 2, next: 0 }; }, QUEUE_ERROR.bufferOutsideRam],
    ['an address above 2^52', (s) => { s.descs[0] = { addr: 2 ** 52, len: 1, flags: 2, next: 0 }; }, QUEUE_ERROR.bufferOutsideRam],
    ['a head index past the ring', (s) => { s.availRing[0] = 8; }, QUEUE_ERROR.headOutOfRange],
    ['a next index past the ring', (s) => { s.descs[0] = { addr: 0x8000, len: 16, flags: 3, next: 9 }; }, QUEUE_ERROR.nextOutOfRange],
    ['an indirect descriptor (never offered)', (s) => { s.descs[0] = { addr: 0x8000, len: 16, flags: 4 | 2, next: 0 }; }, QUEUE_ERROR.indirect],
    ['a readable buffer after a writable one', (s) => { s.descs[0] = { addr: 0x8000, len: 16, flags: 3, next: 1 }; s.descs[1] = { addr: 0x8100, len: 16, flags: 0, next: 0 }; }, QUEUE_ERROR.readAfterWrite],
    ['an available index a whole ring ahead', (s) => { s.availIdx = 9; }, QUEUE_ERROR.availIndexJump],
    ['the descriptor table outside RAM', (s) => { s.desc = 2 ** 33; }, QUEUE_ERROR.ringOutsideRam],
    ['a misaligned used ring', (s) => { s.used = 0x4002; }, QUEUE_ERROR.ringOutsideRam],
    ['a queue size that is no power of two', (s) => { s.size = 6; }, QUEUE_ERROR.badSize],
  ];
  for (const [what, spoil, error] of structured) {
    it(`${what}: DEVICE_NEEDS_RESET (${error}), nothing else touched`, () => {
      const s = good();
      spoil(s);
      runScenario(s);
      const { device } = deviceFor(s);
      // A second look at the counters of a fresh run: the error code names the rule.
      const sab = new SharedArrayBuffer(RAM_SIZE);
      layOut(new Uint8Array(sab), s);
      device.serviceQueues(new GuestRam(new Uint8Array(sab), [{ guestPhysAddr: 0, size: RAM_SIZE, offset: 0 }]));
      expect(device.counters().lastError).toBe(error);
    });
  }

  it('good chains are all served: two requests, 64 random bytes each', () => {
    runScenario(good());
  });

  it('a full ring of 64 good chains is served in passes of at most 16, one interrupt each', () => {
    const s = good(64);
    s.availIdx = 64;
    s.descs = s.descs.map((d, i) => ({ ...d, addr: 0x8000 + 0x100 * (i % 64) }));
    runScenario(s);
  });

  it('random rings: no exception, served exactly what the reference accepts, nothing else written', () => {
    fc.assert(fc.property(scenarioArb, (s) => { runScenario(s); }), fcOptions(2000));
    expect(chainsServed).toBeGreaterThan(1000);
  }, 180_000);
});
