// Hostile-guest property tests: about a million random port accesses (widths 1/2/4, any offset,
// reads and writes) against each device model and against the whole port bus of the board,
// interleaved with host-side console injection and power-button presses. After every step the
// named invariants below are checked against the devices' shared state words and against a small
// independent reference model (datasheet semantics, written here from scratch, not by calling the
// device code). Registers with read side effects (RBR, IIR, LSR, MSR) are observed on a scratch
// copy of the state, so checking never disturbs the device under test.
//
// FUZZ_SEED=<n> replays a run; FUZZ_SCALE=<x> scales the number of runs (default 1).
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ACPI_PM_STATE_LAYOUT, ACPI_PM_STATE_WORDS, AcpiPm } from '../../electron/vmm/devices/acpi-pm.ts';
import { COM1_BASE, COM1_IRQ, COM2_BASE, COM2_IRQ, DEVICE_LAYOUT, PowerButton, SerialInput, attachDevices, createDeviceState } from '../../electron/vmm/devices/board.ts';
import { DebugExit } from '../../electron/vmm/devices/debug-exit.ts';
import { I8042 } from '../../electron/vmm/devices/i8042.ts';
import { UNHANDLED_SLOTS, UNHANDLED_TABLE_WORDS } from '../../electron/vmm/devices/port-bus.ts';
import { PostPort } from '../../electron/vmm/devices/post-port.ts';
import { UART_STATE_LAYOUT as L, UART_STATE_WORDS, Uart16550 } from '../../electron/vmm/devices/uart16550.ts';

const SCALE = Number(process.env.FUZZ_SCALE ?? 1) || 1;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const runs = (n: number) => Math.max(1, Math.round(n * SCALE));
const fcOptions = (numRuns: number) => ({ numRuns: runs(numRuns), ...(SEED === undefined ? {} : { seed: SEED }), endOnFailure: false });

/** Accesses made (device reads and writes, host injections and button presses), per property. */
const tally: Record<string, number> = {};
const invariantChecks: Record<string, number> = {};
let checksSinceFlush = 0;

/** A named invariant: throws (failing the property, with its name) when it does not hold. */
function inv(name: string, ok: boolean, detail?: () => string): void {
  checksSinceFlush++;
  if (!ok) throw new Error(`invariant "${name}" violated${detail ? `: ${detail()}` : ''}`);
}
function countInvariant(name: string, n: number): void {
  invariantChecks[name] = (invariantChecks[name] ?? 0) + n;
}

// ---- Operations --------------------------------------------------------------------------------
// One op is a tuple [kind, where, size, value]: compact, cheap to generate, and shrinkable.
// kind < 45: read; < 90: write; < 97: host injects `size & 31` bytes on COM(where & 1); else: power button.
type Op = [kind: number, where: number, size: number, value: number];
const SIZES = [1, 2, 4] as const;
const sizeArb = fc.constantFrom(...SIZES);
const valueArb = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 0xff }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffffffff }) },
  // Values that mean something to some device: reset, DLAB, loopback, FIFO enable/clear, S5|SLP_EN, PWRBTN.
  { weight: 1, arbitrary: fc.constantFrom(0xfe, 0x80, 0x03, 0x10, 0x1f, 0x07, 0xc7, 0x0f, 0x3400, 0x34, 0x100, 0x1, 0xffff) },
);
const kindArb = fc.integer({ min: 0, max: 99 });
const kindOf = (k: number) => (k < 45 ? 'read' : k < 90 ? 'write' : k < 97 ? 'inject' : 'button');

// ---- Reference model of one 16550 (datasheet semantics plus the documented design choices:
// transmit never holds a byte; the RX FIFO is 16 deep whatever the FIFO mode) -----------------
class UartModel {
  ier = 0; lcr = 0; mcr = 0; err = 0; msr = 0xb0; scr = 0; dll = 12; dlm = 0;
  fifoEnabled = false;
  fifo: number[] = [];
  thrEmptyInterrupt = false;
  emitted: number[] = [];

