// Random PCI traffic from a hostile guest, without KVM: configuration accesses of every width at
// every offset of every slot through the board's real ports (0xCF8/0xCFC, straddling and odd
// widths included), MMIO reads and writes anywhere in the PCI window (the BARs wherever the guest
// moved them, the MSI-X table, the virtio registers), and MSI raises from the I/O thread's side.
// After every step the named invariants hold: no exception escapes; identity, class, header,
// capability bytes (all but MSI-X's enable and mask bits) never change; a BAR's low bits stay
// those of a 32-bit memory BAR of its size; the command register holds only its writable bits;
// empty slots read all ones; CONFIG_ADDRESS reads back with its reserved bits clear; an MSI goes
// out only for an enabled, unmasked vector of the table and with that entry's address and data —
// whatever sent it (a raise, an unmask that finds a pending bit, a configuration interrupt); a
// raise of a masked vector sets its pending bit and sends nothing; a raise MSI-X cannot take
// (disabled, no such vector) changes nothing; nothing stays pending for a vector that may be
// delivered; a configuration or MSI-X BAR write sends exactly the messages of the pending bits it
// clears (each its own entry's, lowest vector first) and sets none; pending bits only for the table's vectors. 1,000,000 accesses a run (asserted).
//
// FUZZ_SEED=<n> replays a run; FUZZ_SCALE=<x> scales the number of runs (default 1); FUZZ_SHRINK=1 shrinks a failure.
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { attachBoard, createDeviceState, PCI_MMIO_WINDOW, type BoardConfig } from '../../electron/vmm/devices/board.ts';
import { getrandomIo } from '../../native/kvm/libc.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const fcOptions = (numRuns: number) => ({ numRuns: Math.max(1, Math.round(numRuns * SCALE)), ...(SEED === undefined ? {} : { seed: SEED }), endOnFailure: process.env.FUZZ_SHRINK === undefined });

const checks: Record<string, number> = {};
let accesses = 0;
/** MSIs sent by a configuration or MSI-X BAR write: pending bits delivered when they became deliverable. */
let deliveredPending = 0;
function inv(name: string, ok: boolean, detail?: () => string): void {
  checks[name] = (checks[name] ?? 0) + 1;
  if (!ok) throw new Error(`invariant "${name}" violated${detail ? `: ${detail()}` : ''}`);
}

type Op =
  | { k: 'cfgw'; slot: number; reg: number; size: number; value: number }
  | { k: 'cfgr'; slot: number; reg: number; size: number }
  | { k: 'addr'; port: number; size: number; value: number }
  | { k: 'mmiow'; at: number; size: number; value: number }
  | { k: 'mmior'; at: number; size: number }
  | { k: 'raise'; vector: number }
  /** What a well-behaved driver does first (BARs back home, decoding on, MSI-X on, both vectors unmasked): interleaved with the garbage. */
  | { k: 'driver' };

const regArb = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(0x04, 0x06, 0x10, 0x14, 0x18, 0x30, 0x3c, 0x40, 0x42, 0x44, 0x48) }, { weight: 2, arbitrary: fc.integer({ min: 0, max: 255 }) });
const sizeArb = fc.constantFrom(1, 2, 4);
const valueArb = fc.oneof(fc.constantFrom(0, 0xffffffff, 0x8000, 0xc000, 0x6, 0xe0010000, 0xe0018000, 0xe4000000), fc.integer({ min: 0, max: 0xffffffff }));
const atArb = fc.oneof(
  // The registers that matter: MSI-X entries and pending bits, virtio status, queue select/enable, notify.
  { weight: 3, arbitrary: fc.constantFrom(0xe0018000, 0xe0018008, 0xe001800c, 0xe0018010, 0xe0018018, 0xe001801c, 0xe0018800, 0xe0010014, 0xe0010016, 0xe001001c, 0xe0013000, 0xe0011000) },
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 0x1ffff }).map((o) => PCI_MMIO_WINDOW.base + o) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffffff }).map((o) => 0xe4000000 + o) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffffffff }) },
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ k: fc.constant('cfgw' as const), slot: fc.integer({ min: 0, max: 3 }), reg: regArb, size: sizeArb, value: valueArb }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('cfgr' as const), slot: fc.integer({ min: 0, max: 3 }), reg: regArb, size: sizeArb }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('addr' as const), port: fc.integer({ min: 0xcf6, max: 0xd01 }), size: sizeArb, value: valueArb }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('mmiow' as const), at: atArb, size: fc.constantFrom(1, 2, 4, 8), value: valueArb }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('mmior' as const), at: atArb, size: fc.constantFrom(1, 2, 4, 8) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('raise' as const), vector: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 1, arbitrary: fc.constant({ k: 'driver' as const }) },
);