  pending(): number {
    if (this.ier & 0x04 && this.err & 0x1e) return 0x06;
    if (this.ier & 0x01 && this.fifo.length > 0) return 0x04;
    if (this.ier & 0x02 && this.thrEmptyInterrupt) return 0x02;
    if (this.ier & 0x08 && this.msr & 0x0f) return 0x00;
    return 0x01;
  }

  read(off: number): number {
    const dlab = (this.lcr & 0x80) !== 0;
    switch (off) {
      case 0: return dlab ? this.dll : (this.fifo.shift() ?? 0);
      case 1: return dlab ? this.dlm : this.ier;
      case 2: {
        const id = this.pending();
        if (id === 0x02) this.thrEmptyInterrupt = false;
        return id | (this.fifoEnabled ? 0xc0 : 0);
      }
      case 3: return this.lcr;
      case 4: return this.mcr;
      case 5: {
        const v = this.err | (this.fifo.length ? 0x01 : 0) | 0x60;
        this.err = 0;
        return v;
      }
      case 6: {
        const v = this.msr;
        this.msr &= 0xf0;
        return v;
      }
      default: return this.scr;
    }
  }

  write(off: number, b: number): void {
    const dlab = (this.lcr & 0x80) !== 0;
    switch (off) {
      case 0:
        if (dlab) { this.dll = b; break; }
        if (this.mcr & 0x10) {
          if (this.fifo.length < 16) this.fifo.push(b);
          else this.err |= 0x02; // overrun
        } else {
          this.emitted.push(b);
        }
        this.thrEmptyInterrupt = true; // the byte left at once: THR is empty again
        break;
      case 1:
        if (dlab) { this.dlm = b; break; }
        if (b & 0x02 && !(this.ier & 0x02)) this.thrEmptyInterrupt = true;
        this.ier = b & 0x0f;
        break;
      case 2: {
        const enable = (b & 0x01) !== 0;
        if (enable !== this.fifoEnabled || (enable && b & 0x02)) this.fifo = [];
        this.fifoEnabled = enable;
        break;
      }
      case 3: this.lcr = b; break;
      case 4: {
        const v = b & 0x1f;
        this.mcr = v;
        const lines = v & 0x10
          ? (v & 0x02 ? 0x10 : 0) | (v & 0x01 ? 0x20 : 0) | (v & 0x04 ? 0x40 : 0) | (v & 0x08 ? 0x80 : 0)
          : 0xb0;
        const changed = (this.msr ^ lines) & 0xf0;
        let d = this.msr & 0x0f;
        if (changed & 0x10) d |= 0x01;
        if (changed & 0x20) d |= 0x02;
        if (changed & 0x40 && !(lines & 0x40)) d |= 0x04;
        if (changed & 0x80) d |= 0x08;
        this.msr = lines | d;
        break;
      }
      case 5: case 6: break;
      default: this.scr = b;
    }
  }

  inject(bytes: Uint8Array): number {
    if (this.mcr & 0x10) return 0;
    const n = Math.min(16 - this.fifo.length, bytes.length);
    for (let i = 0; i < n; i++) this.fifo.push(bytes[i]!);
    return n;
  }
}

// Observes RBR-free registers of a UART whose state words are `words`, on a scratch copy.
const scratchUartWords = new Int32Array(new SharedArrayBuffer(UART_STATE_WORDS * 4));
const scratchUart = new Uart16550(scratchUartWords, { emit: () => {}, setIrq: () => {} });
function peekUart(words: Int32Array): { lsr: number; iir: number } {
  scratchUartWords.set(words);
  const iir = scratchUart.read(2);
  scratchUartWords.set(words);
  return { iir, lsr: scratchUart.read(5) };
}

/** IIR's interrupt id computed straight from the register words, by the 16550 priority order. */
function expectedIirFromWords(w: Int32Array): number {
  const ier = w[L.ier]!;
  if (ier & 0x04 && w[L.lsrErr]! & 0x1e) return 0x06; // receiver line status
  if (ier & 0x01 && w[L.rxCount]! > 0) return 0x04; // received data available
  if (ier & 0x02 && w[L.thrPending]!) return 0x02; // transmitter holding register empty
  if (ier & 0x08 && w[L.msr]! & 0x0f) return 0x00; // modem status
  return 0x01; // none pending
}

/** Checks every UART invariant for one UART; `reported` is the last level given to setIrq. */
function checkUart(label: string, w: Int32Array, model: UartModel, reported: boolean): void {
  const count = w[L.rxCount]!;
  const head = w[L.rxHead]!;
  inv(`${label}: RX FIFO never exceeds 16 bytes`, count >= 0 && count <= 16 && head >= 0 && head < 16, () => `count ${count} head ${head}`);
  const { lsr, iir } = peekUart(w);
  inv(`${label}: LSR.DR set iff the RX FIFO is non-empty`, ((lsr & 0x01) === 1) === (count > 0), () => `LSR ${lsr.toString(16)} count ${count}`);
  inv(`${label}: THRE and TEMT always set (TX never holds bytes)`, (lsr & 0x60) === 0x60, () => `LSR ${lsr.toString(16)}`);
  const expected = expectedIirFromWords(w);
  inv(`${label}: IIR reports the highest-priority pending interrupt`, (iir & 0x0f) === expected, () => `IIR ${iir.toString(16)}, expected id ${expected}`);
  inv(`${label}: IIR FIFO bits follow FCR enable`, (iir & 0xc0) === (w[L.fcr]! & 1 ? 0xc0 : 0));
  inv(`${label}: IRQ line level equals the computed pending state`, reported === (expected !== 0x01) && w[L.irqLevel] === (reported ? 1 : 0),
    () => `reported ${reported}, pending id ${expected}`);
  inv(`${label}: modem lines idle outside loopback`, (w[L.mcr]! & 0x10) !== 0 || (w[L.msr]! & 0xf0) === 0xb0);
  // The reference model agrees on the whole visible state.
  inv(`${label}: model interrupt id`, model.pending() === expected, () => `model ${model.pending()} device ${expected}`);
  inv(`${label}: model FIFO length`, model.fifo.length === count, () => `model ${model.fifo.length} device ${count}`);
  for (let i = 0; i < count; i++) {
    const b = w[L.rxFifo + ((head + i) & 15)]!;
    inv(`${label}: model FIFO contents`, b === model.fifo[i], () => `byte ${i}: model ${model.fifo[i]} device ${b}`);
  }
  inv(`${label}: model registers`, w[L.ier] === model.ier && w[L.lcr] === model.lcr && w[L.mcr] === model.mcr && w[L.scr] === model.scr &&
    w[L.dll] === model.dll && w[L.dlm] === model.dlm && w[L.msr] === model.msr && w[L.lsrErr] === model.err,
  () => `device ${JSON.stringify(Array.from(w.subarray(0, 9)))} model ${JSON.stringify(model)}`);
  countInvariant('UART (FIFO bound, LSR.DR, THRE/TEMT, IIR priority, IIR FIFO bits, IRQ level, modem idle, model agreement)', 1);
}

/** Records setIrq calls per line and checks each one is a change. */
class IrqLog {
  readonly level = new Map<number, boolean>();
  calls = 0;
  set = (line: number, level: boolean): void => {
    this.calls++;
    inv(`IRQ ${line}: setIrq only called on a change`, (this.level.get(line) ?? false) !== level, () => `level ${level} repeated`);
    this.level.set(line, level);
  };
  get(line: number): boolean { return this.level.get(line) ?? false; }
}