// What a guest may change, from the PCI spec and docs/guest-contract.md (not from the device code).
const WRITABLE: Record<number, number> = { 0x04: 0x06, 0x05: 0x04, 0x0c: 0xff, 0x0d: 0xff, 0x3c: 0xff };
const BARS: Record<number, number[]> = { 0: [], 1: [0x4000, 0x1000] };
const MSIX_CTRL_HI = 0x43; // enable (bit 15) and function mask (bit 14) of the MSI-X capability at 0x40

function runOps(ops: Op[]): void {
  const config: BoardConfig = { virtio: [{ name: 'rng', eventFd: 5 }], ioeventfdLength: 0 };
  /** Every MSI as sent: address, data, and what the model said of it at that moment (before a later write of the same access changed the table). */
  const sent: [number, number, string | undefined][] = [];
  const nop = () => {};
  const b = attachBoard(createDeviceState(config), {
    emitConsole: nop, emitAgent: nop, setIrq: nop, onPowerOff: nop, onDebugExit: nop, onReset: nop, entropy: getrandomIo,
    signalMsi: (a, d) => sent.push([a, d, judge(a, d)]), signalEventFd: nop, setIoeventfd: nop,
  }, config);
  const rng = b.pci.virtio[0]!.device;
  const cfg = [b.pci.bridge.config.bytes, rng.config.bytes];
  const atPowerOn = cfg.map((c) => c.slice());
  const capsEnd = 0x40 + 0x60; // MSI-X + 3 virtio capabilities laid out from 0x40 (generous bound)
  const data = new Uint8Array(8);
  // The MSI-X table as the spec says a guest's writes leave it: 4- or 8-byte aligned writes into
  // BAR 1's first 32 bytes while BAR 1 decodes (memory space on). Masked bits start set.
  const table = new Uint8Array(32);
  table[12] = 1;
  table[28] = 1;
  const le32 = (u: Uint8Array, o: number) => (u[o]! | (u[o + 1]! << 8) | (u[o + 2]! << 16) | (u[o + 3]! << 24)) >>> 0;
  /** Writes `data` at `at`; true when the write went to the MSI-X BAR (BAR 1), as the bus decodes. */
  const mmioWrite = (at: number, size: number): boolean => {
    const bar1 = (le32(cfg[1]!, 0x14) & ~0xf) >>> 0;
    const decoding = (cfg[1]![4]! & 2) !== 0 && bar1 !== 0 && bar1 + 0x1000 < 2 ** 32;
    const bar0 = (le32(cfg[1]!, 0x10) & ~0xf) >>> 0;
    // Overlapping BARs (a guest may program that): BAR 0 answers first, as the bus looks them up in order.
    const inBar0 = bar0 !== 0 && bar0 + 0x4000 < 2 ** 32 && at >= bar0 && at < bar0 + 0x4000;
    const off = at - bar1;
    if (decoding && !inBar0 && off >= 0 && off + size <= 32 && (size === 4 || size === 8) && off % size === 0) table.set(data.subarray(0, size), off);
    b.mmio.write(at, data, size);
    return decoding && !inBar0 && off >= 0 && off < 0x1000;
  };
  const pba = () => b.pci.lock.withLock(() => { const d = new Uint8Array(4); rng.msix.readPba(0, d, 4); return (d[0]! | (d[1]! << 8) | (d[2]! << 16) | (d[3]! << 24)) >>> 0; });
  const msixOn = () => (cfg[1]![MSIX_CTRL_HI]! & 0x80) !== 0;
  const functionMasked = () => (cfg[1]![MSIX_CTRL_HI]! & 0x40) !== 0;
  const entryMasked = (v: number) => (table[16 * v + 12]! & 1) !== 0;
  /** Vector v's message as the table holds it. */
  const entryAddress = (v: number) => le32(table, 16 * v) + le32(table, 16 * v + 4) * 2 ** 32;
  const entryData = (v: number) => le32(table, 16 * v + 8);
  const popcount = (x: number) => { let n = 0; for (; x; x &= x - 1) n++; return n; };
  /** What is wrong with an MSI sent now (undefined: nothing): it must be an unmasked entry's message while MSI-X is on and the function unmasked. */
  function judge(address: number, value: number): string | undefined {
    const from = [0, 1].find((v) => !entryMasked(v) && address === entryAddress(v) && value === entryData(v));
    if (from !== undefined && msixOn() && !functionMasked()) return undefined;
    return `${address.toString(16)}/${value.toString(16)} with table ${Buffer.from(table).toString('hex')}, control 0x${cfg[1]![MSIX_CTRL_HI]!.toString(16)}`;
  }
  for (const op of ops) {
    accesses++;
    let threw: unknown;
    const before = sent.length;
    const pendingBefore = pba();
    /** This access could only deliver pending bits (no virtio register, no raise): a configuration or MSI-X BAR write. */
    let onlyDelivers = false;
    try {
      switch (op.k) {
        case 'cfgw':
          b.pio.write(0xcf8, 4, 0x80000000 | (op.slot << 11) | (op.reg & 0xfc));
          b.pio.write(0xcfc + (op.reg & 3), op.size, op.value);
          onlyDelivers = true;
          break;
        case 'cfgr': {
          b.pio.write(0xcf8, 4, 0x80000000 | (op.slot << 11) | (op.reg & 0xfc));
          const v = b.pio.read(0xcfc + (op.reg & 3), op.size);
          if (op.slot >= 2) inv('empty slots read all ones', v === [0, 0xff, 0xffff, 0, 0xffffffff][op.size]);
          break;
        }
        case 'addr':
          b.pio.write(op.port, op.size, op.value);
          inv('CONFIG_ADDRESS reads back with its reserved bits clear', (b.pio.read(0xcf8, 4) & 0x7f000003) === 0);
          break;
        case 'mmiow':
          for (let i = 0; i < 8; i++) data[i] = (op.value >>> (8 * (i & 3))) & 0xff;
          onlyDelivers = mmioWrite(op.at, op.size);
          break;
        case 'mmior':
          b.mmio.read(op.at, data, op.size);
          break;
        case 'driver': {
          const cw = (reg: number, size: number, v: number) => { b.pio.write(0xcf8, 4, 0x80000800 | (reg & 0xfc)); b.pio.write(0xcfc + (reg & 3), size, v); };
          cw(0x10, 4, 0xe0010000);
          cw(0x14, 4, 0xe0018000);
          cw(0x04, 2, 0x6);
          cw(0x42, 2, 0x8000);
          for (let v = 0; v < 2; v++) {
            for (const [o, x] of [[0, 0xfee00000], [8, 0x60 + v], [12, 0]] as const) {
              for (let i = 0; i < 4; i++) data[i] = (x >>> (8 * i)) & 0xff;
              mmioWrite(0xe0018000 + 16 * v + o, 4);
            }
          }
          break;
        }
        case 'raise': {
          b.pci.lock.withLock(() => rng.msix.raise(op.vector));
          if (op.vector >= 2 || !msixOn()) {
            inv('a raise MSI-X cannot take sends nothing and leaves the pending bits', sent.length === before && pba() === pendingBefore);
          } else if (functionMasked() || entryMasked(op.vector)) {
            inv('a raise of a masked vector sets its pending bit and sends nothing', sent.length === before && (pba() & (1 << op.vector)) !== 0);
          }
          if (sent.length > before) {
            inv('an MSI goes out only for a vector the table has', op.vector < 2);
            inv('an MSI goes out only for an unmasked entry', !entryMasked(op.vector));
            const [address, value] = sent.at(-1)!;
            inv('an MSI carries its entry\'s address and data', address === entryAddress(op.vector) && value === entryData(op.vector),
              () => `${address.toString(16)}/${value.toString(16)}`);
            inv('an MSI goes out only while MSI-X is enabled and the function unmasked', msixOn() && !functionMasked());
          }
          break;
        }
      }
    } catch (e) {
      threw = e;
    }
    inv('no exception escapes', threw === undefined, () => String(threw));
    for (const [, , wrong] of sent.slice(before)) {
      inv('every MSI, whatever sent it, is an unmasked entry\'s address and data while MSI-X is on and the function unmasked', wrong === undefined, () => `${op.k}: ${wrong}`);
    }
    const pendingAfter = pba();
    const deliverable = msixOn() && !functionMasked() ? [0, 1].reduce((m, v) => (entryMasked(v) ? m : m | (1 << v)), 0) : 0;
    inv('nothing stays pending for a vector that may be delivered', (pendingAfter & deliverable) === 0, () => `pending ${pendingAfter.toString(2)}`);
    if (onlyDelivers) {
      // Exactly the messages of the bits it cleared, lowest vector first, each from its own entry.
      const cleared = [0, 1].filter((v) => (pendingBefore & ~pendingAfter & (1 << v)) !== 0);
      const expected = cleared.map((v) => `${entryAddress(v).toString(16)}/${entryData(v).toString(16)}`);
      const got = sent.slice(before).map(([a, d]) => `${a.toString(16)}/${d.toString(16)}`);
      inv('a configuration or MSI-X BAR write sends its cleared pending bits\' own messages, one each, and sets none',
        got.join() === expected.join() && popcount(pendingBefore & ~pendingAfter) === cleared.length && (pendingAfter & ~pendingBefore) === 0,
        () => `sent [${got.join(' ')}], expected [${expected.join(' ')}], pending ${pendingBefore.toString(2)} -> ${pendingAfter.toString(2)}`);
      deliveredPending += sent.length - before;
    }
    for (let f = 0; f < 2; f++) {
      const now = cfg[f]!;
      const was = atPowerOn[f]!;
      let changed = -1;
      for (let at = 0; at < 256 && changed < 0; at++) {
        const bar = at >= 0x10 && at < 0x28 ? BARS[f]![(at - 0x10) >> 2] : undefined;
        if (bar !== undefined) continue;
        const w = WRITABLE[at] ?? (f === 1 && at === MSIX_CTRL_HI ? 0xc0 : 0);
        if (((now[at]! ^ was[at]!) & ~w & 0xff) !== 0) changed = at;
      }
      inv('read-only configuration bytes never change', changed < 0, () => `function ${f} byte 0x${changed.toString(16)}: 0x${was[changed]!.toString(16)} -> 0x${now[changed]!.toString(16)}`);
      BARS[f]!.forEach((size, i) => {
        const v = now[0x10 + 4 * i]! | (now[0x11 + 4 * i]! << 8) | (now[0x12 + 4 * i]! << 16) | (now[0x13 + 4 * i]! << 24);
        inv('a BAR keeps the low bits of a 32-bit memory BAR of its size', ((v >>> 0) & (size - 1)) === 0);
      });
      inv('bytes past the capabilities stay zero', now.subarray(capsEnd).every((x) => x === 0));
    }
    inv('pending bits only for the table\'s vectors', (rng.counters() && b.pci.lock.withLock(() => { const d = new Uint8Array(4); rng.msix.readPba(0, d, 4); return d[0]! & ~3; })) === 0);
  }
}

describe('the PCI bus and MSI-X under a hostile guest', () => {
  afterAll(() => {
    console.log(`pci fuzz: ${accesses} accesses; invariant checks:\n${Object.entries(checks).map(([k, v]) => `  ${k}: ${v}`).join('\n')}`);
  });

  it('random configuration, MMIO and MSI traffic: the named invariants hold after every access', () => {
    fc.assert(fc.property(fc.array(opArb, { minLength: 1, maxLength: 600, size: 'max' }), (ops) => { runOps(ops); }), fcOptions(4000));
    expect(accesses).toBeGreaterThanOrEqual(1_000_000 * Math.min(1, SCALE));
    // The traffic did reach every kind of outcome.
    for (const name of ['an MSI goes out only for a vector the table has', 'a raise of a masked vector sets its pending bit and sends nothing',
      'a raise MSI-X cannot take sends nothing and leaves the pending bits']) expect(checks[name], name).toBeGreaterThan(0);
    expect(deliveredPending, 'pending bits were delivered at an unmask').toBeGreaterThan(0);
  }, 180_000);
});