// ---- ACPI PM1 reference model ------------------------------------------------------------------
class AcpiModel {
  sts = 0; en = 0; cnt = 0; powerOffs = 0;
  readByte(at: number): number {
    if (at < 2) return (this.sts >>> (8 * at)) & 0xff;
    if (at < 4) return (this.en >>> (8 * (at - 2))) & 0xff;
    if (at < 6) return ((this.cnt | 1) >>> (8 * (at - 4))) & 0xff; // SCI_EN reads set
    return 0xff;
  }
  write(offset: number, size: number, value: number): void {
    let sleep = false;
    for (let i = 0; i < size; i++) {
      const b = (value >>> (8 * i)) & 0xff;
      const at = offset + i;
      if (at < 2) this.sts &= ~(b << (8 * at)) & 0xffff;
      else if (at < 4) this.en = (this.en & ~(0xff << (8 * (at - 2))) | (b << (8 * (at - 2)))) & 0xffff;
      else if (at < 6) {
        const full = (this.cnt & ~(0xff << (8 * (at - 4)))) | (b << (8 * (at - 4)));
        this.cnt = full & 0x1c07; // SCI_EN, BM_RLD, GBL_RLS, SLP_TYP are kept; SLP_EN is write-only
        if (at === 5 && full & 0x2000 && ((full >>> 10) & 7) === 5) sleep = true;
      }
    }
    if (sleep) this.powerOffs++;
  }
  press(): boolean {
    this.sts |= 0x100;
    return (this.en & 0x100) !== 0;
  }
}

function checkAcpi(w: Int32Array, model: AcpiModel, sci: boolean): void {
  const A = ACPI_PM_STATE_LAYOUT;
  const sts = w[A.sts]!, en = w[A.en]!, cnt = w[A.cnt]!;
  inv('ACPI: SCI level equals (PM1_STS & PM1_EN) != 0', sci === ((sts & en & 0xffff) !== 0) && w[A.sciLevel] === (sci ? 1 : 0),
    () => `sts ${sts.toString(16)} en ${en.toString(16)} sci ${sci}`);
  inv('ACPI: only PWRBTN_STS can ever be set', (sts & ~0x100) === 0, () => `sts ${sts.toString(16)}`);
  inv('ACPI: PM1_EN is 16 bits, PM1_CNT keeps only its stored bits', (en & ~0xffff) === 0 && (cnt & ~0x1c07) === 0);
  inv('ACPI: model registers', sts === model.sts && en === model.en && cnt === model.cnt,
    () => `device ${sts}/${en}/${cnt} model ${model.sts}/${model.en}/${model.cnt}`);
  countInvariant('ACPI PM (SCI level, STS bits, EN/CNT widths, model agreement)', 1);
}

// ---- Properties on single devices ----------------------------------------------------------------
const uartOpArb: fc.Arbitrary<Op> = fc.tuple(kindArb, fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 31 }), valueArb);

describe('device models under random accesses', () => {
  it('UART 16550: FIFO bound, LSR/IIR/IRQ invariants and the reference model hold after every access', () => {
    let n = 0;
    fc.assert(fc.property(fc.array(uartOpArb, { minLength: 1, maxLength: 4000, size: 'max' }), (ops) => {
      const words = new Int32Array(new SharedArrayBuffer(UART_STATE_WORDS * 4));
      Uart16550.initState(words);
      const emitted: number[] = [];
      const irq = new IrqLog();
      const uart = new Uart16550(words, { emit: (b) => emitted.push(b), setIrq: (l) => irq.set(COM1_IRQ, l) });
      // The host side has its own instance over the same words, as in the VMM.
      const host = new Uart16550(words, { emit: () => { throw new Error('the host side never transmits'); }, setIrq: (l) => irq.set(COM1_IRQ, l) });
      const model = new UartModel();
      for (const [k, off, len, value] of ops) {
        const kind = kindOf(k);
        if (kind === 'read') {
          const got = uart.read(off);
          const want = model.read(off);
          inv('UART: read value matches the model', got === want, () => `offset ${off}: device ${got} model ${want}`);
          inv('UART: reads are one byte', got >= 0 && got <= 0xff);
        } else if (kind === 'write') {
          uart.write(off, value);
          model.write(off, value & 0xff);
        } else {
          const bytes = Uint8Array.from({ length: len }, (_, i) => (value + i * 37) & 0xff);
          const taken = host.enqueueRx(bytes);
          inv('UART: host injection takes what the FIFO has room for', taken === model.inject(bytes), () => `took ${taken}`);
        }
        inv('UART: every THR write outside loopback emits exactly that byte', emitted.length === model.emitted.length &&
          (emitted.length === 0 || emitted[emitted.length - 1] === model.emitted[model.emitted.length - 1]));
        checkUart('UART', words, model, irq.get(COM1_IRQ));
        n++;
      }
    }), fcOptions(170));
    tally['UART 16550 (direct)'] = n;
  }, 60_000);

  it('ACPI PM1: SCI equals (STS & EN) != 0 and S5 powers off, for any width and offset', () => {
    let n = 0;
    const opArb: fc.Arbitrary<Op> = fc.tuple(kindArb, fc.integer({ min: 0, max: 7 }), sizeArb, valueArb);
    fc.assert(fc.property(fc.array(opArb, { minLength: 1, maxLength: 2000, size: 'max' }), (ops) => {
      const words = new Int32Array(new SharedArrayBuffer(ACPI_PM_STATE_WORDS * 4));
      let sci = false;
      let powerOffs = 0;
      const setSci = (level: boolean) => {
        inv('ACPI: setSci only called on a change', level !== sci);
        sci = level;
      };
      const pm = new AcpiPm(words, { onPowerOff: () => powerOffs++, setSci });
      const host = new AcpiPm(words, { onPowerOff: () => { throw new Error('the host never powers off'); }, setSci });
      const model = new AcpiModel();
      for (const [k, off, size, value] of ops) {
        const kind = kindOf(k);
        if (kind === 'read') {
          const got = pm.read(off, size);
          let want = 0;
          for (let i = 0; i < size; i++) want |= model.readByte(off + i) << (8 * i);
          inv('ACPI: read value matches the model', got === want >>> 0, () => `offset ${off} size ${size}: ${got} vs ${want >>> 0}`);
        } else if (kind === 'write') {
          const v = size === 4 ? value >>> 0 : value & (size === 2 ? 0xffff : 0xff);
          pm.write(off, size, v);
          model.write(off, size, v);
        } else {
          host.pressPowerButton();
          inv('ACPI: power button reports whether PWRBTN_EN is set', host.powerButtonEnabled() === model.press());
        }
        inv('ACPI: power-offs only from SLP_TYP=S5 with SLP_EN', powerOffs === model.powerOffs);
        checkAcpi(words, model, sci);
        n++;
      }
    }), fcOptions(100));
    tally['ACPI PM1 (direct)'] = n;
  }, 60_000);

  it('i8042, isa-debug-exit and the POST port: fixed answers, resets and power-offs only when asked', () => {
    let n = 0;
    const opArb = fc.tuple(fc.integer({ min: 0, max: 2 }), fc.boolean(), fc.boolean(), valueArb);
    fc.assert(fc.property(fc.array(opArb, { minLength: 1, maxLength: 3000, size: 'max' }), (ops) => {
      let resets = 0, offs = 0, wantResets = 0, wantOffs = 0, lastPost = 0;
      const kbc = new I8042({ onReset: () => resets++ });
      // The board's own (no --device): every write is a power off, never a reported value.
      const exit = new DebugExit({ onPowerOff: () => offs++, onDebugExit: () => { throw new Error('the board\'s own debug-exit reports no value'); } }, false);
      const postWords = new Int32Array(new SharedArrayBuffer(4));
      const post = new PostPort(postWords);
      for (const [dev, isWrite, cmdPort, value] of ops) {
        if (dev === 0) {
          const port = cmdPort ? 0x64 : 0x60;
          if (isWrite) {
            kbc.write(port, value & 0xff);
            if (port === 0x64 && (value & 0xff) === 0xfe) wantResets++;
          } else {
            inv('i8042: status reads idle, data reads 0', kbc.read(port) === (port === 0x64 ? 0x1c : 0));
          }
        } else if (dev === 1) {
          if (isWrite) { exit.write(value); wantOffs++; } else inv('debug-exit: reads 0', exit.read() === 0);
        } else if (isWrite) {
          post.write(value);
          lastPost = value & 0xff;
        } else {
          inv('POST: reads all ones', post.read() === 0xff);
        }
        inv('i8042: resets only on command 0xFE', resets === wantResets);
        inv('debug-exit: one power-off per write', offs === wantOffs);
        inv('POST: keeps the last code byte', post.lastCode() === lastPost);
        n++;
      }
    }), fcOptions(80));
    tally['i8042, debug-exit, POST (direct)'] = n;
  }, 60_000);
});

// ---- The whole board: every port the VMM answers plus random unmapped ones ----------------------
interface Region { base: number; end: number; name: string }
const REGIONS: Region[] = [
  { base: COM1_BASE, end: COM1_BASE + 8, name: 'com1' },
  { base: COM2_BASE, end: COM2_BASE + 8, name: 'com2' },
  { base: 0x60, end: 0x61, name: 'kbd-data' },
  { base: 0x64, end: 0x65, name: 'kbd-cmd' },
  { base: 0x600, end: 0x606, name: 'acpi' },
  { base: 0xf4, end: 0xf8, name: 'debug-exit' },
  { base: 0x80, end: 0x81, name: 'post' },
];
const regionAt = new Map<number, Region>();
for (const r of REGIONS) for (let p = r.base; p < r.end; p++) regionAt.set(p, r);
// Ports around every device edge (so accesses straddle devices and holes), plus the top of the space.
const NEAR = [...new Set(REGIONS.flatMap((r) => Array.from({ length: r.end - r.base + 6 }, (_, i) => r.base - 3 + i))
  .concat([0xfffd, 0xfffe, 0xffff, 0, 1]))].filter((p) => p >= 0 && p <= 0xffff);
const portArb = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...NEAR) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }) },
  // A few "hot" unmapped ports, so some fill table slots while the random ones overflow it.
  { weight: 1, arbitrary: fc.constantFrom(0x70, 0x71, 0xcf8, 0xcfc, 0x92, 0x3c0, 0x1f0, 0x20, 0x21, 0xa0, 0x40, 0x43, 0x510) },
);
const busOpArb: fc.Arbitrary<Op> = fc.tuple(kindArb, portArb, sizeArb, valueArb);

/** Reference model of the board's port space: per-byte dispatch, unmapped bytes float high. */
class BoardModel {
  readonly com = [new UartModel(), new UartModel()];
  readonly acpi = new AcpiModel();
  resets = 0;
  debugExits = 0;
  post = 0;
  readonly unhandled = new Map<number, number>();
  overflow = 0;

  private count(port: number): void {
    if (this.unhandled.has(port)) this.unhandled.set(port, this.unhandled.get(port)! + 1);
    else if (this.unhandled.size < UNHANDLED_SLOTS) this.unhandled.set(port, 1);
    else this.overflow++;
  }

  private fullyUnmapped(port: number, size: number): boolean {
    for (let i = 0; i < size; i++) if (regionAt.has(port + i)) return false;
    return true;
  }

  read(port: number, size: number): number {
    if (this.fullyUnmapped(port, size)) {
      this.count(port);
      return size === 4 ? 0xffffffff : size === 2 ? 0xffff : 0xff;
    }
    const r = regionAt.get(port);
    // A debug-exit read that fits reads 0 as a whole.
    if (r?.name === 'debug-exit' && port + size <= r.end) return 0;
    let v = 0;
    for (let i = 0; i < size; i++) v |= this.readByte(port + i) << (8 * i);
    return v >>> 0;
  }

  private readByte(p: number): number {
    const r = regionAt.get(p);
    if (!r) return 0xff;
    switch (r.name) {
      case 'com1': return this.com[0]!.read(p - r.base);
      case 'com2': return this.com[1]!.read(p - r.base);
      case 'kbd-data': return 0;
      case 'kbd-cmd': return 0x1c;
      case 'acpi': return this.acpi.readByte(p - r.base);
      case 'debug-exit': return 0;
      default: return 0xff; // POST
    }
  }

  write(port: number, size: number, value: number): void {
    if (this.fullyUnmapped(port, size)) { this.count(port); return; }
    const r = regionAt.get(port);
    if (r && (r.name === 'acpi' || r.name === 'debug-exit') && port + size <= r.end) {
      // Word-wide devices take an access that fits as one access.
      if (r.name === 'acpi') this.acpi.write(port - r.base, size, value);
      else this.debugExits++;
      return;
    }
    for (let i = 0; i < size; i++) {
      const p = port + i;
      const b = (value >>> (8 * i)) & 0xff;
      const rb = regionAt.get(p);
      if (!rb) continue;
      switch (rb.name) {
        case 'com1': this.com[0]!.write(p - rb.base, b); break;
        case 'com2': this.com[1]!.write(p - rb.base, b); break;
        case 'kbd-cmd': if (b === 0xfe) this.resets++; break;
        case 'acpi': this.acpi.write(p - rb.base, 1, b); break;
        case 'debug-exit': this.debugExits++; break;
        case 'post': this.post = b; break;
        default: break; // kbd-data ignores writes
      }
    }
  }
}

function checkUnhandledTable(t: Int32Array, model: BoardModel): void {
  let used = 0;
  let hole = false;
  const seen = new Set<number>();
  for (let i = 0; i < UNHANDLED_SLOTS; i++) {
    const key = t[2 * i]!;
    if (key === 0) { hole = true; continue; }
    inv('unhandled table: slots fill in order (no holes)', !hole);
    inv('unhandled table: one slot per port', !seen.has(key));
    seen.add(key);
    used++;
    inv('unhandled table: counts match the model', model.unhandled.get(key - 1) === t[2 * i + 1], () => `port ${key - 1}`);
  }
  inv('unhandled table stays bounded', used <= UNHANDLED_SLOTS && used === model.unhandled.size);
  inv('unhandled table: overflow counter matches the model', t[2 * UNHANDLED_SLOTS] === model.overflow);
  countInvariant('port bus (unhandled table bounded, in order, one slot per port, counts/overflow)', 1);
}

describe('the whole port bus of the board under random accesses', () => {
  it('no exception escapes; unmapped reads float high; every device invariant holds after every access', () => {
    let n = 0;
    let fullyUnmappedReads = 0;
    fc.assert(fc.property(fc.array(busOpArb, { minLength: 1, maxLength: 5500, size: 'max' }), (ops) => {
      const sab = createDeviceState();
      const all = new Int32Array(sab);
      // The PCI host bridge's configuration space is set at power-on; the port bus must leave it (and every other word) alone.
      const atPowerOn = all.slice();
      const irq = new IrqLog();
      const emitted: [number[], number[]] = [[], []];
      let powerOffs = 0;
      let resets = 0;
      const bus = attachDevices(sab, {
        emitConsole: (b) => emitted[0].push(b),
        emitAgent: (b) => emitted[1].push(b),
        setIrq: irq.set,
        onPowerOff: () => powerOffs++,
        onDebugExit: () => { throw new Error('no isa-debug-exit was asked for: 0xf4 powers off'); },
        onReset: () => resets++,
      });
      const input = new SerialInput(sab, irq.set);
      const button = new PowerButton(sab, irq.set);
      const model = new BoardModel();
      const com = [new Int32Array(sab, DEVICE_LAYOUT.com1 * 4, UART_STATE_WORDS), new Int32Array(sab, DEVICE_LAYOUT.com2 * 4, UART_STATE_WORDS)] as const;
      const acpiWords = new Int32Array(sab, DEVICE_LAYOUT.acpiPm * 4, ACPI_PM_STATE_WORDS);
      const table = new Int32Array(sab, DEVICE_LAYOUT.unhandled * 4, UNHANDLED_TABLE_WORDS);
      for (const [k, port, size, value] of ops) {
        const kind = kindOf(k);
        if (kind === 'read') {
          const got = bus.read(port, size);
          const want = model.read(port, size);
          inv('bus: read value matches the model (unmapped bytes read all ones)', got === want,
            () => `port 0x${port.toString(16)} size ${size}: device 0x${got.toString(16)} model 0x${want.toString(16)}`);
          inv('bus: reads fit the access width', got >= 0 && got <= (size === 4 ? 0xffffffff : size === 2 ? 0xffff : 0xff));
          let unmapped = true;
          for (let i = 0; i < size; i++) if (regionAt.has(port + i)) unmapped = false;
          if (unmapped) {
            fullyUnmappedReads++;
            inv('bus: unmapped reads are all ones', got === (size === 4 ? 0xffffffff : size === 2 ? 0xffff : 0xff));
          }
        } else if (kind === 'write') {
          const v = size === 4 ? value >>> 0 : value & (size === 2 ? 0xffff : 0xff);
          bus.write(port, size, v);
          model.write(port, size, v);
        } else if (kind === 'inject') {
          const which = (port & 1) as 0 | 1;
          const bytes = Uint8Array.from({ length: size * 5 }, (_, i) => (value + i * 37) & 0xff);
          const taken = input.inject(which, bytes);
          inv('bus: console injection takes what the FIFO has room for', taken === model.com[which]!.inject(bytes));
        } else {
          inv('bus: power button reports PWRBTN_EN', button.tryPress() === model.acpi.press());
        }
        inv('bus: lock released after every access', Atomics.load(all, DEVICE_LAYOUT.lock) === 0);
        inv('bus: console/agent bytes are exactly the THR writes', emitted[0].length === model.com[0]!.emitted.length &&
          emitted[1].length === model.com[1]!.emitted.length);
        inv('bus: resets only from 0xFE to port 0x64', resets === model.resets, () => `${resets} vs ${model.resets}`);
        inv('bus: power-offs only from S5 or isa-debug-exit writes', powerOffs === model.acpi.powerOffs + model.debugExits);
        checkUart('COM1', com[0], model.com[0]!, irq.get(COM1_IRQ));
        checkUart('COM2', com[1], model.com[1]!, irq.get(COM2_IRQ));
        checkAcpi(acpiWords, model.acpi, irq.get(9));
        checkUnhandledTable(table, model);
        n++;
      }
      // Nothing outside the devices' own words was touched.
      const owned = new Set<number>();
      const parts: [number, number][] = [[DEVICE_LAYOUT.lock, 1], [DEVICE_LAYOUT.unhandled, UNHANDLED_TABLE_WORDS],
        [DEVICE_LAYOUT.com1, UART_STATE_WORDS], [DEVICE_LAYOUT.com2, UART_STATE_WORDS], [DEVICE_LAYOUT.acpiPm, ACPI_PM_STATE_WORDS], [DEVICE_LAYOUT.post, 1]];
      for (const [at, len] of parts) for (let i = 0; i < len; i++) owned.add(at + i);
      for (let i = 0; i < all.length; i++) if (!owned.has(i)) inv('device SAB: words outside the port devices keep their power-on values', all[i] === atPowerOn[i], () => `word ${i}`);
      inv('POST: keeps the last code', all[DEVICE_LAYOUT.post] === model.post);
      const counts = bus.unhandledCounts();
      inv('unhandledCounts() reports the bounded table', counts.ports.length <= UNHANDLED_SLOTS && counts.overflow === model.overflow);
    }), fcOptions(240));
    tally['whole port bus (board)'] = n;
    expect(fullyUnmappedReads).toBeGreaterThan(1000);
  }, 120_000);
});

afterAll(() => {
  const total = Object.values(tally).reduce((a, b) => a + b, 0);
  const lines = Object.entries(tally).map(([k, v]) => `  ${k}: ${v.toLocaleString('en')} accesses`);
  const inv = Object.entries(invariantChecks).map(([k, v]) => `  ${k}: checked ${v.toLocaleString('en')} times`);
  process.stdout.write(`device fuzz: ${total.toLocaleString('en')} accesses in total, ${checksSinceFlush.toLocaleString('en')} invariant checks\n${lines.join('\n')}\n${inv.join('\n')}\n`);
  // Only meaningful when every property ran (a single-test filter runs fewer).
  if (Object.keys(tally).length === 4 && SCALE >= 1) expect(total).toBeGreaterThanOrEqual(1_000_000);
});
